"""Fuzz cases for case-or-rule's exported callables (see tests/test_fuzz_api.py)."""

import numpy as np

from icml24.language.case_or_rule import (
    ArithmeticLM,
    ArithmeticLMConfig,
    LoRAArithmetic,
    LoRAArithmeticConfig,
    chebyshev_distance,
    lora_prompt,
    nearest_neighbour_predict,
    random_split,
    rule_following_trace,
    scratchpad_trace,
    square_holes,
    target_text,
)

PAIRS = np.array([[1, 2], [3, 4], [5, 6]])

FUZZ_CASES = [
    dict(fn=square_holes, args=(20, ((10, 10, 3),)), invalid={"n": [1, -5, 2.5, "20"], "holes": [(), ((19, 10, 3),), ((10, 10),)]}),
    dict(fn=random_split, args=(20, 10, 0), invalid={"n": [0], "test_size": [0, 400, -1, 1.5]}),
    dict(fn=chebyshev_distance, args=(20, (10, 10)), invalid={"n": [1, "x"]}),
    dict(fn=scratchpad_trace, args=(12, 34), invalid={"a": [-1, 1.5, "12"], "b": [-2, None]}),
    dict(fn=rule_following_trace, args=(12, 34), invalid={"a": [-1, 2.5], "b": ["x"]}),
    dict(fn=target_text, args=("addition", 1, 2, "direct"), invalid={"task": ["subtraction"], "fmt": ["cot"]}),
    dict(fn=nearest_neighbour_predict, args=("addition", PAIRS, PAIRS[:2]),
         invalid={"task": ["x"], "train_pairs": [np.array([1, 2]), np.array([[1.5, 2.0]]), np.array([[-1, 2]])],
                  "test_pairs": [np.zeros((0, 2), dtype=int)]}),
    dict(fn=ArithmeticLMConfig, kwargs={"steps": 5}, invalid={"task": ["x"], "fmt": ["cot"], "steps": [0, 1.5], "batch_size": [-1]}),
    dict(fn=ArithmeticLM, args=(), covers=("ArithmeticLM",)),
    dict(fn=lora_prompt, args=(12, 34, "rfft"), invalid={"a": [-1, 1.5, "12"], "b": [None, True], "fmt": ["cot", 3]}),
    dict(fn=LoRAArithmeticConfig, kwargs={"steps": 5},
         invalid={"fmt": ["cot"], "rank": [0, 2.5], "alpha": [0, -1.0], "dropout": [1.0, -0.1], "steps": [0, True],
                  "batch_size": [0], "lr": [0.0, "1e-3"], "warmup_ratio": [1.5], "max_new_tokens_margin": [0],
                  "target_modules": [(), ["q_proj"], ("",)]}),
    dict(fn=LoRAArithmetic, args=(), invalid={"config": ["rfft", ArithmeticLMConfig()]}),
]

EXEMPT = {
    "ALPHABET": "a constant string",
    "FORMATS": "a constant tuple",
    "TASKS": "a constant mapping of task objects",
    "SLUG": "a constant",
    "RULE_CODE": "a constant string (the rule RFFT puts in the input)",
    "RULE_PREFIX": "a constant string",
}
