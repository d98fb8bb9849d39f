"""Rob-FCP: Certifiably Byzantine-Robust Federated Conformal Prediction (Kang, Lin, Sun, Xiao & Li, ICML 2024,
https://arxiv.org/abs/2406.01960; official code https://github.com/kangmintong/Rob-FCP).

Clients summarise their calibration scores as histograms (characterisation vectors); the server scores
each client by its summed distance to its nearest peers, keeps the least suspicious ``K_b`` clients
(estimating the number of malicious clients when it is unknown) and runs federated conformal calibration on
them. A closed-form certificate bounds the coverage under Byzantine clients.

The Flower strategy lives in :mod:`icml24.conformal.rob_fcp.flower` (needs the ``federated`` extra); its
names are importable from this package and load Flower only on first use.
"""

from __future__ import annotations

from typing import Any

from icml24.conformal.rob_fcp.aggregation import ServerAggregate, aggregate_histograms, validate_histogram
from icml24.conformal.rob_fcp.attacks import (
    ATTACKS,
    apply_attack,
    copy_attack,
    coverage_attack,
    efficiency_attack,
    gaussian_noise_attack,
)
from icml24.conformal.rob_fcp.certificate import CoverageBound, rob_fcp_bound
from icml24.conformal.rob_fcp.characterization import client_histograms, coarsen_histograms, score_histogram
from icml24.conformal.rob_fcp.detection import (
    Detection,
    NumMaliciousEstimate,
    detect_malicious,
    estimate_num_malicious,
    maliciousness_scores,
    pairwise_distances,
    select_benign,
)
from icml24.conformal.rob_fcp.quantile import federated_quantile, federated_rank, histogram_quantile
from icml24.conformal.rob_fcp.robust import (
    RobFCPResult,
    RobustFederatedConformal,
    fcp_quantile,
    oracle_quantile,
    rob_fcp_quantile,
    select_clients,
)
from icml24.conformal.rob_fcp.splits import dirichlet_label_split, iid_split

SLUG = "rob-fcp"

_FLOWER_NAMES = (
    "RobFCPStrategy",
    "histogram_reply",
    "evaluation_reply",
    "make_client_app",
    "make_server_app",
    "run_rob_fcp_simulation",
)

__all__ = [
    "ATTACKS",
    "SLUG",
    "CoverageBound",
    "Detection",
    "NumMaliciousEstimate",
    "RobFCPResult",
    "RobustFederatedConformal",
    "ServerAggregate",
    "aggregate_histograms",
    "apply_attack",
    "client_histograms",
    "coarsen_histograms",
    "copy_attack",
    "coverage_attack",
    "detect_malicious",
    "dirichlet_label_split",
    "efficiency_attack",
    "estimate_num_malicious",
    "fcp_quantile",
    "federated_quantile",
    "federated_rank",
    "gaussian_noise_attack",
    "histogram_quantile",
    "iid_split",
    "maliciousness_scores",
    "oracle_quantile",
    "pairwise_distances",
    "rob_fcp_bound",
    "rob_fcp_quantile",
    "score_histogram",
    "select_benign",
    "select_clients",
    "validate_histogram",
    *_FLOWER_NAMES,
]


def __getattr__(name: str) -> Any:
    # Flower is an optional dependency: import it only when one of its names is asked for.
    if name in _FLOWER_NAMES:
        from icml24.conformal.rob_fcp import flower

        return getattr(flower, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
