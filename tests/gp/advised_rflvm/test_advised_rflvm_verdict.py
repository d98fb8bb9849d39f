"""``analyze`` applies the README's verdict rule to hand-made results, and the rule's power (issue 12).

The rule: every decisive sub-claim is a one-sided paired t-test at alpha 0.05 (Holm within its family);
``not_supported`` needs significance the other way or TOST equivalence within ±0.02; the verdict is
supported only if every decisive check is, not_supported if any is.
"""

from __future__ import annotations

from unittest import mock

import numpy as np
import pytest

from icml24.common.decide import power
from icml24.common.experiment import Job, JobResult
from icml24.gp.advised_rflvm.reproduce import SLUG, analyze

MOD = "icml24.gp.advised_rflvm.reproduce"
GOOD = {  # method: (S-curve R², digits 1-NN, spread)
    "sm_learned": (0.9, 0.9, 1.0),
    "rbf_learned": (0.8, 0.8, 1.0),
    "rbf_fixed_large": (0.1, 0.2, 0.001),
    "sm_official": (0.85, 0.88, 1.0),
    "pca": (0.5, 0.6, 1.0),
    "isomap": (0.7, 0.7, 1.0),
    "kpca": (0.6, 0.6, 1.0),
}
SEEDS = 5


def _results(table: dict, *, mse_sm: float = 0.01, lin_ok: bool | None = True, noise: float = 0.01, rng=None,
             seeds: int = SEEDS) -> list[JobResult]:  # fmt: skip
    rng = rng or np.random.default_rng(0)
    out = []
    for seed in range(seeds):
        for method, (r2, knn, spread) in table.items():
            e1, e2 = noise * rng.standard_normal(2)
            out.append(JobResult(Job(SLUG, "s_curve", f"{MOD}:run_s_curve", {"method": method}, seed), "ok",
                                 {"r2": r2 + e1, "knn_acc": knn + e2, "spread": spread * (1 + 0.1 * rng.random())}))  # fmt: skip
            out.append(JobResult(Job(SLUG, "digits", f"{MOD}:run_digits", {"method": method}, seed), "ok",
                                 {"knn_acc": knn + e2, "spread": spread}))  # fmt: skip
        out.append(JobResult(Job(SLUG, "imputation", f"{MOD}:run_imputation", {}, seed), "ok",
                             {"mse_sm_learned": mse_sm + 0.001 * rng.random(), "mse_rbf_learned": 0.02,
                              "mse_mean_imputation": 0.05 + 0.001 * rng.random()}))  # fmt: skip
    if lin_ok is None:  # no linear sweep (no figure: keeps the power simulation fast)
        return out
    lin = {"sigma2_over_lambda1": [0.5, 0.9, 1.0, 2.0], "latent_norm": [2.0, 1.0, 0.0, 0.0 if lin_ok else 0.3],
           "lambda1": 4.0, "lambdaQ": 2.0, "learned_sigma2": 0.5, "learned_latent_norm": 3.0}  # fmt: skip
    out.append(JobResult(Job(SLUG, "linear_sweep", f"{MOD}:run_linear_sweep", {}, 0), "ok", lin))
    return out


def _check(a, cid):
    return next(c for c in a.checks if c.id == cid)


def test_every_check_holds():
    a = analyze(_results(GOOD), "smoke")
    decisive = [c for c in a.checks if c.decisive]
    assert a.verdict == "supported", [(c.id, c.verdict) for c in decisive]
    assert len(decisive) == 13 and all(c.verdict == "supported" for c in decisive)
    assert all(c.power is not None and 0 <= c.power <= 1 for c in decisive)
    assert a.rule and set(a.decided_by) == {c.id for c in decisive}
    ablation = [c for c in a.checks if c.id.startswith("official-loss")]
    assert ablation and not any(c.decisive for c in ablation)


def test_no_collapse_with_the_fixed_variance_refutes():
    table = GOOD | {"rbf_fixed_large": (0.1, 0.2, 0.5)}  # spread 50% of the learned one: no collapse
    a = analyze(_results(table), "smoke")
    assert _check(a, "collapse-fixed-sigma").verdict == "not_supported" and a.verdict == "not_supported"


def test_sm_kernel_is_decisive_worse_or_equal_refutes():
    worse = analyze(_results(GOOD | {"rbf_learned": (0.95, 0.95, 1.0)}), "smoke")
    assert _check(worse, "sm-vs-rbf-scurve").verdict == "not_supported" and worse.verdict == "not_supported"
    # Equal within ±0.02 with little noise: TOST shows no gain, which refutes a claimed gain.
    equal = analyze(_results(GOOD | {"rbf_learned": (0.9, 0.9, 1.0)}, noise=0.002, rng=np.random.default_rng(1)),
                    "smoke")  # fmt: skip
    assert _check(equal, "sm-vs-rbf-digits").verdict == "not_supported"


def test_noisy_small_differences_are_inconclusive_not_refuted():
    a = analyze(_results(GOOD | {"rbf_learned": (0.89, 0.89, 1.0)}, noise=0.08), "smoke")
    assert _check(a, "sm-vs-rbf-scurve").verdict == "inconclusive"
    assert a.verdict in ("inconclusive", "not_supported")  # other checks under that noise may go either way


def test_losing_to_a_baseline_or_to_mean_imputation_refutes_and_linear_check_decides():
    assert _check(analyze(_results(GOOD | {"isomap": (0.95, 0.7, 1.0)}), "smoke"), "vs-isomap-scurve").verdict == "not_supported"
    assert _check(analyze(_results(GOOD, mse_sm=0.1), "smoke"), "imputation-vs-mean").verdict == "not_supported"
    assert analyze(_results(GOOD, lin_ok=False), "smoke").verdict == "not_supported"


def test_one_seed_is_inconclusive():
    a = analyze(_results(GOOD, seeds=1), "smoke")
    assert a.verdict == "inconclusive"
    assert _check(a, "sm-vs-rbf-scurve").verdict == "inconclusive"


def _sm_rbf_verdict(effect: float, sd: float, seeds: int):
    def rule(rng):
        return _check(analyze(_results(GOOD | {"rbf_learned": (0.9 - effect, 0.9 - effect, 1.0)}, noise=sd,
                                       rng=rng, seeds=seeds, lin_ok=None), "smoke"), "sm-vs-rbf-scurve")  # fmt: skip

    return rule


@pytest.mark.parametrize(("effect", "lo", "hi"), [(0.0, 0.0, 0.12), (0.05, 0.7, 1.0)])
def test_power_of_the_sm_vs_rbf_rule_at_five_seeds(effect, lo, hi):
    """Power simulation of the kernel check through analyze itself: per-method seed noise 0.02 (paired
    difference sd ≈ 0.028, what the quick run shows for SM - RBF on the S-curve). With no gain the rule says
    supported rarely (≤ alpha, Holm makes it smaller); with a true gain of 0.05 R² it says supported in
    about 90% of runs at 5 seeds (the README's "Could this have failed?" number)."""
    # statsmodels' multipletests (inside decide.holm) runs gc.collect() on every call, 0.4 s with torch and
    # matplotlib loaded; it changes no number, so the simulation skips it.
    with mock.patch("gc.collect"):
        res = power(lambda x: x, _sm_rbf_verdict(effect, 0.02, SEEDS), n_sims=60, seed=1)
    assert lo <= res.supported <= hi, res.describe()
