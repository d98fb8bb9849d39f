"""Libra: Building Decoupled Vision System on Large Language Models (Xu, Yang, Song, Xu; ICML 2024).

https://arxiv.org/abs/2405.10140 · official code https://github.com/YifanXu74/Libra.
A frozen pre-trained LLM gets a routed visual expert in every layer (its own norms, low-rank ``q/k/v/o`` and
MLP for visual tokens, routed by a per-token modality flag) and a cross-modal bridge (low-rank,
zero-initialised corrections of the keys and values each modality sees of the other); images enter as
hybrid tokens (discrete codes plus the continuous feature) and the model trains with next-token prediction
on text and on visual codes. Here inside the project's tiny Llama-style LM pre-trained in-run on scene text
(:mod:`icml24.multimodal.frozen_lm`), with k-means patch codes, against a LLaVA-style projector.
"""

from icml24.multimodal.libra.data import (
    CaptionBatch,
    PatchTokenizer,
    build_caption_batch,
    caption_scores,
    image_patches,
    parse_caption,
)
from icml24.multimodal.libra.model import (
    LibraConfig,
    LibraKVCache,
    LibraLinear,
    LibraModel,
    LibraOutput,
    LLaVAStyleModel,
    VisualInputEmbedding,
    libra_loss,
    route,
)
from icml24.multimodal.libra.training import (
    CaptionData,
    CaptionTrainConfig,
    evaluate_captions,
    generate_captions,
    prepare_caption_data,
    text_only_loss,
    train_captioner,
)

SLUG = "libra"

__all__ = [
    "SLUG",
    "CaptionBatch",
    "CaptionData",
    "CaptionTrainConfig",
    "LLaVAStyleModel",
    "LibraConfig",
    "LibraKVCache",
    "LibraLinear",
    "LibraModel",
    "LibraOutput",
    "PatchTokenizer",
    "VisualInputEmbedding",
    "build_caption_batch",
    "caption_scores",
    "evaluate_captions",
    "generate_captions",
    "image_patches",
    "libra_loss",
    "parse_caption",
    "prepare_caption_data",
    "route",
    "text_only_loss",
    "train_captioner",
]
