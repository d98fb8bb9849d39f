"""The reproduction: smoke scale end to end, determinism, tolerance to missing results, the estimator class."""

import json

import numpy as np
import pytest

from icml24.common.experiment import execute_job
from icml24.conformal.rob_fcp import RobustFederatedConformal, apply_attack
from icml24.conformal.rob_fcp.reproduce import REPRODUCTION as R
from icml24.conformal.rob_fcp.reproduce import run_attack


@pytest.fixture(scope="module")
def smoke_results():
    return [execute_job(j) for j in R.jobs("smoke")]


def test_smoke_runs_and_analyzes(smoke_results):
    assert all(r.status == "ok" for r in smoke_results), [r.error for r in smoke_results]
    a = R.analyze(smoke_results, "smoke")
    assert a.verdict in ("supported", "not_supported", "inconclusive")
    assert a.tables and a.figures and len(a.checks) == 5
    json.dumps([r.metrics for r in smoke_results])
    attack = {r.job.config["attack"]: r.metrics for r in smoke_results if r.job.experiment == "attack"}
    # The efficiency attack makes plain FCP return every label; Rob-FCP matches the oracle.
    assert attack["efficiency"]["fcp_size"] == 10.0
    assert attack["efficiency"]["rob_known_coverage"] == attack["efficiency"]["oracle_coverage"]


def test_same_seed_same_metrics():
    cfg = {"dataset": "digits", "attack": "gaussian_noise", "frac_malicious": 0.2, "split": "iid"}
    assert run_attack(cfg, 3) == run_attack(cfg, 3)
    assert run_attack(cfg, 3) != run_attack(cfg, 4)


def test_analyze_tolerates_missing_results(smoke_results):
    assert R.analyze([], "smoke").verdict == "inconclusive"
    R.analyze(smoke_results[:1], "smoke")
    R.analyze([r for r in smoke_results if r.job.experiment == "certificate"], "smoke")


def test_job_grid_shapes():
    quick = R.jobs("quick")
    assert len({j.config["dataset"] for j in quick if j.experiment == "attack"}) == 3
    assert {j.config["frac_malicious"] for j in quick if j.experiment == "attack"} == {0.1, 0.2, 0.3, 0.4}
    assert {j.experiment for j in R.jobs("full", seeds=1)} == {"attack", "certificate", "noniid", "bins", "ablation"}


def test_estimator_api_under_attack_and_bad_calls():
    rng = np.random.default_rng(0)
    clients = [rng.beta(2, 5, size=100) for _ in range(12)]
    attacked = apply_attack(clients, [2, 7, 9], "efficiency")
    model = RobustFederatedConformal(alpha=0.1, n_bins=20).fit(attacked)
    assert model.n_malicious_ == 3
    np.testing.assert_array_equal(model.malicious_clients_, [2, 7, 9])
    sets = model.predict_sets(np.array([[0.1, 0.5, 0.99]]))
    assert sets.tolist() == [[True, True, False]]
    assert model.get_params()["n_bins"] == 20
    with pytest.raises(RuntimeError, match="not fitted"):
        RobustFederatedConformal().predict_sets(np.zeros((1, 2)))
    with pytest.raises(ValueError, match="sequence"):
        RobustFederatedConformal().fit(np.zeros(5))


def _attack_result(attack, frac, fcp, rob, seed=0):
    """A synthetic attack job result: (coverage, size) for FCP and Rob-FCP; oracle at (0.91, 2.0)."""
    from icml24.common.experiment import Job, JobResult

    cfg = {"dataset": "digits", "attack": attack, "frac_malicious": frac, "split": "iid"}
    metrics = {"fcp_coverage": fcp[0], "fcp_size": fcp[1], "oracle_coverage": 0.91, "oracle_size": 2.0,
               "rob_known_coverage": rob[0], "rob_known_size": rob[1], "rob_unknown_coverage": rob[0],
               "rob_unknown_size": rob[1], "detect_recall": 1.0, "m_hat_exact": 1.0}
    return JobResult(Job(R.slug, "attack", "m:f", cfg, seed), "ok", metrics)


def _cert_result(m, coverage, lower, seed=0):
    from icml24.common.experiment import Job, JobResult

    cfg = {"n_clients": 10, "n_per_client": 100, "n_malicious": m, "n_bins": 10, "n_test": 10, "attack": "coverage"}
    metrics = {"tau": m / (10 - m), "coverage": coverage, "size": 2.0, "fcp_coverage": 0.85, "lower": lower,
               "upper": 1.0, "above_lower": float(coverage >= lower)}
    return JobResult(Job(R.slug, "certificate", "m:f", cfg, seed), "ok", metrics)


def test_verdict_is_computed_from_the_numbers():
    broken = {"coverage": (0.80, 1.5), "efficiency": (1.0, 10.0), "gaussian_noise": (0.99, 4.0)}
    good = [_attack_result(a, f, broken[a] if f == 0.4 else (0.9, 2.0), (0.91, 2.0), s)
            for a in broken for f in (0.1, 0.4) for s in (0, 1)]  # fmt: skip
    cert = [_cert_result(m, 0.9, 0.7) for m in range(3)]
    assert R.analyze(good + cert, "quick").verdict == "supported"
    # Rob-FCP off target in every cell: not supported
    bad = [_attack_result(r.job.config["attack"], r.job.config["frac_malicious"],
                          (r.metrics["fcp_coverage"], r.metrics["fcp_size"]), (0.80, 1.5), r.job.seed)
           for r in good]  # fmt: skip
    assert R.analyze(bad + cert, "quick").verdict == "not_supported"
    # one run below its certified lower bound: not supported
    assert R.analyze(good + cert + [_cert_result(3, 0.6, 0.7)], "quick").verdict == "not_supported"
    # FCP does not break under one attack (at 40%): inconclusive at best
    intact = [r if r.job.config["attack"] != "coverage" or r.job.config["frac_malicious"] != 0.4
              else _attack_result("coverage", 0.4, (0.9, 2.0), (0.91, 2.0), r.job.seed) for r in good]  # fmt: skip
    assert R.analyze(intact + cert, "quick").verdict == "inconclusive"
