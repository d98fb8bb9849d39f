"""Arithmetic corpora generated in code: the five tasks of case-or-rule, their splits and their traces.

Hu et al., "Case-Based or Rule-Based: How Do Transformers Do the Math?", ICML 2024
(https://arxiv.org/abs/2402.17709); formats follow the official repository (GraphPKU/Case_or_Rule,
``datasets/<task>/create.py`` and ``cot_gen.py``):

- ``addition`` ``"a+b="`` -> ``a + b``; ``mod_addition`` ``"a+b="`` -> ``(a + b) mod 113``;
  ``base_addition`` operands and answer in base 9; ``linear_regression`` ``"(a,b)="`` -> ``a + 2b + 3``;
  ``chicken_rabbit``: ``a`` rabbits and ``b`` chickens, asked from their legs ``4a + 2b`` and heads
  ``a + b`` (the official wording, shortened to ``"L legs,H heads="`` for a character model).
- Splits of the grid ``{(a, b): 0 <= a, b < n}``: leave-square-out (one or several square holes, the test
  set; Section 3 of the paper) and the random-split control.
- Traces for addition: the official scratchpad (one line ``remaining_a+remaining_b,partial_sum,C:carry``
  per digit from the right, then the answer) and a rule-following (RFFT, Section 5) trace that recites the
  addition program's loop line by line with the variable values, shortened for a character-level model.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

__all__ = [
    "TASKS",
    "ArithmeticTask",
    "chebyshev_distance",
    "random_split",
    "rule_following_trace",
    "scratchpad_trace",
    "square_holes",
    "to_base",
]

MOD = 113
"""The modulus of ``mod_addition`` (the official repository's)."""
BASE = 9
"""The base of ``base_addition``."""


def to_base(n: int, base: int) -> str:
    """``n >= 0`` written in ``base`` (2..10)."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise ValueError(f"n must be a non-negative int, got {n!r}")
    if not 2 <= base <= 10:
        raise ValueError(f"base must be in [2, 10], got {base!r}")
    digits = []
    n = int(n)
    while True:
        n, d = divmod(n, base)
        digits.append(str(d))
        if n == 0:
            return "".join(reversed(digits))


@dataclass(frozen=True)
class ArithmeticTask:
    """One task of the paper: a question and an answer for each grid point ``(a, b)``."""

    name: str
    question: Callable[[int, int], str]
    answer: Callable[[int, int], str]

    def rule(self, a: int, b: int) -> str:
        """The correct answer (the perfect-rule oracle of the harness)."""
        return self.answer(a, b)


TASKS: dict[str, ArithmeticTask] = {
    "addition": ArithmeticTask("addition", lambda a, b: f"{a}+{b}=", lambda a, b: str(a + b)),
    "mod_addition": ArithmeticTask("mod_addition", lambda a, b: f"{a}+{b}=", lambda a, b: str((a + b) % MOD)),
    "base_addition": ArithmeticTask(
        "base_addition", lambda a, b: f"{to_base(a, BASE)}+{to_base(b, BASE)}=", lambda a, b: to_base(a + b, BASE)
    ),
    "linear_regression": ArithmeticTask(
        "linear_regression", lambda a, b: f"({a},{b})=", lambda a, b: str(a + 2 * b + 3)
    ),
    "chicken_rabbit": ArithmeticTask(
        "chicken_rabbit", lambda a, b: f"{4 * a + 2 * b} legs,{a + b} heads=", lambda a, b: f"{a},{b}"
    ),
}
"""The five tasks of the paper's Section 3, by name."""


def _check_n(n: int) -> int:
    if isinstance(n, bool) or not isinstance(n, int) or n < 2:
        raise ValueError(f"n must be an int >= 2, got {n!r}")
    return n


def square_holes(n: int, holes: tuple[tuple[int, int, int], ...]) -> np.ndarray:
    """Leave-square-out test mask ``(n, n)``: ``mask[a, b]`` is True inside any hole ``(c_a, c_b, l)``,
    i.e. ``|a - c_a| <= l`` and ``|b - c_b| <= l`` (the official ``one_hole``/``multi_holes`` rule).

    Holes must lie inside the grid and must not overlap.
    """
    _check_n(n)
    if not holes:
        raise ValueError("holes must hold at least one (center_a, center_b, half_width)")
    mask = np.zeros((n, n), dtype=bool)
    a, b = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    for h in holes:
        if len(h) != 3 or any(isinstance(v, bool) or not isinstance(v, (int, np.integer)) for v in h):
            raise ValueError(f"holes: each hole must be (center_a, center_b, half_width) ints, got {h!r}")
        ca, cb, length = (int(v) for v in h)
        if length < 0 or ca - length < 0 or cb - length < 0 or ca + length >= n or cb + length >= n:
            raise ValueError(f"holes: hole {h!r} does not fit inside the {n}x{n} grid")
        inside = (np.abs(a - ca) <= length) & (np.abs(b - cb) <= length)
        if (mask & inside).any():
            raise ValueError(f"holes: hole {h!r} overlaps another hole")
        mask |= inside
    return mask


def random_split(n: int, test_size: int, seed: int) -> np.ndarray:
    """Random-split control: a test mask ``(n, n)`` with exactly ``test_size`` points drawn uniformly."""
    _check_n(n)
    if isinstance(test_size, bool) or not isinstance(test_size, int) or not 0 < test_size < n * n:
        raise ValueError(f"test_size must be an int in (0, {n * n}), got {test_size!r}")
    rng = np.random.default_rng(seed)
    mask = np.zeros(n * n, dtype=bool)
    mask[rng.choice(n * n, size=test_size, replace=False)] = True
    return mask.reshape(n, n)


def chebyshev_distance(n: int, center: tuple[int, int]) -> np.ndarray:
    """``max(|a - c_a|, |b - c_b|)`` over the grid: the ring index inside a square hole."""
    _check_n(n)
    a, b = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    return np.maximum(np.abs(a - center[0]), np.abs(b - center[1]))


def _check_operands(a: int, b: int) -> tuple[int, int]:
    for name, v in (("a", a), ("b", b)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
            raise ValueError(f"{name} must be a non-negative int, got {v!r}")
    return int(a), int(b)


def scratchpad_trace(a: int, b: int) -> str:
    """The official scratchpad for ``a + b`` (``cot_gen.py``): before each step a line
    ``rest_a+rest_b,partial,C:carry`` with the digits still to add, the answer digits so far and the carry;
    one more line after the last step; then the answer on its own line.

    >>> print(scratchpad_trace(57, 8))
    57+8,,C:0
    5+,5,C:1
    +,65,C:0
    65
    """
    a, b = _check_operands(a, b)
    da, db = list(str(a)), list(str(b))
    partial, carry = "", 0
    lines = []
    for _ in range(len(str(a + b)) + 1):
        lines.append(f"{''.join(da)}+{''.join(db)},{partial},C:{carry}")
        x = int(da.pop()) if da else None
        y = int(db.pop()) if db else None
        if x is None and y is None:
            if carry:
                partial = str(carry) + partial
            carry = 0
            continue
        total = (x or 0) + (y or 0) + carry
        partial = str(total % 10) + partial
        carry = total // 10
    return "\n".join(lines) + f"\n{a + b}"


def rule_following_trace(a: int, b: int) -> str:
    """A rule-following (RFFT) trace of ``a + b``: the digit-list addition loop of the paper's Fig. 5 /
    the official ``prompt_base10.py`` (``icl/addition_icl.py``, ``gen_rf_rationale``), executed step by step
    with the variable values after each line.

    Shortened (the official trace quotes every code line before executing it); kept from it: the lists
    printed as Python prints them (``[5, 7]``), and the official stop-criterion check before every loop
    iteration and after the last (its "2.1 check the stop criterion": the lists, ``bool(num1)``,
    ``bool(num2)``, ``num1 or num2`` and "enter the loop" / "end the loop"), with the variable names of the
    rule the LoRA arm puts in the input (:data:`~icml24.language.case_or_rule.lora_rfft.RULE_CODE`). Lines:
    the operands and the initial state (``num1=[..] num2=[..] r=[] c=0``, the official "num1=..., num2=..."
    and "1. Initialize Result and Carry"); per iteration a check line
    ``n1=[..] n2=[..] bool(n1)=.. bool(n2)=.. n1 or n2=True enter the loop`` and a step line
    ``n1=[..] n2=[..] d1=x d2=y t=x+y+c=s r=[..] c=k`` (the lists after the pops); the final check line
    ending in ``end the loop``; the remaining-carry line; the answer.

    >>> print(rule_following_trace(57, 8))
    num1=[5, 7] num2=[8] r=[] c=0
    n1=[5, 7] n2=[8] bool(n1)=True bool(n2)=True n1 or n2=True enter the loop
    n1=[5] n2=[] d1=7 d2=8 t=7+8+0=15 r=[5] c=1
    n1=[5] n2=[] bool(n1)=True bool(n2)=False n1 or n2=True enter the loop
    n1=[] n2=[] d1=5 d2=0 t=5+0+1=6 r=[6, 5] c=0
    n1=[] n2=[] bool(n1)=False bool(n2)=False n1 or n2=False end the loop
    carry 0 r=[6, 5]
    65
    """
    a, b = _check_operands(a, b)
    n1, n2 = [int(c) for c in str(a)], [int(c) for c in str(b)]
    result: list[int] = []
    carry = 0
    lines = [f"num1={n1} num2={n2} r=[] c=0"]

    def check() -> str:
        go = bool(n1) or bool(n2)
        return (f"n1={n1} n2={n2} bool(n1)={bool(n1)} bool(n2)={bool(n2)} n1 or n2={go} "
                + ("enter the loop" if go else "end the loop"))  # fmt: skip

    while n1 or n2:
        lines.append(check())
        d1 = n1.pop() if n1 else 0
        d2 = n2.pop() if n2 else 0
        total = d1 + d2 + carry
        result.insert(0, total % 10)
        lines.append(f"n1={n1} n2={n2} d1={d1} d2={d2} t={d1}+{d2}+{carry}={total} r={result} c={total // 10}")
        carry = total // 10
    lines.append(check())
    if carry:
        result.insert(0, carry)
    lines.append(f"carry {carry} r={result}")
    return "\n".join(lines) + f"\n{a + b}"
