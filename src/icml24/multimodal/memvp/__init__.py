"""MemVP: Memory-Space Visual Prompting for Efficient Vision-Language Fine-Tuning (Jie, Tang, Ding, Deng,
Han, Wang; ICML 2024).

https://arxiv.org/abs/2405.05615 · official code https://github.com/JieShibo/MemVP.
Projected visual features are appended to the key-value memory of every FFN of a frozen language model
(keys ``Z + P``, values ``Z + E``, a separate SiLU branch with scale ``s = 0.1``), instead of being prepended
to its input as visual tokens: the input length never grows, so training and generation cost stay nearly
flat in the number of visual tokens. Here: :class:`MemVP` around the project's tiny ``TransformerLM`` or a
``transformers`` Llama (SmolLM2-135M), against input-space prompting with LoRA and a text-only LoRA bound,
on the scene world's questions.
"""

from icml24.multimodal.memvp.backends import LMBackend, backend_of
from icml24.multimodal.memvp.input_space import InputSpaceConfig, InputSpacePrompting
from icml24.multimodal.memvp.memory import (
    MemoryFFN,
    MemVP,
    MemVPConfig,
    VisualProjector,
    memory_flops_per_token,
)
from icml24.multimodal.memvp.training import (
    FineTuneConfig,
    VQAData,
    evaluate_vqa,
    finetune_vqa,
    make_vqa_data,
    time_generation,
    time_train_step,
)

SLUG = "memvp"

__all__ = [
    "SLUG",
    "FineTuneConfig",
    "InputSpaceConfig",
    "InputSpacePrompting",
    "LMBackend",
    "MemVP",
    "MemVPConfig",
    "MemoryFFN",
    "VQAData",
    "VisualProjector",
    "backend_of",
    "evaluate_vqa",
    "finetune_vqa",
    "make_vqa_data",
    "memory_flops_per_token",
    "time_generation",
    "time_train_step",
]
