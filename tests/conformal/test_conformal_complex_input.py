"""Complex input is refused with a TypeError (issue 33): numpy would keep only the real part with a warning."""

from __future__ import annotations

import numpy as np
import pytest

from icml24.conformal import conformal_quantile
from icml24.conformal.rob_fcp import histogram_quantile, rob_fcp_bound, validate_histogram
from icml24.conformal.rob_fcp.weights import weight_cap


def test_conformal_quantile_refuses_complex_scores():
    scores = np.arange(1.0, 11.0)
    assert conformal_quantile(scores, 0.2) == 9.0
    with pytest.raises(TypeError, match="scores must hold real numbers, got complex"):
        conformal_quantile(scores + 0j, 0.2)
    with pytest.raises(TypeError, match="scores"):
        conformal_quantile([1.0, 2.0 + 1j, 3.0], 0.2)


def test_rob_fcp_client_counts_refuse_complex():
    counts = np.array([[3, 1, 0, 2], [1, 2, 2, 1]])
    want = histogram_quantile(counts, 0.1)
    assert histogram_quantile(counts.astype(np.float32), 0.1) == want
    with pytest.raises(TypeError, match="counts must hold real numbers, got complex"):
        histogram_quantile(counts + 0j, 0.1)
    with pytest.raises(TypeError, match="counts"):
        histogram_quantile(counts.sum(axis=0) + 0j, 0.1, n_clients=2)
    assert validate_histogram(np.ones(4), 4) is None
    assert validate_histogram(np.ones(4) + 0j, 4) == "counts are complex, not real"
    with pytest.raises(TypeError, match="sizes"):
        weight_cap(np.array([10.0, 20.0]) + 0j, 2.0)


def test_rob_fcp_bound_client_counts_are_ints():
    b = rob_fcp_bound(10, 8, 20000, n_bins=5)
    assert rob_fcp_bound(np.int64(10), np.int32(8), 20000, n_bins=5) == b
    for bad in (True, 10.0, 10 + 0j, "10"):
        with pytest.raises(TypeError, match="n_clients must be an int >= 1"):
            rob_fcp_bound(bad, 8, 20000, n_bins=5)
    with pytest.raises(ValueError, match="n_benign must be an int >= 1, got 0"):
        rob_fcp_bound(10, 0, 20000)
