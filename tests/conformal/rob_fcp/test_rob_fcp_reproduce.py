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
