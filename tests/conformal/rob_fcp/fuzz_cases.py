"""Fuzz cases for rob-fcp's exported callables (see tests/test_fuzz_api.py)."""

import numpy as np

from icml24.conformal import rob_fcp as rf

RNG = np.random.default_rng(0)
CLIENTS = [RNG.beta(2, 5, size=40) for _ in range(6)]
VECTORS = rf.client_histograms(CLIENTS, 10)
DIST = rf.pairwise_distances(VECTORS)
COUNTS = [rf.score_histogram(c, 20, normalize=False) for c in CLIENTS]
LABELS = np.array([0, 1, 2] * 20)
PROBS = np.full((60, 3), 0.1) + 0.7 * np.eye(3)[LABELS]
BAD_INT = [0, -1, 2.5, "3", None]
BAD_ALPHA = [0.0, 1.0, -0.1, "x"]
BAD_SCORES = [np.array([0.1, np.nan]), np.array([0.5, 1.5]), np.ones((2, 2)), np.array([])]

FUZZ_CASES = [
    dict(fn=rf.score_histogram, args=(CLIENTS[0], 10), invalid={"scores": BAD_SCORES, "n_bins": BAD_INT,
                                                                "bounds": [(1.0, 0.0), (0.0,), "x"],
                                                                "normalize": ["yes"]}),
    dict(fn=rf.client_histograms, args=(CLIENTS, 10), invalid={"client_scores": [[], [np.array([])], 3],
                                                               "n_bins": BAD_INT}),
    dict(fn=rf.coarsen_histograms, args=(np.ones((3, 20)), 2), invalid={"histograms": [np.ones(3), np.ones((2, 5))],
                                                                        "factor": BAD_INT}),
    dict(fn=rf.pairwise_distances, args=(VECTORS,), invalid={"vectors": [np.ones(3), np.full((2, 2), np.nan)],
                                                             "ord": [0, -1, "x"]}),
    dict(fn=rf.maliciousness_scores, args=(DIST, 4), invalid={"n_benign": [0, 7, 2.5], "neighbor_mode": ["all"],
                                                              "distances": [np.ones((2, 3)), -np.ones((6, 6))]}),
    dict(fn=rf.select_benign, args=(np.arange(6.0), 4),
         invalid={"maliciousness": [np.ones((2, 2)), np.array([0.0, np.nan, 1.0, 2.0, 3.0, 4.0])],
                  "n_benign": [0, 7, "x"]},
         allowed={"maliciousness": "+inf marks a malformed report (aggregate_histograms) and ranks it last; NaN "
                                   "is refused (listed above)"}),
    dict(fn=rf.detect_malicious, args=(VECTORS, 2), invalid={"n_malicious": [-1, 3, 6, 1.5, "2"],
                                                             "neighbor_mode": ["x"]}),
    dict(fn=rf.estimate_num_malicious, args=(VECTORS,), invalid={"min_malicious": [-1, "x"], "variance": ["x"],
                                                                 "var_floor": [-1.0, 0.0], "n_rounds": [0, 1.5]}),
    dict(fn=rf.federated_rank, args=(100, 5, 0.1), invalid={"n_total": [0, -1, 2.5], "n_clients": [0, "x"],
                                                            "alpha": BAD_ALPHA, "rank_rule": ["fcpp"]}),
    dict(fn=rf.federated_quantile, args=(CLIENTS, 0.1), invalid={"client_scores": [[], [np.array([np.nan])]],
                                                                 "alpha": BAD_ALPHA, "rank_rule": ["x"]}),
    dict(fn=rf.histogram_quantile, args=(np.stack(COUNTS), 0.1),
         invalid={"counts": [np.ones(3), -np.ones((2, 3)), np.full((2, 3), 0.5), np.zeros((2, 3))],
                  "alpha": BAD_ALPHA, "n_clients": [0, -1, "x"], "rank_rule": ["x"], "bounds": [(1.0, 0.0)]}),
    dict(fn=rf.fcp_quantile, args=(CLIENTS, 0.1), invalid={"alpha": BAD_ALPHA, "rank_rule": ["x"]}),
    dict(fn=rf.oracle_quantile, args=(CLIENTS, [0, 1, 2], 0.1), invalid={"benign": [[], [9], [-1], [0.5]],
                                                                        "alpha": BAD_ALPHA}),
    dict(fn=rf.rob_fcp_quantile, args=(CLIENTS, 0.1, 1), kwargs={"n_bins": 10},
         invalid={"client_scores": [[], [np.array([np.nan])] * 3], "n_malicious": [-1, 3, 1.5],
                  "n_bins": BAD_INT, "neighbor_mode": ["x"], "quantile_bins": [0, 1.5],
                  "max_weight_ratio": [0.5, "x"]}),
    dict(fn=rf.select_clients, args=(VECTORS, 1), invalid={"vectors": [np.ones(3)], "n_malicious": [-1, 3]}),
    dict(fn=rf.RobustFederatedConformal("precomputed", n_bins=10, n_malicious=1).conformalize_scores, args=(CLIENTS,),
         invalid={"client_scores": [np.zeros(5), [], 3]}, covers=(rf.RobustFederatedConformal,)),
    dict(fn=rf.RobustFederatedConformal("precomputed", n_bins=10).fit, args=(PROBS, LABELS),
         kwargs={"clients": np.arange(60) % 3},
         invalid={"X": [PROBS * 2, np.ones(3)], "y": [LABELS + 5], "clients": [np.arange(5), np.ones((60, 2))]}),
    dict(fn=rf.aggregate_histograms, args=(COUNTS,), kwargs={"n_bins": 10, "refine": 2, "n_malicious": 1},
         invalid={"alpha": BAD_ALPHA, "n_bins": BAD_INT, "refine": BAD_INT, "n_malicious": [-1, 1.5, "1"],
                  "num_examples": [[1, 2]], "max_weight_ratio": [0.5, "x"]},
         allowed={"counts": "a Byzantine client may send anything: malformed counts are rejected, not raised"}),
    dict(fn=rf.validate_histogram, args=(COUNTS[0], 20), invalid={"expected_bins": [0, -1, 2.5, "x"]},
         allowed={"counts": "returns the reason a report is malformed instead of raising (the server's check)",
                  "num_examples": "returns the reason a report is malformed instead of raising"}),
    dict(fn=rf.rob_fcp_bound, args=(10, 8, 100), kwargs={"n_bins": 10, "alpha": 0.1, "beta": 0.05},
         invalid={"n_clients": BAD_INT, "n_benign": [0, 11, 4, "x"], "n_per_client": BAD_INT,
                  "alpha": BAD_ALPHA, "beta": [0.0, 1.0, "x"], "n_bins": BAD_INT}),
    dict(fn=rf.coverage_attack, args=(CLIENTS[0],), invalid={"scores": [np.ones((2, 2)), np.array([np.nan])],
                                                             "low": ["x"]}),
    dict(fn=rf.efficiency_attack, args=(CLIENTS[0],), invalid={"scores": [np.ones((2, 2))], "high": ["x"]}),
    dict(fn=rf.gaussian_noise_attack, args=(CLIENTS[0],), kwargs={"rng": 0},
         invalid={"scores": [np.array([np.nan])], "sigma": [-1.0, "x"], "rng": ["x", 1.5], "bounds": [(1.0, 0.0)]}),
    dict(fn=rf.copy_attack, args=(CLIENTS, 0), invalid={"target": [-1, 6, 1.5, "0"], "client_scores": [[]]}),
    dict(fn=rf.apply_attack, args=(CLIENTS, [1, 2], "coverage"),
         invalid={"malicious": [[9], [-1], [0.5]], "attack": ["x", None], "sigma": [-1.0],
                  "copy_target": [9, 1.5]}),
    dict(fn=rf.iid_split, args=(60, 3), kwargs={"rng": 0}, invalid={"n_samples": BAD_INT, "n_clients": [0, 61, "x"],
                                                                    "rng": ["x"]}),
    dict(fn=rf.dirichlet_label_split, args=(LABELS, 3), kwargs={"rng": 0},
         invalid={"labels": [np.ones((2, 2)), np.array([0.5, 1.0])], "n_clients": [0, "x"],
                  "beta": [0.0, -1.0, "x"], "rng": ["x"]}),
]

EXEMPT = {
    "CoverageBound": "a result record returned by rob_fcp_bound",
    "Detection": "a result record returned by detect_malicious",
    "NumMaliciousEstimate": "a result record returned by estimate_num_malicious",
    "RobFCPResult": "a result record returned by rob_fcp_quantile",
    "ServerAggregate": "a result record returned by aggregate_histograms",
    "RobFCPStrategy": "Flower strategy: every per-client fault is caught inside it, one test per case in "
                      "tests/conformal/rob_fcp/test_rob_fcp_flower_faults.py",
    "histogram_reply": "Flower client reply builder, fed by score_histogram (fuzzed above)",
    "evaluation_reply": "Flower client reply builder, fed by prediction_sets (fuzzed in tests/conformal)",
    "make_client_app": "Flower wiring (a ClientApp factory); exercised in test_rob_fcp_flower_sim.py",
    "make_server_app": "Flower wiring (a ServerApp factory); exercised in test_rob_fcp_flower_sim.py",
    "run_rob_fcp_simulation": "starts Flower's Ray simulation engine (slow-marked test)",
}
