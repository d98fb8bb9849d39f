"""Invariants of lp Lewis weights, the m-free sampling distribution, coresets and the solvers."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.linalg import eigh
from scipy.optimize import linprog
from sklearn.exceptions import NotFittedError

from icml24.optim.lp_coresets import (
    MultipleLpCoreset,
    coreset_probabilities,
    inclusion_probabilities,
    lewis_weights,
    lp_cost,
    p2_worst_case_error,
    sample_coreset,
    solve_multi_lp,
    union_of_column_coresets,
)
from icml24.optim.lp_coresets.lewis import LewisConvergenceWarning, _leverage, orthonormal_basis
from icml24.optim.lp_coresets.reproduce import make_regression


def data(n=400, d=4, m=3, seed=0):
    return make_regression(n, d, m, np.random.default_rng(seed))


# ------------------------------------------------------------------------------------------ Lewis weights
@pytest.mark.parametrize("p", [1.0, 1.5, 3.0, 4.0, 6.0])
def test_lewis_weights_fixed_point_sum_and_range(p):
    A, _ = data()
    res = lewis_weights(A, p, tol=1e-12, return_info=True)
    w = res.weights
    assert res.residual < 1e-8
    assert np.isclose(w.sum(), 4.0, rtol=1e-8)  # = rank(A)
    assert np.all(w >= 0) and np.all(w <= 1 + 1e-12)
    U = orthonormal_basis(A)
    assert np.allclose(w, _leverage(U, w ** (1 - 2 / p)) ** (p / 2), atol=1e-9)


def test_p2_lewis_weights_are_leverage_scores():
    A, _ = data(seed=1)
    lev = np.diag(A @ np.linalg.solve(A.T @ A, A.T))
    assert np.allclose(lewis_weights(A, 2.0), lev, atol=1e-12)


def test_undamped_iteration_fails_for_large_p_and_the_damped_one_converges():
    A, _ = data(seed=2)
    ok = lewis_weights(A, 8.0, return_info=True)
    assert ok.converged and ok.residual < 1e-9
    # the plain Cohen-Peng map (damping 1) does not converge at p >= 4: it blows up or stalls, loudly
    with pytest.raises((np.linalg.LinAlgError, RuntimeError)):
        lewis_weights(A, 8.0, damping=1.0, max_iter=300, on_fail="raise")


@pytest.mark.parametrize("p", [2.5, 3.0, 3.5, 3.99, 4.0, 6.0])
def test_damping_for_every_p_above_2_converges_fast_and_sums_to_the_rank(p):
    # d = 11, the case: at p = 3.99 the plain iteration stopped at 500 iterations, residual 9.5e-3
    A, _ = make_regression(2000, 11, 1, np.random.default_rng(0))
    res = lewis_weights(A, p, return_info=True, on_fail="raise")
    assert res.converged and res.n_iter <= 60
    assert np.isclose(res.weights.sum(), 11.0, rtol=1e-9)
    if p < 4:  # the plain iteration converges too, but slower (rate p/2 - 1 against (p-2)/(p+2))
        plain = lewis_weights(A, p, damping=1.0, return_info=True, on_fail="ignore")
        assert plain.n_iter > res.n_iter
        if plain.converged:
            assert np.allclose(plain.weights, res.weights, atol=1e-8)


def test_non_convergence_warns_or_raises_and_is_reported():
    A, _ = make_regression(500, 6, 1, np.random.default_rng(1))
    with pytest.warns(LewisConvergenceWarning, match="did not converge"):
        res = lewis_weights(A, 3.99, max_iter=3, return_info=True)
    assert not res.converged and res.n_iter == 3 and res.residual > 1e-10
    with pytest.raises(RuntimeError, match="did not converge"):
        lewis_weights(A, 1.5, max_iter=2, on_fail="raise")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a converged run is silent
        lewis_weights(A, 3.99)
        lewis_weights(A, 2.0, max_iter=2, on_fail="ignore")


@pytest.mark.parametrize("p", [1.0, 3.0])
def test_lewis_weights_invariances(p):
    A, _ = data(seed=3)
    w = lewis_weights(A, p, tol=1e-12)
    R = np.random.default_rng(0).standard_normal((4, 4))
    assert np.allclose(lewis_weights(A @ R, p, tol=1e-12), w, atol=1e-8)
    perm = np.random.default_rng(1).permutation(len(A))
    assert np.allclose(lewis_weights(A[perm], p, tol=1e-12), w[perm], atol=1e-8)


def test_lewis_weights_rank_deficient_and_zero_rows():
    A, _ = data(seed=4)
    A = np.c_[A, A[:, 0] + A[:, 1]]  # rank 4 with 5 columns
    A[:5] = 0.0
    w = lewis_weights(A, 1.5, tol=1e-12)
    assert np.isclose(w.sum(), 4.0) and np.all(w[:5] == 0)


# ------------------------------------------------------------------------------------------ sampling
def test_k_equal_n_keeps_every_row_with_weight_one_and_the_cost_is_exact():
    A, B = data()
    q = coreset_probabilities(A, B, 1.5)
    cs = sample_coreset(q, len(A), 0)
    assert len(cs) == len(A) and np.allclose(cs.weights, 1.0)
    X = np.random.default_rng(0).standard_normal((4, 3))
    assert np.isclose(cs.cost(A, B, X, 1.5), lp_cost(A, B, X, 1.5), rtol=1e-12)


@pytest.mark.parametrize("scheme", ["poisson", "iid"])
def test_coreset_cost_is_unbiased(scheme):
    A, B = data(n=300)
    p = 3.0
    q = coreset_probabilities(A, B, p)
    X = solve_multi_lp(A, B, p).X + 0.3
    f = lp_cost(A, B, X, p)
    rng = np.random.default_rng(0)
    est = np.array([sample_coreset(q, 30, rng, scheme=scheme).cost(A, B, X, p) for _ in range(2000)])
    se = est.std(ddof=1) / np.sqrt(len(est))
    assert abs(est.mean() - f) < 3.5 * se


def test_inclusion_probabilities_sum_to_k_and_are_capped():
    q = np.random.default_rng(0).pareto(1.0, 500) + 1e-4
    for k in (1, 7, 250, 500):
        pi = inclusion_probabilities(q / q.sum(), k)
        assert np.isclose(pi.sum(), k) and pi.max() <= 1.0


def test_distribution_invariances_duplicate_permute_scale():
    A, B = data(seed=5)
    p = 1.5
    X0 = solve_multi_lp(A, B, p).X
    tau = lewis_weights(A, p)
    q = coreset_probabilities(A, B, p, X0=X0, lewis=tau)
    assert np.isclose(q.sum(), 1.0)
    # duplicating every response column leaves q unchanged (r_i is proportional)
    q2 = coreset_probabilities(A, np.c_[B, B], p, X0=np.c_[X0, X0], lewis=tau)
    assert np.allclose(q, q2)
    # permuting the columns of B leaves q (and a seeded coreset) unchanged
    perm = [2, 0, 1]
    q3 = coreset_probabilities(A, B[:, perm], p, X0=X0[:, perm], lewis=tau)
    assert np.allclose(q, q3)
    assert np.array_equal(sample_coreset(q, 50, 3).indices, sample_coreset(q3, 50, 3).indices)
    # scaling (A, B) -> (sA, sB) leaves q unchanged
    q4 = coreset_probabilities(7.0 * A, 7.0 * B, p, X0=X0)
    assert np.allclose(q, q4, atol=1e-6)


def test_m1_is_the_single_response_coreset():
    A, B = data(m=1, seed=6)
    est = MultipleLpCoreset(p=1.5, k=200, random_state=0).fit(A, B[:, 0])
    est2 = MultipleLpCoreset(p=1.5, k=200, random_state=0).fit(A, B)
    assert np.array_equal(est.indices_, est2.indices_) and est.B_.shape == (len(est.indices_), 1)


def _per_column_bound(A, B, cs):
    wfull = np.zeros(len(A))
    wfull[cs.indices] = cs.weights
    e = 0.0
    for j in range(B.shape[1]):
        M = np.c_[A, B[:, j]]
        lam = eigh(M.T @ (M * wfull[:, None]), M.T @ M, eigvals_only=True)
        e = max(e, lam[-1] - 1, 1 - lam[0])
    return e


def test_p2_exact_worst_case_by_generalised_eigenvalues_and_flat_in_m():
    """At p = 2 the sup over ALL X of |cost_S/f - 1| is an eigenvalue problem; it must stay flat in m."""
    rng = np.random.default_rng(0)
    worst, per_col = {}, {}
    for m in (1, 16, 64):
        A, B = make_regression(3000, 4, m, np.random.default_rng(1))
        q = coreset_probabilities(A, B, 2.0)
        errs, cols = [], []
        X_star = solve_multi_lp(A, B, 2.0).X
        for s in range(5):
            cs = sample_coreset(q, 600, s)
            e = p2_worst_case_error(A, B, cs)
            errs.append(e)
            cols.append(_per_column_bound(A, B, cs))
            assert e <= cols[-1] + 1e-9  # the per-column maximum is an upper bound
            if m == 1:
                assert np.isclose(e, cols[-1], rtol=1e-6)  # and exact for one response
            for _ in range(10):  # no query exceeds the sup
                X = X_star + rng.standard_normal((4, m)) * rng.choice([0.01, 1.0, 100.0])
                assert abs(cs.cost(A, B, X, 2.0) / lp_cost(A, B, X, 2.0) - 1) <= e + 1e-9
        worst[m], per_col[m] = float(np.mean(errs)), float(np.mean(cols))
    # flat in m: no growth from 16 to 64 responses, a constant factor over m = 1; the per-column bound
    # (loose for m > 1) is larger
    assert max(worst.values()) < 0.1 and worst[64] <= 1.5 * worst[16] and worst[64] <= 3.0 * worst[1]
    assert per_col[64] > worst[64]


def test_coreset_beats_uniform_on_heavy_tails_at_p3():
    A, B = data(n=3000, m=8, seed=7)
    p = 3.0
    X = solve_multi_lp(A, B, p).X
    f = lp_cost(A, B, X, p)
    q = coreset_probabilities(A, B, p)
    ours = np.median([abs(sample_coreset(q, 200, s).cost(A, B, X, p) / f - 1) for s in range(10)])
    unif = np.median([abs(sample_coreset(np.full(len(A), 1 / len(A)), 200, s).cost(A, B, X, p) / f - 1)
                      for s in range(10)])  # fmt: skip
    assert ours < 0.5 * unif


def test_union_baseline_keeps_the_budget_and_is_unbiased_in_size():
    A, B = data(n=1000, m=16, seed=8)
    sizes = [len(union_of_column_coresets(A, B, 1.5, 100, s)) for s in range(5)]
    assert np.mean(sizes) <= 110


# ------------------------------------------------------------------------------------------ solvers
def test_p1_solver_matches_linear_programming():
    A, B = data(n=200, m=2, seed=9)
    ours = solve_multi_lp(A, B, 1.0, tol=1e-12, max_iter=500).cost
    ref = 0.0
    n, d = A.shape
    for j in range(2):
        c = np.r_[np.zeros(d), np.ones(2 * n)]
        res = linprog(c, A_eq=np.c_[A, np.eye(n), -np.eye(n)], b_eq=B[:, j],
                      bounds=[(None, None)] * d + [(0, None)] * (2 * n), method="highs")  # fmt: skip
        ref += res.fun
    assert ours >= ref * (1 - 1e-9) and ours <= ref * (1 + 1e-5)


@pytest.mark.parametrize("p", [1.5, 3.0, 5.0])
def test_solver_is_a_stationary_point(p):
    A, B = data(n=300, m=2, seed=10)
    w = np.random.default_rng(0).uniform(0.5, 2.0, 300)
    X = solve_multi_lp(A, B, p, w).X
    R = A @ X - B
    grad = A.T @ (w[:, None] * np.sign(R) * np.abs(R) ** (p - 1))
    scale = A.T @ (w[:, None] * np.abs(R) ** (p - 1))
    assert np.all(np.abs(grad) <= 1e-5 * np.abs(scale).max())


def test_p2_solver_is_weighted_least_squares():
    A, B = data(seed=11)
    w = np.random.default_rng(1).uniform(0.1, 3.0, len(A))
    X = solve_multi_lp(A, B, 2.0, w).X
    ref = np.linalg.solve(A.T @ (A * w[:, None]), A.T @ (B * w[:, None]))
    assert np.allclose(X, ref)


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 1000), p=st.sampled_from([1.0, 1.5, 3.0]), k=st.integers(5, 150))
def test_estimator_weights_positive_and_cost_finite(seed, p, k):
    A, B = data(n=150, m=2, seed=seed)
    est = MultipleLpCoreset(p=p, k=k, random_state=seed).fit(A, B)
    assert np.all(est.weights_ >= 1.0 - 1e-12)  # weights are 1/pi with pi <= 1
    assert np.isfinite(est.cost(np.zeros((4, 2))))
    assert np.isclose(est.probabilities_.sum(), 1.0)


# ------------------------------------------------------------------------------------------ bad input
def test_bad_input_raises_clear_errors():
    A, B = data()
    with pytest.raises(ValueError, match="p must be"):
        lewis_weights(A, 0.0)
    with pytest.raises(ValueError, match="p must be"):
        lewis_weights(A, -1.0)
    with pytest.raises(TypeError, match="p must be"):
        lewis_weights(A, "2")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="p must be"):
        MultipleLpCoreset(p=0, k=10).fit(A, B)
    with pytest.raises(ValueError, match="p must be"):
        coreset_probabilities(A, B, -2.0)
    assert len(MultipleLpCoreset(p=1.5, k=len(A) + 1).fit(A, B).indices_) == len(A)  # k is capped at n
    with pytest.raises(ValueError, match="k must be an int in"):
        MultipleLpCoreset(p=1.5, k=0).fit(A, B)
    with pytest.raises(ValueError, match="inconsistent numbers of samples: \\[400, 399\\]"):
        MultipleLpCoreset(p=1.5, k=10).fit(A, B[:-1])
    bad = A.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="non-finite"):
        lewis_weights(bad, 1.5)
    B2 = B.copy()
    B2[3, 1] = np.inf
    with pytest.raises(ValueError, match="non-finite"):
        solve_multi_lp(A, B2, 1.5)
    with pytest.raises(ValueError, match="p must be >= 1"):
        solve_multi_lp(A, B, 0.5)
    with pytest.raises(ValueError, match="A must be a 2-D"):
        lewis_weights(A[:, 0], 1.5)
    with pytest.raises(ValueError, match="weights"):
        solve_multi_lp(A, B, 1.5, np.ones(3))
    with pytest.raises(NotFittedError, match="not fitted"):
        MultipleLpCoreset().cost(np.zeros((4, 3)))
    est = MultipleLpCoreset(p=1.5, k=10, random_state=0).fit(A, B)
    with pytest.raises(ValueError, match="X must have shape"):
        est.cost(np.zeros((3, 3)))
    with pytest.raises(ValueError, match="scheme"):
        sample_coreset(np.full(10, 0.1), 3, scheme="stratified")
    with pytest.raises(ValueError, match="A must have at least one nonzero"):
        lewis_weights(np.zeros((5, 2)), 1.5)
