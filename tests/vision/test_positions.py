"""The shared 2-D sine-cosine position embedding (:mod:`icml24.vision.positions`)."""

from __future__ import annotations

import math

import pytest
import torch

from icml24.privacy.vip import sincos_pos_embed
from icml24.vision.positions import sincos_2d


def test_layout_by_hand():
    side, dim = 3, 8
    emb = sincos_2d(side, dim)
    assert emb.shape == (9, 8) and emb.dtype == torch.float32
    omega = [1.0, 10000**-0.5]
    for i in range(side):
        for j in range(side):
            want = ([math.sin(i * w) for w in omega] + [math.cos(i * w) for w in omega]
                    + [math.sin(j * w) for w in omega] + [math.cos(j * w) for w in omega])  # fmt: skip
            assert torch.allclose(emb[i * side + j].double(), torch.tensor(want, dtype=torch.float64), atol=1e-7)


def test_rows_and_columns_use_separate_halves():
    emb = sincos_2d(4, 16).reshape(4, 4, 16)
    assert torch.equal(emb[:, 0, :8], emb[:, 3, :8])  # the row half does not depend on the column
    assert torch.equal(emb[0, :, 8:], emb[2, :, 8:])  # and the column half not on the row


@pytest.mark.parametrize("side,dim", [(1, 4), (5, 12), (7, 64)])
def test_vip_uses_the_shared_embedding(side, dim):
    assert torch.equal(sincos_pos_embed(dim, side), sincos_2d(side, dim))


def test_bad_input_names_the_argument():
    with pytest.raises(ValueError, match="dim must be divisible by 4"):
        sincos_2d(3, 6)
    with pytest.raises(ValueError, match="side"):
        sincos_2d(0, 8)
    with pytest.raises(TypeError, match="side"):
        sincos_2d(2.0, 8)
    with pytest.raises(TypeError, match="dim"):
        sincos_2d(2, True)
