"""SYFLOW: Learning Exceptional Subgroups by End-to-End Maximizing KL-divergence (Xu, Walter, Kalofolias,
Vreeken; ICML 2024). https://arxiv.org/abs/2402.12930 · official code https://github.com/nilspwalter/syflow.

A subgroup is a conjunction of feature intervals whose target distribution differs from the population's.
SYFLOW relaxes the rule into a differentiable layer (soft binning + a weighted harmonic-mean AND), models the
target densities of the population and of the subgroup with normalising flows, and trains the rule by
gradient ascent on a size-weighted KL divergence; later subgroups are pushed away from earlier ones.

* :class:`SyflowSubgroupDiscovery`: the scikit-learn estimator (``fit(X, y)``, ``rules_``, ``predict``).
* :func:`discover_subgroups`, :class:`SyflowConfig` (presets :data:`SYNTHETIC`, :data:`REAL_DATA`): the method.
* :class:`SoftIntervalRule`, :func:`soft_bin_middle`, :func:`harmonic_conjunction`, :class:`Rule`,
  :class:`Condition`: the rule layer and the readable rules.
* :func:`make_spline_flow`, :func:`fit_density`: the zuko spline flows.
* :func:`make_planted_subgroup`, :data:`TARGETS`: the synthetic benchmark.
* :func:`sd_mean`, :func:`sd_kl`, :func:`prim_box`: the baselines (SD-mu, SD-KL with pysubgroup; PRIM).
* :func:`kde_kl`: the KDE cross-check of a subgroup's KL.
"""

from icml24.subgroups.syflow.baselines import BaselineSubgroup, gaussian_kl, prim_box, sd_kl, sd_mean
from icml24.subgroups.syflow.data import TARGETS, PlantedSubgroup, make_planted_subgroup
from icml24.subgroups.syflow.divergence import kde_kl
from icml24.subgroups.syflow.estimator import SyflowSubgroupDiscovery
from icml24.subgroups.syflow.flows import fit_density, make_spline_flow
from icml24.subgroups.syflow.rule import (
    Condition,
    Rule,
    SoftIntervalRule,
    harmonic_conjunction,
    soft_bin_middle,
)
from icml24.subgroups.syflow.search import (
    REAL_DATA,
    SYNTHETIC,
    FoundSubgroup,
    SyflowConfig,
    SyflowResult,
    discover_subgroups,
)

SLUG = "syflow"

__all__ = [
    "REAL_DATA",
    "SLUG",
    "SYNTHETIC",
    "TARGETS",
    "BaselineSubgroup",
    "Condition",
    "FoundSubgroup",
    "PlantedSubgroup",
    "Rule",
    "SoftIntervalRule",
    "SyflowConfig",
    "SyflowResult",
    "SyflowSubgroupDiscovery",
    "discover_subgroups",
    "fit_density",
    "gaussian_kl",
    "harmonic_conjunction",
    "kde_kl",
    "make_planted_subgroup",
    "make_spline_flow",
    "prim_box",
    "sd_kl",
    "sd_mean",
    "soft_bin_middle",
]
