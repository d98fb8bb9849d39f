"""CrossGET: Cross-Guided Ensemble of Tokens for Accelerating Vision-Language Transformers (Shi, Tao, Rao,
Yang, Yuan, Wang; ICML 2024).

https://arxiv.org/abs/2305.17455 · official code https://github.com/sdc17/CrossGET.
A vision-language transformer merges redundant tokens on the fly: learnable *cross tokens* (one per
modality, aligned across modalities by a Jensen-Shannon-type loss) give every token an importance, and
*complete-graph soft matching* merges the tokens that are redundant and unimportant, as an
importance-weighted ensemble. Here: a tiny CLIP trained from scratch on :mod:`icml24.multimodal.scenes`,
with ToMe's bipartite soft matching and random dropping as baselines.
"""

from icml24.multimodal.crossget.merging import (
    MergePlan,
    bipartite_soft_matching,
    complete_graph_soft_matching,
    cross_guided_importance,
    merge_tokens,
    random_drop,
)
from icml24.multimodal.crossget.model import (
    MergeConfig,
    TinyCLIP,
    TinyCLIPConfig,
    contrastive_loss,
    js_alignment_loss,
)
from icml24.multimodal.crossget.retrieval import SceneTextEncoder, content_ids, retrieval_recall
from icml24.multimodal.crossget.training import CLIPTrainConfig, evaluate_retrieval, train_clip

SLUG = "crossget"

__all__ = [
    "SLUG",
    "CLIPTrainConfig",
    "MergeConfig",
    "MergePlan",
    "SceneTextEncoder",
    "TinyCLIP",
    "TinyCLIPConfig",
    "bipartite_soft_matching",
    "complete_graph_soft_matching",
    "content_ids",
    "contrastive_loss",
    "cross_guided_importance",
    "evaluate_retrieval",
    "js_alignment_loss",
    "merge_tokens",
    "random_drop",
    "retrieval_recall",
    "train_clip",
]
