"""Invariants of the alignment metrics of the Platonic Representation Hypothesis (Huh et al., ICML 2024)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from icml24.evaluation.platonic_representation import (
    best_over_layers,
    chance_mutual_knn,
    cka,
    clip_outliers,
    hsic,
    knn_indices,
    mutual_knn,
    unbiased_cka,
)


def _naive_mutual_knn(a: np.ndarray, b: np.ndarray, k: int) -> float:
    """One row at a time, with Python sets: the definition of m_kNN written out."""
    a = a / np.linalg.norm(a, axis=1, keepdims=True)
    b = b / np.linalg.norm(b, axis=1, keepdims=True)
    total = 0.0
    for i in range(len(a)):
        sa, sb = a @ a[i], b @ b[i]
        sa[i] = sb[i] = -np.inf
        na = set(np.argsort(-sa, kind="stable")[:k].tolist())
        nb = set(np.argsort(-sb, kind="stable")[:k].tolist())
        total += len(na & nb) / k
    return total / len(a)


def _rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def test_matches_naive_definition():
    rng = _rng()
    a = rng.normal(size=(300, 20))
    b = a @ rng.normal(size=(20, 12)) + rng.normal(size=(300, 12))
    for k in (1, 5, 17):
        assert mutual_knn(a, b, k=k) == pytest.approx(_naive_mutual_knn(a, b, k), abs=1e-12)


def test_chunking_and_torch_input_do_not_change_the_score():
    rng = _rng(1)
    a, b = rng.normal(size=(257, 8)), rng.normal(size=(257, 5))
    ref = mutual_knn(a, b, k=7)
    assert mutual_knn(a, b, k=7, chunk_size=10) == ref
    assert mutual_knn(torch.from_numpy(a), torch.from_numpy(b), k=7) == ref


def test_self_alignment_symmetry_and_range():
    rng = _rng(2)
    a, b = rng.normal(size=(200, 10)), rng.normal(size=(200, 30))
    assert mutual_knn(a, a, k=10) == 1.0
    assert mutual_knn(a, b, k=10) == pytest.approx(mutual_knn(b, a, k=10), abs=1e-15)
    assert 0.0 <= mutual_knn(a, b, k=10) <= 1.0


def test_chance_level_for_independent_features():
    # n = 1024, k = 10: E[m] = k/(n-1) ~ 0.00978; each draw has sd ~ 0.001, the mean of 20 far less.
    rng = _rng(3)
    vals = [mutual_knn(rng.normal(size=(1024, 32)), rng.normal(size=(1024, 32)), k=10) for _ in range(20)]
    assert np.mean(vals) == pytest.approx(chance_mutual_knn(1024, 10), abs=0.003)
    assert chance_mutual_knn(1024, 10) == pytest.approx(10 / 1023)


@settings(max_examples=10, deadline=None, derandomize=True)
@given(seed=st.integers(0, 10_000), scale=st.floats(0.01, 100.0))
def test_rotation_scale_and_feature_permutation_invariance(seed, scale):
    rng = _rng(seed)
    a = rng.normal(size=(120, 12))
    b = np.tanh(a @ rng.normal(size=(12, 9))) + 0.3 * rng.normal(size=(120, 9))
    q, _ = np.linalg.qr(rng.normal(size=(12, 12)))
    ref = mutual_knn(a, b, k=8)
    assert mutual_knn(a @ q, b, k=8) == ref
    assert mutual_knn(scale * a, b, k=8) == ref
    assert mutual_knn(a[:, rng.permutation(12)], b, k=8) == ref


def test_joint_row_permutation_invariant_independent_permutation_destroys_alignment():
    rng = _rng(4)
    a = rng.normal(size=(500, 16))
    b = a + 0.1 * rng.normal(size=a.shape)
    perm = rng.permutation(500)
    ref = mutual_knn(a, b, k=10)
    assert mutual_knn(a[perm], b[perm], k=10) == pytest.approx(ref, abs=1e-12)
    assert ref > 0.5
    assert mutual_knn(a, b[perm], k=10) < 3 * chance_mutual_knn(500, 10)


def test_k_equal_n_minus_one_gives_one():
    rng = _rng(5)
    a, b = rng.normal(size=(40, 3)), rng.normal(size=(40, 7))
    assert mutual_knn(a, b, k=39) == 1.0


def test_monotone_in_noise():
    rng = _rng(6)
    a = rng.normal(size=(400, 16))
    sigmas = [0.0, 0.1, 0.3, 1.0, 3.0]
    scores = [np.mean([mutual_knn(a, a + s * rng.normal(size=a.shape), k=10) for _ in range(3)]) for s in sigmas]
    assert scores[0] == 1.0
    assert all(x > y for x, y in zip(scores, scores[1:], strict=False)), scores


def test_knn_indices_exclude_self():
    a = _rng(7).normal(size=(50, 4))
    idx = knn_indices(a, 5).numpy()
    assert not (idx == np.arange(50)[:, None]).any()
    assert all(len(set(r)) == 5 for r in idx)


def test_clip_outliers():
    a = _rng(8).standard_t(df=2, size=(100, 20))
    assert torch.equal(clip_outliers(a, 1.0), torch.from_numpy(a))
    c = clip_outliers(a, 0.9).numpy()
    q = np.mean(np.quantile(np.abs(a), 0.9, axis=1))
    assert np.abs(c).max() == pytest.approx(q, rel=1e-12)
    with pytest.raises(ValueError, match="q"):
        clip_outliers(a, 0.0)


# ---------------------------------------------------------------------------------------------- CKA


def test_linear_cka_closed_form_and_identities():
    rng = _rng(9)
    a = rng.normal(size=(150, 10))
    b = a @ rng.normal(size=(10, 6)) + rng.normal(size=(150, 6))
    ac, bc = a - a.mean(0), b - b.mean(0)
    want = np.linalg.norm(ac.T @ bc) ** 2 / (np.linalg.norm(ac.T @ ac) * np.linalg.norm(bc.T @ bc))
    assert cka(a, b) == pytest.approx(want, abs=1e-12)
    assert cka(a, a) == pytest.approx(1.0, abs=1e-12)
    q, _ = np.linalg.qr(rng.normal(size=(10, 10)))
    assert cka(3.7 * a @ q, b) == pytest.approx(cka(a, b), abs=1e-12)
    assert cka(a + 5.0, b) == pytest.approx(cka(a, b), abs=1e-12)  # centering: translation-invariant


def test_biased_hsic_is_trace_formula():
    rng = _rng(10)
    x, y = rng.normal(size=(30, 4)), rng.normal(size=(30, 3))
    k, l_ = x @ x.T, y @ y.T
    h = np.eye(30) - 1 / 30
    assert hsic(k, l_) == pytest.approx(np.trace(k @ h @ l_ @ h) / 29**2, rel=1e-10)


def test_unbiased_hsic_of_independent_features_is_near_zero():
    rng = _rng(11)
    vals = [unbiased_cka(rng.normal(size=(150, 5)), rng.normal(size=(150, 5))) for _ in range(8)]
    assert abs(np.mean(vals)) < 0.02
    x, y = rng.normal(size=(150, 5)), rng.normal(size=(150, 5))
    k, l_ = x @ x.T, y @ y.T
    assert hsic(k, l_, unbiased=True) / np.sqrt(hsic(k, k, unbiased=True) * hsic(l_, l_, unbiased=True)) == pytest.approx(
        unbiased_cka(x, y), abs=1e-12
    )
    # The biased estimator of the same quantity is clearly positive for wide features and few samples.
    x, y = rng.normal(size=(100, 20)), rng.normal(size=(100, 20))
    assert cka(x, y) > 0.1 > 0.05 > abs(unbiased_cka(x, y))


def test_rbf_cka():
    rng = _rng(12)
    a = rng.normal(size=(80, 6))
    assert cka(a, a, kernel="rbf", sigma="median") == pytest.approx(1.0, abs=1e-12)
    q, _ = np.linalg.qr(rng.normal(size=(6, 6)))
    assert cka(a @ q, a, kernel="rbf", sigma=2.0) == pytest.approx(1.0, abs=1e-10)
    b = rng.normal(size=(80, 6))
    assert cka(a, b, kernel="rbf", sigma="median") < cka(a, a + 0.1 * b, kernel="rbf", sigma="median")
    with pytest.raises(ValueError, match="sigma"):
        cka(a, b, kernel="rbf", sigma=-1.0)


# -------------------------------------------------------------------------------------- best layers


def test_best_over_layers():
    rng = _rng(13)
    base = rng.normal(size=(200, 8))
    layers_a = [rng.normal(size=(200, 8)), base + 0.2 * rng.normal(size=(200, 8)), base @ rng.normal(size=(8, 4))]
    layers_b = [base, rng.normal(size=(200, 5))]
    res = best_over_layers(layers_a, layers_b, k=10)
    for i, la in enumerate(layers_a):
        for j, lb in enumerate(layers_b):
            assert res.scores[i, j] == pytest.approx(mutual_knn(la, lb, k=10), abs=1e-12)
    assert res.score == res.scores.max() and res.scores[res.best] == res.score
    assert res.best[1] == 0
    single = best_over_layers([layers_a[1]], [layers_b[0]], k=10)
    assert single.score == pytest.approx(mutual_knn(layers_a[1], layers_b[0], k=10))
    c = best_over_layers(layers_a, layers_b, metric="cka")
    assert c.scores[1, 0] == pytest.approx(cka(layers_a[1], layers_b[0]), abs=1e-12)


# ---------------------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("a", "b", "k", "exc", "match"),
    [
        (np.zeros((10, 3)), np.zeros((11, 3)), 3, ValueError, "same samples"),
        (np.ones((10, 3)), np.ones((10, 3)), 10, ValueError, "k must satisfy"),
        (np.ones((10, 3)), np.ones((10, 3)), 0, ValueError, "k must satisfy"),
        (np.ones((10, 3)), np.ones((10, 3)), 2.5, TypeError, "k must be an int"),
        (np.full((10, 3), np.nan), np.ones((10, 3)), 3, ValueError, "non-finite"),
        (np.ones(10), np.ones((10, 3)), 3, ValueError, "2-D"),
        (np.ones((1, 3)), np.ones((1, 3)), 1, ValueError, "at least 2 samples"),
        ([[1.0, 2.0]] * 5, np.ones((5, 3)), 1, TypeError, "numpy array or torch tensor"),
    ],
)
def test_bad_input(a, b, k, exc, match):
    with pytest.raises(exc, match=match):
        mutual_knn(a, b, k=k)


def test_bad_input_cka_and_layers():
    with pytest.raises(ValueError, match="same samples"):
        cka(np.ones((10, 3)), np.ones((9, 3)))
    with pytest.raises(ValueError, match="n >= 4"):
        unbiased_cka(np.ones((3, 2)), np.ones((3, 2)))
    with pytest.raises(ValueError, match="kernel"):
        cka(np.ones((10, 3)), np.ones((10, 3)), kernel="poly")
    with pytest.raises(ValueError, match="rows"):
        best_over_layers([np.ones((10, 3))], [np.ones((10, 3)), np.ones((8, 3))])
    with pytest.raises(ValueError, match="at least one"):
        best_over_layers([], [np.ones((10, 3))])
    with pytest.raises(ValueError, match="metric"):
        best_over_layers([np.ones((10, 3))], [np.ones((10, 3))], metric="svcca")
