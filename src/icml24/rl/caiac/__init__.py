"""CAIAC (Armengol Urpí, Bagatella, Vlastelica, Martius, ICML 2024, https://arxiv.org/abs/2405.18917): causal
action influence aware counterfactual data augmentation for offline learning.

* :mod:`icml24.rl.caiac.influence`: the factored Gaussian world model and the CAI score ``C^j(s) = I(S'^j; A | s)``
  (section 4.1), smoothing and the uncontrolled mask.
* :mod:`icml24.rl.caiac.augment`: the counterfactual swap of action-unaffected entities and the minibatch sampler
  with HER relabelling (section 4.2); random swaps and no augmentation as baselines.
* :mod:`icml24.rl.caiac.learner`: offline goal-conditioned behaviour cloning and TD3+BC.
* :mod:`icml24.rl.caiac.push_world`: the factored push world with a spurious correlation (Gymnasium API).
"""

from icml24.rl.caiac.augment import CounterfactualSampler, SamplerConfig, counterfactual_swap
from icml24.rl.caiac.influence import (
    FactoredGaussianWorldModel,
    WorldModelConfig,
    causal_action_influence,
    gaussian_kl,
    kl_gaussian_to_mixture,
    smooth_scores,
    train_world_model,
    uncontrolled_mask,
)
from icml24.rl.caiac.learner import (
    BCConfig,
    GoalConditionedPolicy,
    OfflineConfig,
    TD3BCAgent,
    train_gcbc,
    train_offline,
)
from icml24.rl.caiac.push_world import (
    ENTITY_SLICES,
    PushDataset,
    PushWorldConfig,
    PushWorldEnv,
    collect_push_dataset,
    push_step,
    reachable,
    rollout,
    sample_layouts,
    scripted_expert,
    sparse_reward,
)

SLUG = "caiac"

__all__ = [
    "SLUG",
    "BCConfig",
    "CounterfactualSampler",
    "ENTITY_SLICES",
    "FactoredGaussianWorldModel",
    "GoalConditionedPolicy",
    "OfflineConfig",
    "PushDataset",
    "PushWorldConfig",
    "PushWorldEnv",
    "SamplerConfig",
    "TD3BCAgent",
    "WorldModelConfig",
    "causal_action_influence",
    "collect_push_dataset",
    "counterfactual_swap",
    "gaussian_kl",
    "kl_gaussian_to_mixture",
    "push_step",
    "reachable",
    "rollout",
    "sample_layouts",
    "scripted_expert",
    "smooth_scores",
    "sparse_reward",
    "train_gcbc",
    "train_offline",
    "train_world_model",
    "uncontrolled_mask",
]
