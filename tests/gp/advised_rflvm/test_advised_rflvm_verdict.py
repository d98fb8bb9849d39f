"""``analyze`` applies the README's verdict rule to hand-made results (the smoke test accepts any verdict)."""

from __future__ import annotations

from icml24.common.experiment import Job, JobResult
from icml24.gp.advised_rflvm.reproduce import SLUG, analyze

MOD = "icml24.gp.advised_rflvm.reproduce"
GOOD = {  # method: (S-curve R², digits 1-NN, spread)
    "sm_learned": (0.9, 0.9, 1.0),
    "rbf_learned": (0.8, 0.85, 1.0),
    "rbf_fixed_large": (0.1, 0.2, 0.001),
    "pca": (0.5, 0.6, 1.0),
    "isomap": (0.7, 0.7, 1.0),
    "kpca": (0.6, 0.6, 1.0),
}


def _results(table: dict, mse_sm: float = 0.01, lin_ok: bool = True) -> list[JobResult]:
    out = []
    for seed in (0, 1):
        for method, (r2, knn, spread) in table.items():
            out.append(JobResult(Job(SLUG, "s_curve", f"{MOD}:run_s_curve", {"method": method}, seed), "ok",
                                 {"r2": r2, "knn_acc": knn, "spread": spread}))  # fmt: skip
            out.append(JobResult(Job(SLUG, "digits", f"{MOD}:run_digits", {"method": method}, seed), "ok",
                                 {"knn_acc": knn, "spread": spread}))  # fmt: skip
        out.append(JobResult(Job(SLUG, "imputation", f"{MOD}:run_imputation", {}, seed), "ok",
                             {"mse_sm_learned": mse_sm, "mse_rbf_learned": 0.02, "mse_mean_imputation": 0.05}))  # fmt: skip
    lin = {"sigma2_over_lambda1": [0.5, 0.9, 1.0, 2.0], "latent_norm": [2.0, 1.0, 0.0, 0.0 if lin_ok else 0.3],
           "lambda1": 4.0, "lambdaQ": 2.0, "learned_sigma2": 0.5, "learned_latent_norm": 3.0}  # fmt: skip
    out.append(JobResult(Job(SLUG, "linear_sweep", f"{MOD}:run_linear_sweep", {}, 0), "ok", lin))
    return out


def _verdicts(table: dict = GOOD, **kw) -> tuple[str, list[str]]:
    a = analyze(_results(table, **kw), "smoke")
    return a.verdict, [c.verdict for c in a.checks]


def test_every_check_holds():
    v, checks = _verdicts()
    assert v == "supported" and checks == ["supported"] * 6


def test_no_collapse_with_the_fixed_variance_refutes():
    table = GOOD | {"rbf_fixed_large": (0.1, 0.2, 0.5)}  # spread 50% of the learned one: no collapse
    assert _verdicts(table) == ("not_supported", ["not_supported", "supported", "supported", "supported",
                                                  "supported", "supported"])  # fmt: skip


def test_losing_to_a_baseline_or_to_mean_imputation_is_inconclusive():
    assert _verdicts(GOOD | {"isomap": (0.95, 0.7, 1.0)})[0] == "inconclusive"
    assert _verdicts(mse_sm=0.1)[0] == "inconclusive"
    assert _verdicts(lin_ok=False)[0] == "inconclusive"


def test_sm_worse_than_rbf_is_reported_but_not_in_the_verdict():
    v, checks = _verdicts(GOOD | {"rbf_learned": (0.99, 0.99, 1.0)})
    assert checks[2] == "not_supported" and v == "supported"
