"""A non-positive ``chunk_size`` is rejected with a clear error (it used to fail inside ``range``)."""

from __future__ import annotations

import numpy as np
import pytest

from icml24.evaluation.platonic_representation.metrics import knn_indices, mutual_knn


@pytest.mark.parametrize("chunk", [0, -3, 2.5])
def test_chunk_size_must_be_a_positive_int(chunk):
    a = np.random.default_rng(0).normal(size=(20, 4))
    with pytest.raises(ValueError, match="chunk_size"):
        knn_indices(a, 3, chunk_size=chunk)
    with pytest.raises(ValueError, match="chunk_size"):
        mutual_knn(a, a, k=3, chunk_size=chunk)


def test_chunking_does_not_change_the_neighbours():
    a = np.random.default_rng(1).normal(size=(50, 6))
    np.testing.assert_array_equal(knn_indices(a, 5, chunk_size=7).numpy(), knn_indices(a, 5, chunk_size=2048).numpy())
