"""Characterisation vectors: binning edges, simplex membership, agreement with a per-score loop."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from icml24.conformal.rob_fcp import client_histograms, coarsen_histograms, score_histogram
from icml24.conformal.rob_fcp.characterization import bin_index


def naive_histogram(scores, n_bins, lo=0.0, hi=1.0):
    h = np.zeros(n_bins)
    for s in scores:
        b = int(np.floor((s - lo) / (hi - lo) * n_bins))
        h[min(b, n_bins - 1)] += 1
    return h / len(scores)


def test_edges_go_to_first_and_last_bin():
    # s = 0 in the first bin and s = 1 in the last (the official code's int(sH) - 1 would merge them).
    h = score_histogram([0.0, 1.0], n_bins=4)
    np.testing.assert_array_equal(h, [0.5, 0.0, 0.0, 0.5])
    np.testing.assert_array_equal(bin_index(np.array([0.0, 0.25, 0.2499, 0.5, 1.0]), 4), [0, 1, 0, 2, 3])


def test_hand_computed_histogram():
    np.testing.assert_allclose(score_histogram([0.05, 0.15, 0.15, 0.95], n_bins=10),
                               [0.25, 0.5, 0, 0, 0, 0, 0, 0, 0, 0.25])  # fmt: skip
    np.testing.assert_array_equal(score_histogram([0.05, 0.15, 0.15], n_bins=2, normalize=False), [3, 0])


def test_custom_bounds():
    h = score_histogram([-1.0, 0.0, 0.99, 3.0], n_bins=4, bounds=(-1.0, 3.0))
    np.testing.assert_array_equal(h, [0.25, 0.5, 0.0, 0.25])


@settings(max_examples=60, deadline=None, derandomize=True)
@given(
    st.lists(st.lists(st.floats(0.0, 1.0), min_size=1, max_size=40), min_size=1, max_size=6),
    st.integers(1, 30),
)
def test_client_histograms_match_naive_loop_and_lie_on_simplex(clients, n_bins):
    v = client_histograms(clients, n_bins)
    assert v.shape == (len(clients), n_bins)
    assert (v >= 0).all()
    np.testing.assert_allclose(v.sum(axis=1), 1.0)
    for k, s in enumerate(clients):
        np.testing.assert_allclose(v[k], naive_histogram(s, n_bins), atol=1e-12)
        np.testing.assert_allclose(v[k], score_histogram(s, n_bins))


def test_coarsen_sums_adjacent_bins():
    fine = np.arange(12.0).reshape(2, 6)
    np.testing.assert_array_equal(coarsen_histograms(fine, 3), [[3, 12], [21, 30]])
    rng = np.random.default_rng(0)
    s = rng.uniform(size=500)
    np.testing.assert_allclose(coarsen_histograms(score_histogram(s, 50), 5), score_histogram(s, 10))


def test_float_overshoot_of_aps_is_clipped():
    # APS cumsums can exceed 1 by a rounding error; that must land in the last bin, not raise.
    np.testing.assert_array_equal(score_histogram([1.0 + 1e-15], n_bins=3), [0, 0, 1])


@pytest.mark.parametrize(
    ("scores", "kwargs", "match"),
    [
        ([], {}, "empty"),
        ([0.1, np.nan], {}, "NaN"),
        ([0.1, 1.5], {}, "score range"),
        ([-0.2], {}, "score range"),
        ([[0.1]], {}, "1-D"),
        ([0.1], {"n_bins": 0}, "n_bins"),
        ([0.1], {"bounds": (1.0, 0.0)}, "lo < hi"),
    ],
)
def test_bad_input(scores, kwargs, match):
    with pytest.raises(ValueError, match=match):
        score_histogram(scores, **kwargs)


def test_bad_client_list():
    with pytest.raises(ValueError, match="empty"):
        client_histograms([], 4)
    with pytest.raises(ValueError, match=r"client_scores\[1\]"):
        client_histograms([[0.1], [2.0]], 4)
    with pytest.raises(ValueError, match="multiple"):
        coarsen_histograms(np.ones(7), 2)
