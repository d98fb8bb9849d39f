"""Detecting Any instruction-to-answer interaction relationship: Universal Instruction-to-Answer Navigator for
Med-VQA (Uni-Med; Wu, Xu, Long, You, Su, Long, Luo, Xu; ICML 2024, PMLR 235).

https://openreview.net/forum?id=4XxsheIbtn · official code https://github.com/zhongzee/Uni-Med-master.
Med-VQA training data carry no evidence of where an answer comes from, and questions carry words that are not
what is asked. Uni-Med annotates each question-answer pair with the question's "real intention" span and a
visual explanation of the evidence, then trains with token-level cut-mix (evidence tokens of one sample
pasted into another's visual tokens, the answer kept) and intention-guided attention (attention to
non-intent question tokens damped). Here: a Toy-Med-VQA generator with exact intent spans and evidence
patches (:func:`make_toy_med_vqa`), a small transformer VQA model (:class:`MedVQATransformer`), the two
modules (:func:`token_cutmix`, :class:`IntentGuidedAttention`) and grounding metrics.
"""

from icml24.multimodal.uni_med.cutmix import similarity_evidence, token_cutmix
from icml24.multimodal.uni_med.data import (
    ANSWERS,
    QUESTION_TYPES,
    ToyMedVQA,
    ToyMedVQAConfig,
    closest_candidate,
    make_toy_med_vqa,
    parse_intent,
    question_tokenizer,
)
from icml24.multimodal.uni_med.model import (
    IntentGuidedAttention,
    MedVQAConfig,
    MedVQATransformer,
    intent_key_scale,
)
from icml24.multimodal.uni_med.training import (
    TrainConfig,
    blank_patches,
    deletion_test,
    evaluate_vqa,
    evidence_attention_share,
    pretrain_image_encoder,
    train_vqa,
)

SLUG = "uni-med"

__all__ = [
    "ANSWERS",
    "QUESTION_TYPES",
    "SLUG",
    "IntentGuidedAttention",
    "MedVQAConfig",
    "MedVQATransformer",
    "ToyMedVQA",
    "ToyMedVQAConfig",
    "TrainConfig",
    "blank_patches",
    "closest_candidate",
    "deletion_test",
    "evaluate_vqa",
    "evidence_attention_share",
    "intent_key_scale",
    "make_toy_med_vqa",
    "parse_intent",
    "pretrain_image_encoder",
    "question_tokenizer",
    "similarity_evidence",
    "token_cutmix",
    "train_vqa",
]
