"""Position: Do Not Explain Vision Models Without Context (Tomaszewska, Biecek; ICML 2024).

https://arxiv.org/abs/2404.18316 (a position paper; no code). "Does the stethoscope in the picture make the
adjacent person a doctor or a patient?" depends on how the two objects are arranged; the popular
explanations of vision models (LIME/SHAP, Grad-CAM, Integrated Gradients, LRP, occlusion) show *where* the
evidence is, a heatmap over the input, not *how* the arrangement sets the decision. The paper argues that
explanation research should move from *where* to *how* (Sec. 5), with explanations that state the relation
and can be tested by rearranging objects.

This package is a runnable **demonstration** of that argument, not a reproduction (the paper reports no
experiment to reproduce): a relation-only task whose two classes hold the same two objects
(:func:`make_scenes`, :func:`mirrored_twin`, :func:`mirror_scenes`), a small CNN and the shared tiny ViT
(:class:`SmallCNN`, :class:`GridViT`, :func:`train_classifier`), heatmaps by Captum (:func:`grad_cam`,
:func:`integrated_gradients`, :func:`occlusion`), exact segment Shapley values over the objects
(:func:`segment_shapley`), region-level probes of what an explanation tells about the class
(:func:`region_summaries`, :func:`attribution_probe`, :func:`pointing_game`) and the counterfactual "how"
explanation (:func:`relational_counterfactual`).
"""

from icml24.evaluation.context_explanations.explain import (
    SUMMARY_NAMES,
    Counterfactual,
    ProbeResult,
    SegmentShapley,
    attribution_probe,
    grad_cam,
    integrated_gradients,
    object_mass_fraction,
    occlusion,
    pointing_game,
    region_summaries,
    relational_counterfactual,
    segment_shapley,
    shapley_summaries,
    to_heatmap,
)
from icml24.evaluation.context_explanations.models import (
    GridViT,
    SmallCNN,
    TokenGrid,
    TrainConfig,
    build_model,
    predict_logits,
    train_classifier,
)
from icml24.evaluation.context_explanations.scenes import (
    RelationTaskConfig,
    Scenes,
    make_scenes,
    mirror_scenes,
    mirrored_twin,
    move_b,
    twin_fits,
)

SLUG = "context-explanations"

__all__ = [
    "SLUG",
    "SUMMARY_NAMES",
    "Counterfactual",
    "GridViT",
    "ProbeResult",
    "RelationTaskConfig",
    "Scenes",
    "SegmentShapley",
    "SmallCNN",
    "TokenGrid",
    "TrainConfig",
    "attribution_probe",
    "build_model",
    "grad_cam",
    "integrated_gradients",
    "make_scenes",
    "mirror_scenes",
    "mirrored_twin",
    "move_b",
    "object_mass_fraction",
    "occlusion",
    "pointing_game",
    "predict_logits",
    "region_summaries",
    "relational_counterfactual",
    "segment_shapley",
    "shapley_summaries",
    "to_heatmap",
    "train_classifier",
    "twin_fits",
]
