"""Coresets for multiple lp regression whose size does not grow with the number of responses ``m``.

Paper: *Coresets for Multiple lp Regression*, D. P. Woodruff and T. Yasuda, ICML 2024 (PMLR 235).
https://arxiv.org/abs/2406.02432

Given ``A in R^{n x d}`` and ``m`` responses ``B in R^{n x m}``, a (strong) coreset is a weighted set of
rows ``S`` with ``sum_{i in S} w_i ||a_i^T X - b_i||_p^p = (1 +- eps) ||AX - B||_{p,p}^p`` for every ``X``. The
paper proves sizes ``O~(eps^-2 d)`` (``p < 2``) and ``O~(eps^-p d^{p/2})`` (``p > 2``) independent of ``m``.
Its proof combines lp Lewis-weight sampling of ``A`` with a sensitivity partition of the rows by residual
mass; we implement the importance-sampling scheme this analysis justifies (theory-inspired, not the
paper's full multi-stage construction; the paper's full text was not readable to us, so the sampling
probabilities below are derived from its ingredients, not copied from a theorem):

    tau_i   = lp Lewis weights of A  (sum = d)
    sigma_i = d^{max(0, p/2 - 1)} tau_i         (the lp sensitivity bound |a_i^T y|^p <= sigma_i ||A y||_p^p)
    r_i     = ||B_i - a_i^T X0||_p^p / ||B - A X0||_{p,p}^p   (the residual mass of row i over ALL m columns)
    s_i     = 2 c_p sigma_i + r_i,   c_p = 2^{max(0, p - 1)}   (row sensitivity bound, see below)
    q_i     = s_i / sum(s)                                      (row sampling distribution; the default)

Why ``s_i`` bounds the sensitivity ``sup_X sum_j |a_i^T x_j - B_ij|^p / f(X)`` for every ``m``: write
``a_i^T x_j - B_ij = a_i^T (x_j - x0_j) - R_ij`` and use ``|u + v|^p <= c_p (|u|^p + |v|^p)``; the first
term is at most ``sigma_i ||A(x_j - x0_j)||_p^p <= sigma_i c_p (f_j(X) + f_j(X0))`` column by column, and
summing over the columns with ``f(X0) ~ OPT <= f(X)`` gives ``c_p (2 c_p sigma_i f(X) + ||R_i||_p^p)``,
i.e. ``c_p s_i f(X)``. The total ``sum(s) = 2 c_p d^{max(1, p/2)} + 1`` does not depend on ``m``: that is
why the size needed does not grow with ``m``. ``mix=`` (a fixed weight on the residual part,
``q = (1 - mix) tau / d + mix r``) is kept as an option; ``mix=None`` is the bound above, which puts the
weight ``1 / (1 + 2 c_p d^{max(1, p/2)})`` on the residual part (0.066 at p = 1.5, 0.011 at p = 3 for d = 5).

Rows are drawn by Poisson sampling with inclusion probabilities ``pi_i = min(1, c q_i)``, ``c`` set so that
``sum(pi) = k`` (expected size exactly ``k``), and weights ``1 / pi_i``: the coreset cost is unbiased for
every ``X`` and ``k = n`` keeps every row with weight 1.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils import check_array
from sklearn.utils.validation import check_is_fitted, validate_data

from icml24.optim.lp_coresets._validation import (
    check_distribution,
    check_int,
    check_k,
    check_matrix,
    check_p,
    check_real,
    check_responses,
    check_rng,
    check_solution,
    check_weights,
)
from icml24.optim.lp_coresets.lewis import lewis_weights
from icml24.optim.lp_coresets.regression import _lp_cost, solve_multi_lp


def residual_mass(A: np.ndarray, B: np.ndarray, X0: np.ndarray, p: float) -> np.ndarray:
    """``r_i = ||B_i - a_i^T X0||_p^p / ||B - A X0||_{p,p}^p`` (uniform if the fit is exact)."""
    A = check_matrix(A, "A")
    B = check_responses(B, A.shape[0])
    X0 = check_solution(X0, A.shape[1], B.shape[1], "X0")
    p = check_p(p)
    return _residual_mass(A, B, X0, p)


def _residual_mass(A: np.ndarray, B: np.ndarray, X0: np.ndarray, p: float) -> np.ndarray:
    row = (np.abs(A @ X0 - B) ** p).sum(axis=1)
    tot = row.sum()
    if not (tot > 0 and np.isfinite(tot)):
        return np.full(len(row), 1.0 / len(row))
    return row / tot


def sensitivity_mix(p: float, d: int) -> float:
    """The residual part's weight in the sensitivity bound ``s_i = 2 c_p sigma_i + r_i`` (module docstring).

    ``1 / (1 + 2 c_p d^{max(1, p/2)})`` with ``c_p = 2^{max(0, p-1)}``: ``q = (1 - mix) tau/d + mix r``.
    """
    p = check_p(p)
    d = check_int(d, "d", lo=1)
    c_p = 2.0 ** max(0.0, p - 1.0)
    return 1.0 / (1.0 + 2.0 * c_p * d ** max(1.0, p / 2.0))


def coreset_probabilities(
    A: np.ndarray,
    B: np.ndarray,
    p: float,
    *,
    X0: np.ndarray | None = None,
    lewis: np.ndarray | None = None,
    mix: float | None = None,
) -> np.ndarray:
    """The row distribution ``q = (1 - mix) tau / sum(tau) + mix r`` of the module docstring.

    ``mix=None`` (default) is the row-sensitivity bound (:func:`sensitivity_mix` with ``d = sum(tau)``);
    ``X0`` defaults to the full-data lp solution (pass a pilot estimate to avoid a full solve); ``lewis``
    to the lp Lewis weights of ``A``.
    """
    A = check_matrix(A, "A")
    B = check_responses(B, A.shape[0])
    p = check_p(p)
    if mix is not None:
        mix = check_real(mix, "mix", lo=0.0, hi=1.0)
    if lewis is None:
        tau = lewis_weights(A, p, tol=1e-6)
    else:
        tau = check_weights(lewis, A.shape[0], "lewis")
        if not tau.sum() > 0:
            raise ValueError("lewis must not be all zero")
    if X0 is None:
        X0 = solve_multi_lp(A, B, max(p, 1.0)).X
    X0 = check_solution(X0, A.shape[1], B.shape[1], "X0")
    if mix is None:
        mix = sensitivity_mix(p, max(1, int(round(tau.sum()))))
    q = (1.0 - mix) * tau / tau.sum() + mix * _residual_mass(A, B, X0, p)
    return q / q.sum()


def inclusion_probabilities(q: np.ndarray, k: int) -> np.ndarray:
    """``pi_i = min(1, c q_i)`` with ``c`` chosen so that ``sum(pi) = k`` (water-filling over capped rows).

    Rows with ``q_i = 0`` are never included; ``k`` may not exceed the number of rows with ``q_i > 0``.
    """
    q = check_distribution(q)
    k = check_k(k, int(np.count_nonzero(q)))
    return _water_fill(q, float(k))


def _water_fill(q: np.ndarray, budget: float) -> np.ndarray:
    """``min(1, c q)`` with ``sum = budget`` (``0 < budget <= #nonzero q``)."""
    order = np.sort(q[q > 0])[::-1]
    csum_rest = np.cumsum(order[::-1])[::-1]  # sum of order[j:]
    # with the j largest capped at 1: c_j = (budget - j) / sum(order[j:]); the first j with
    # c_j * order[j] <= 1 is consistent (the uncapped rows stay below 1)
    j = np.arange(int(np.ceil(budget)))
    c = (budget - j) / csum_rest[j]
    ok = np.flatnonzero(c * order[j] <= 1.0 + 1e-12)
    c = c[ok[0]] if ok.size else np.inf
    return np.minimum(1.0, c * q)


@dataclass(frozen=True)
class Coreset:
    """A weighted row subset."""

    indices: np.ndarray
    """Row indices into the original data (sorted, unique)."""
    weights: np.ndarray
    """Their weights ``1 / pi_i`` (or ``1 / (k q_i)`` summed over repeats for i.i.d. sampling)."""

    def __post_init__(self) -> None:
        idx = np.asarray(self.indices)
        if idx.ndim != 1 or not (idx.size == 0 or np.issubdtype(idx.dtype, np.integer)):
            raise TypeError(f"indices must be a 1-D array of ints, got dtype {idx.dtype} and shape {idx.shape}")
        if np.any(idx < 0) or np.any(np.diff(idx) <= 0):
            raise ValueError("indices must be nonnegative, sorted and unique")
        object.__setattr__(self, "indices", idx)
        object.__setattr__(self, "weights", check_weights(self.weights, len(idx)))

    def __len__(self) -> int:
        return len(self.indices)

    def cost(self, A: np.ndarray, B: np.ndarray, X: np.ndarray, p: float) -> float:
        """``sum_{i in S} w_i ||a_i^T X - b_i||_p^p`` on the full-data arrays ``A, B``."""
        A = check_matrix(A, "A")
        B = check_responses(B, A.shape[0])
        if self.indices.size and self.indices[-1] >= A.shape[0]:
            raise ValueError(f"A has {A.shape[0]} rows but the coreset indexes row {self.indices[-1]}")
        X = check_solution(X, A.shape[1], B.shape[1])
        return _lp_cost(A[self.indices], B[self.indices], X, check_p(p), self.weights)


def sample_coreset(
    q: np.ndarray, k: int, rng: np.random.Generator | int | None = None, *, scheme: str = "poisson"
) -> Coreset:
    """Draw a weighted coreset from the row distribution ``q``.

    ``scheme="poisson"``: row ``i`` is kept independently with ``pi_i = min(1, c q_i)``, ``sum(pi) = k``,
    weight ``1/pi_i`` (unbiased; exact at ``k = n``). ``scheme="iid"``: ``k`` draws with replacement,
    weight ``1/(k q_i)`` per draw (unbiased).
    """
    rng = check_rng(rng)
    q = check_distribution(q)
    if scheme == "poisson":
        pi = inclusion_probabilities(q, k)
        keep = np.flatnonzero(rng.random(len(q)) < pi)
        return Coreset(keep, 1.0 / pi[keep])
    if scheme == "iid":
        check_k(k, len(q))
        qn = q / q.sum()
        draws = rng.choice(len(q), size=k, p=qn)
        idx, counts = np.unique(draws, return_counts=True)
        return Coreset(idx, counts / (k * qn[idx]))
    raise ValueError(f"scheme must be 'poisson' or 'iid', got {scheme!r}")


class MultipleLpCoreset(RegressorMixin, BaseEstimator):
    """A strong coreset for ``min_X ||AX - B||_{p,p}^p`` whose size does not depend on ``m``, as a
    scikit-learn multi-output regressor (it passes ``parametrize_with_checks``).

    ``fit(A, B)`` (scikit-learn's ``X, y``: the design matrix ``A`` (n, d) and the ``m`` responses ``B``
    (n, m) or (n,)) builds the coreset and solves the coreset objective once (the weak-coreset solution,
    on the ``k`` coreset rows only, so the fit's cost stays the coreset's); ``coef_`` holds that solution in
    scikit-learn's layout and ``predict(A_new) = A_new @ coef_.T`` (no intercept: add a column of ones to ``A``
    for one; ``predict`` never re-solves). ``score`` is scikit-learn's R^2 of those predictions.
    :meth:`solve` re-solves on the coreset, e.g. with other solver options, and returns ``(d, m)``.

    Args:
        p: the norm, ``p > 0`` (the solver needs ``p >= 1``).
        k: expected coreset size, ``k >= 1``; capped at ``n`` (with Poisson sampling ``k = n`` keeps every
            row with weight 1: nothing to compress).
        mix: weight of the residual-mass term in the sampling distribution (the rest is Lewis weights);
            ``None`` (default) is the row-sensitivity bound of the module docstring.
        pilot_size: rows of the Lewis-sampled pilot set used to get ``X0`` (default ``min(n, 20 d)``);
            ``0`` solves on the full data instead.
        scheme: ``"poisson"`` (default) or ``"iid"`` sampling.
        random_state: seed or ``np.random.Generator``.

    Attributes after :meth:`fit`: ``indices_``, ``weights_``, ``probabilities_`` (q), ``lewis_weights_``,
    ``X0_`` (the pilot solution), ``A_``, ``B_`` (the coreset rows), ``coef_`` (the coreset solution
    transposed, ``(m, d)``, or ``(d,)`` when ``y`` was 1-D, as in ``sklearn.linear_model``; only for
    ``p >= 1``, which the convex solver needs), ``n_features_in_``, ``n_outputs_``.
    """

    def __init__(
        self,
        p: float = 1.5,
        k: int = 1000,
        *,
        mix: float | None = None,
        pilot_size: int | None = None,
        scheme: str = "poisson",
        random_state: int | np.random.Generator | None = None,
    ) -> None:
        self.p = p
        self.k = k
        self.mix = mix
        self.pilot_size = pilot_size
        self.scheme = scheme
        self.random_state = random_state

    def fit(self, X: np.ndarray, y: np.ndarray) -> MultipleLpCoreset:
        """Build the coreset of the rows of ``X`` (= ``A``) for the responses ``y`` (= ``B``)."""
        X, y = _validate_fit_data(self, X, y)
        A = X
        n, d = A.shape
        B = check_responses(y, n, "y")
        p = check_p(self.p)
        k = min(check_int(self.k, "k", lo=1), n)  # k >= n: every row (Poisson: weight 1)
        if self.scheme not in ("poisson", "iid"):
            raise ValueError(f"scheme must be 'poisson' or 'iid', got {self.scheme!r}")
        if self.mix is not None:
            check_real(self.mix, "mix", lo=0.0, hi=1.0)
        pilot = min(n, 20 * d) if self.pilot_size is None else check_int(self.pilot_size, "pilot_size", lo=0, hi=n)
        rng = check_rng(self.random_state, "random_state")
        tau = lewis_weights(A, p, tol=1e-6)
        solve_p = max(p, 1.0)
        if pilot == 0 or pilot >= n:
            X0 = solve_multi_lp(A, B, solve_p, max_iter=50, tol=1e-6).X
        else:
            pc = sample_coreset(tau / tau.sum(), pilot, rng)
            X0 = solve_multi_lp(A[pc.indices], B[pc.indices], solve_p, pc.weights, max_iter=50, tol=1e-6).X
        q = coreset_probabilities(A, B, p, X0=X0, lewis=tau, mix=self.mix)
        cs = sample_coreset(q, k, rng, scheme=self.scheme)
        self.lewis_weights_ = tau
        self.X0_ = X0
        self.probabilities_ = q
        self.indices_ = cs.indices
        self.weights_ = cs.weights
        self.A_ = A[cs.indices]
        self.B_ = B[cs.indices]
        self.n_outputs_ = int(B.shape[1])
        self._single_output = y.ndim == 1
        if p >= 1:  # solved once here, so that predict is a matrix product (issue 35)
            sol = solve_multi_lp(self.A_, self.B_, p, self.weights_).X
            self.coef_ = sol[:, 0].copy() if self._single_output else sol.T.copy()
        elif hasattr(self, "coef_"):
            del self.coef_
        return self

    def predict(self, X: np.ndarray) -> np.ndarray:
        """``X @ coef_.T``, the coreset solution found in ``fit``: (n,) when ``fit`` got one response as a
        1-D ``y``, else (n, m)."""
        self._check_fitted()
        if not hasattr(self, "coef_"):
            raise ValueError(f"p must be >= 1 to predict (the lp regression solver needs a convex problem), got {self.p}")
        X = _named(lambda: validate_data(self, X, reset=False, dtype=np.float64), "X")
        return X @ self.coef_.T

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        tags.target_tags.single_output = True
        return tags

    @property
    def coreset_(self) -> Coreset:
        self._check_fitted()
        return Coreset(self.indices_, self.weights_)

    def cost(self, X: np.ndarray) -> float:
        """The coreset's estimate of ``||AX - B||_{p,p}^p``."""
        self._check_fitted()
        X = check_solution(X, self.A_.shape[1], self.B_.shape[1])
        return _lp_cost(self.A_, self.B_, X, float(self.p), self.weights_)

    def solve(self, **kwargs: object) -> np.ndarray:
        """The minimiser of the coreset objective (the weak-coreset solution), shape ``(d, m)``."""
        self._check_fitted()
        return solve_multi_lp(self.A_, self.B_, float(self.p), self.weights_, **kwargs).X  # type: ignore[arg-type]

    def _check_fitted(self) -> None:
        check_is_fitted(self, "indices_", msg="MultipleLpCoreset is not fitted: call fit(A, B) first")


def _named(validate, name: str):
    """Run a scikit-learn validation and say which argument failed (its messages often do not)."""
    try:
        return validate()
    except (TypeError, ValueError) as exc:
        raise type(exc)(f"{name}: {exc}") from exc


def _validate_fit_data(est: MultipleLpCoreset, X: object, y: object) -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's checks of ``fit(X, y)`` (its message patterns kept), each error prefixed with the
    argument at fault."""
    if y is None:
        raise ValueError("MultipleLpCoreset requires y to be passed, but the target y is None (y = B, the responses)")
    _named(lambda: check_array(X, dtype=np.float64, input_name="X"), "X (the design matrix A, n x d)")
    _named(lambda: check_array(y, dtype=np.float64, ensure_2d=False, input_name="y"), "y (the responses B, n x m)")
    return _named(
        lambda: validate_data(est, X, y, multi_output=True, y_numeric=True, dtype=np.float64), "X and y"
    )


def uniform_probabilities(n: int) -> np.ndarray:
    """The uniform-sampling baseline's row distribution."""
    n = check_int(n, "n", lo=1)
    return np.full(n, 1.0 / n)


def union_of_column_coresets(
    A: np.ndarray,
    B: np.ndarray,
    p: float,
    k: int,
    rng: np.random.Generator | int | None = None,
    *,
    X0: np.ndarray | None = None,
    lewis: np.ndarray | None = None,
    mix: float | None = None,
) -> Coreset:
    """Baseline: a single-response coreset of size ``k // m`` per column, united (total expected size ~k).

    This is what one gets without the paper's result: each column's coreset is built for that response
    alone, and the union must share the budget ``k`` between the ``m`` responses.
    """
    A = check_matrix(A, "A")
    n = A.shape[0]
    B = check_responses(B, n)
    p = check_p(p)
    k = check_k(k, n)
    rng = check_rng(rng)
    m = B.shape[1]
    if mix is not None:
        mix = check_real(mix, "mix", lo=0.0, hi=1.0)
    tau = lewis_weights(A, p, tol=1e-6) if lewis is None else check_weights(lewis, n, "lewis")
    if not tau.sum() > 0:
        raise ValueError("lewis must not be all zero")
    X0 = solve_multi_lp(A, B, max(p, 1.0)).X if X0 is None else check_solution(X0, A.shape[1], m, "X0")
    # each column gets an expected budget k/m (fractional when k < m, so that the union's expected size
    # stays <= k); a row's weight in the union is 1 / P(row in union), which keeps the union unbiased
    miss = np.ones(n)
    for j in range(m):
        qj = coreset_probabilities(A, B[:, j], p, X0=X0[:, j : j + 1], lewis=tau, mix=mix)
        miss *= 1.0 - _water_fill(qj, k / m)
    pi = 1.0 - miss
    keep = np.flatnonzero(rng.random(n) < pi)
    return Coreset(keep, 1.0 / pi[keep])


def p2_worst_case_error(A: np.ndarray, B: np.ndarray, coreset: Coreset) -> float:
    """The exact strong-coreset error ``sup_X |cost_S(X)/f(X) - 1|`` at ``p = 2``, over ALL ``X``.

    With ``v = (x_1, ..., x_m, t)`` both costs are quadratic forms in ``v`` (at ``t = -1``) with an arrowhead
    structure: ``x_j`` blocks ``A^T W A`` on the diagonal, couplings ``A^T W b_j`` to ``t`` and
    ``sum_j b_j^T W b_j`` in the corner (``W = I`` for ``f``). The ratio is scale-invariant, so the sup is
    the extreme generalised eigenvalues of the ``(dm + 1)``-dimensional pencil. (The per-column bound
    ``max_j`` of the eigenvalues of ``([A, b_j]^T W [A, b_j], [A, b_j]^T [A, b_j])`` is only an upper bound
    for ``m > 1``: one column cannot make the others' costs vanish.)
    """
    from scipy.linalg import eigh

    A = check_matrix(A, "A")
    B = check_responses(B, A.shape[0])
    n, d = A.shape
    m = B.shape[1]
    if not isinstance(coreset, Coreset):
        raise TypeError(f"coreset must be a Coreset, got {type(coreset).__name__}")
    if coreset.indices.size and coreset.indices[-1] >= n:
        raise ValueError(f"coreset indexes row {coreset.indices[-1]} but A has {n} rows")
    w = np.zeros(n)
    w[coreset.indices] = coreset.weights

    def pencil(weights: np.ndarray) -> np.ndarray:
        Aw = A * weights[:, None]
        K = np.zeros((d * m + 1, d * m + 1))
        AtA = A.T @ Aw
        AtB = Aw.T @ B  # (d, m)
        for j in range(m):
            K[j * d : (j + 1) * d, j * d : (j + 1) * d] = AtA
            K[j * d : (j + 1) * d, -1] = AtB[:, j]
            K[-1, j * d : (j + 1) * d] = AtB[:, j]
        K[-1, -1] = float(weights @ (B**2).sum(axis=1))
        return K

    lam = eigh(pencil(w), pencil(np.ones(n)), eigvals_only=True)
    return float(max(lam[-1] - 1.0, 1.0 - lam[0]))
