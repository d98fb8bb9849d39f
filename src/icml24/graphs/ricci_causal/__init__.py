"""Ricci curvature and the reliability of causal inference on networks (Farzam, Tannenbaum, Sapiro, ICML 2024,
PMLR 235:13086-13108, https://proceedings.mlr.press/v235/farzam24a.html).

* :func:`ollivier_ricci`, :func:`node_curvature`, :func:`forman_curvature`: edge and node curvature (vectorised,
  exact transport; agrees with GraphRicciCurvature to 1e-12).
* :func:`ricci_flow`: the discrete Ricci flow (Ni et al. 2019) used as a preprocessing of the treatment network.
* :func:`simulate_networked_treatment`: NetDeconf-style semi-synthetic treatment data on any graph.
* :class:`GCNEffectEstimator`: a two-layer GCN (torch-geometric) with two outcome heads (TARNet on a graph).
* :func:`pehe`, :func:`ate_error`, :func:`tercile_pehe`: effect-estimation errors, overall and by curvature tercile.
"""

from icml24.graphs.ricci_causal.curvature import (
    RicciFlowResult,
    as_edge_array,
    forman_curvature,
    node_curvature,
    ollivier_ricci,
    ricci_flow,
)
from icml24.graphs.ricci_causal.data import (
    NetworkedTreatmentData,
    ate_error,
    pehe,
    simulate_networked_treatment,
    tercile_pehe,
)
from icml24.graphs.ricci_causal.estimator import GCNEffectEstimator

SLUG = "ricci-causal"

__all__ = [
    "SLUG",
    "GCNEffectEstimator",
    "NetworkedTreatmentData",
    "RicciFlowResult",
    "ate_error",
    "as_edge_array",
    "forman_curvature",
    "node_curvature",
    "ollivier_ricci",
    "pehe",
    "ricci_flow",
    "simulate_networked_treatment",
    "tercile_pehe",
]
