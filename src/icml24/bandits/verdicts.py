"""Verdict helpers shared by the bandit papers: a claim that must hold in every cell of a grid.

Support needs every cell at level alpha (an intersection-union test, no correction needed); a refutation must
survive Holm's correction across the cells, so that one unlucky cell out of many does not refute the claim.
"""

from __future__ import annotations

import math

from icml24.common.experiment import ClaimCheck


def refute_holm(decisions: list) -> list:
    """Support needs every cell at alpha (intersection-union); a refutation must survive Holm across cells.
    (decide.holm is skipped when no raw refuting p-value is below alpha: corrected ones are never smaller.)"""
    from dataclasses import replace

    from icml24.common.decide import holm

    if not any(math.isfinite(d.p_refute) and d.p_refute < d.alpha for d in decisions):
        return [replace(d, verdict="inconclusive") if d.verdict == "not_supported" else d for d in decisions]
    corrected = holm(decisions)
    return [d if d.verdict == "supported" else replace(d, verdict="not_supported" if h.verdict == "not_supported"
                                                        else "inconclusive", p_refute=h.p_refute)
            for d, h in zip(decisions, corrected)]


def all_cells(decisions: dict, *, id: str, claim: str, rule: str, power: float | None = None,
               decisive: bool = True, extra: str = "") -> ClaimCheck:
    """One check over a grid of cell decisions: supported if every cell is, not_supported if one is after Holm."""
    keys = list(decisions)
    if not keys:
        return ClaimCheck(claim, "inconclusive", "no configuration could be evaluated" + extra, id=id, rule=rule,
                          decisive=decisive)
    decided = dict(zip(keys, refute_holm([decisions[k] for k in keys])))
    verdicts = [d.verdict for d in decided.values()]
    verdict = ("supported" if all(v == "supported" for v in verdicts)
               else "not_supported" if "not_supported" in verdicts else "inconclusive")
    worst_key = max(keys, key=lambda k: decided[k].p_value if math.isfinite(decided[k].p_value) else 2.0)
    worst = decided[worst_key]
    evidence = "; ".join(f"{k}: {decided[k].describe()} [{decided[k].verdict}]" for k in keys) + extra
    return ClaimCheck(claim, verdict, evidence, id=id, rule=rule,
                      effect=worst.effect if math.isfinite(worst.effect) else None,
                      effect_name=f"least clear ({worst_key}): {worst.effect_name}",
                      ci=worst.ci if all(math.isfinite(c) for c in worst.ci) else None, ci_level=worst.ci_level,
                      p_value=worst.p_value if math.isfinite(worst.p_value) else None, power=power,
                      n=sum(decided[k].n for k in keys), decisive=decisive)
