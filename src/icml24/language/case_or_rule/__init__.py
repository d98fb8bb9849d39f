"""Case-Based or Rule-Based: How Do Transformers Do the Math? (Hu, Tang, Yang, Zhang; ICML 2024).

https://arxiv.org/abs/2402.17709 · official code https://github.com/GraphPKU/Case_or_Rule.
Train a transformer on arithmetic with a square of the input grid left out (leave-square-out): a
rule learner would solve the left-out problems, a case-based learner fails where no similar training case
exists. Rule-Following Fine-Tuning (RFFT) trains on traces that execute the rule step by step;
:class:`LoRAArithmetic` does it the paper's way, LoRA on a pretrained LM (SmolLM2-135M by default) with the
rule in the input (``peft`` and ``transformers``, the ``language`` extra, are imported only when it fits).
"""

from icml24.language.case_or_rule.arithmetic_lm import (
    ALPHABET,
    FORMATS,
    ArithmeticLM,
    ArithmeticLMConfig,
    nearest_neighbour_predict,
    target_text,
)
from icml24.language.case_or_rule.lora_rfft import (
    RULE_CODE,
    RULE_PREFIX,
    LoRAArithmetic,
    LoRAArithmeticConfig,
    lora_prompt,
)
from icml24.language.corpora.arithmetic import (
    TASKS,
    chebyshev_distance,
    random_split,
    rule_following_trace,
    scratchpad_trace,
    square_holes,
)

SLUG = "case-or-rule"

__all__ = [
    "ALPHABET",
    "FORMATS",
    "RULE_CODE",
    "RULE_PREFIX",
    "SLUG",
    "TASKS",
    "ArithmeticLM",
    "ArithmeticLMConfig",
    "LoRAArithmetic",
    "LoRAArithmeticConfig",
    "chebyshev_distance",
    "lora_prompt",
    "nearest_neighbour_predict",
    "random_split",
    "rule_following_trace",
    "scratchpad_trace",
    "square_holes",
    "target_text",
]
