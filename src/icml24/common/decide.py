"""Decision primitives: how every paper's ``analyze`` turns numbers into a verdict.

One module so that all papers decide the same way. Each primitive tests one sub-claim and returns a
:class:`Decision` whose verdict is *symmetric*:

- ``supported``: a one-sided test at level ``alpha`` shows the effect in the claimed direction (beyond
  ``margin``);
- ``not_supported``: the same strength of evidence against the claim: a one-sided test at ``alpha`` shows
  the effect on the other side of ``margin``, or, when ``equivalence_margin`` is given, a TOST shows the
  effect is within ``+-equivalence_margin`` of zero (evidence of absence, not absence of evidence);
- ``inconclusive``: neither (too few seeds, too much noise, or an effect between the two).

If both hold (an effect in the claimed direction is shown, *and* a TOST shows it inside the equivalence band),
the outcome is its own: ``effect_below_margin`` (an effect exists but is smaller than the margin the claim
needs), with the verdict ``inconclusive``: the two one-sided tests give evidence of the same strength both ways,
so neither rule order nor the design decides it. Pass ``margin`` to require a size for ``supported``.

Beyond the verdict, the module gives what a demanding reader asks of a decisive check:

- a **negative control** (``Decision.to_check(control=...)``): the same rule run on a comparison whose answer
  is known to be "no effect"; a check whose control comes out ``supported`` is *uninformative* and counts as
  ``inconclusive`` in :func:`combine`, whatever its own verdict;
- **headroom** (:func:`headroom`, :func:`random_search_recall`): the best the baseline can do at this budget
  and the largest effect the design can show; a check whose headroom is below the paper's effect counts as
  ``inconclusive``;
- the **unit of analysis**: :func:`compare` and :func:`compare_to_value` take ``units=`` (the seed, trained
  model or environment of each value) and refuse repeated units (pooled pseudo-replicates) unless ``pooled=``
  states why pooling is valid; :func:`per_unit` averages values to one per unit first;
- **missing arms**: :func:`not_run_check` is the inconclusive check for a decisive arm that did not run.

Confidence intervals are two-sided at level ``1 - 2 alpha`` (90% for ``alpha = 0.05``), the interval
dual to the one-sided tests: it excludes ``margin`` on the lower side exactly when the one-sided test
rejects (the TOST convention of Schuirmann 1987). The tests stand on scipy.stats and statsmodels
(``ttest_1samp``/``ttest_ind``/``wilcoxon``/``mannwhitneyu``, ``test_proportions_2indep``,
``confint_proportions_2indep``, ``multipletests``).

Primitives: :func:`compare` (paired or unpaired means, or rank tests), :func:`compare_to_value` (one
sample against a bar the paper states), :func:`compare_rates` (two proportions, Newcombe/score
intervals), :func:`rate_vs_value` (one proportion against a bar, Wilson interval), :func:`equivalence`
(a claim of "no difference" / "on par"), :func:`trend` (slope of y in x: increasing, decreasing or flat),
:func:`holm` (Holm correction across sub-claims), :func:`combine` (sub-claims into the paper's verdict)
and :func:`power` / :func:`power_of_compare` / :func:`power_of_rates` (the chance that a rule says
``supported`` when an effect of a given size is true).
"""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

import numpy as np
from scipy import stats

from icml24.common.experiment import Analysis, ClaimCheck, Verdict

Alternative = Literal["greater", "less"]
_ALTERNATIVES = ("greater", "less")


# --------------------------------------------------------------------------------------------------
# The result of a decision
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Decision:
    """The outcome of one decision primitive.

    Attributes:
        verdict: ``supported``, ``not_supported`` or ``inconclusive`` (see the module docstring).
        effect: the estimate of the effect (``effect_name`` says what it is).
        effect_name: what ``effect`` is, e.g. ``"mean difference (method - baseline)"``.
        ci: two-sided confidence interval of the effect at level ``ci_level``.
        ci_level: ``1 - 2 alpha``.
        p_value: one-sided p-value for the claim (after any Holm correction).
        p_refute: p-value of the refuting test (the other side of ``margin``, or TOST equivalence,
            whichever is smaller; after any Holm correction); ``nan`` when no refuting test applies.
        n: the sample size used (pairs, seeds per arm, trials, points of a trend).
        alpha: the level of both one-sided tests.
        rule: the rule in words, with its thresholds.
        test: the name of the test used.
        outcome: ``"effect_shown"`` (supported), ``"refuted"`` (not_supported), ``"effect_below_margin"`` (both
            one-sided tests significant: an effect in the claimed direction inside the equivalence band;
            verdict inconclusive) or ``"undecided"``; derived from the p-values.
        margin: the bar the effect must pass for ``supported``, in the effect's units (``margin`` of
            :func:`compare`/:func:`trend`, ``value`` of :func:`compare_to_value`/:func:`rate_vs_value`);
            ``None`` for a pure equivalence claim.
        equivalence_margin: the half-width of the band around no effect that the refuting (or, for
            :func:`equivalence` and ``trend(claim="flat")``, the supporting) TOST uses; ``None`` when none.
    """

    verdict: Verdict
    effect: float
    effect_name: str
    ci: tuple[float, float]
    ci_level: float
    p_value: float
    p_refute: float
    n: int
    alpha: float
    rule: str
    test: str
    margin: float | None = None
    equivalence_margin: float | None = None

    @property
    def outcome(self) -> str:
        return _outcome(self.verdict, self.p_value, self.p_refute, self.alpha)

    def describe(self) -> str:
        """The evidence in words: ``"mean difference (method - baseline) +0.120, 90% CI [0.050, 0.190],
        one-sided p = 0.003 (paired t-test, n = 10)"``."""
        if self.n == 0 or not math.isfinite(self.effect):
            return f"{self.effect_name}: no data (n = {self.n})"
        lo, hi = self.ci
        # A sign only on differences, slopes and correlations (a rate or a mean is not "+0.94").
        signed = any(w in self.effect_name for w in (" - ", "difference", "slope", "rho", "correlation"))
        return (
            f"{self.effect_name} {_num(self.effect, signed=signed)}, {round(self.ci_level * 100)}% CI "
            f"[{_num(lo)}, {_num(hi)}], one-sided p {_p(self.p_value)}"
            + (f", refuting p {_p(self.p_refute)}" if math.isfinite(self.p_refute) else "")
            + f" ({self.test}, n = {self.n})"
            + ("; both one-sided tests significant: an effect in the claimed direction that is shown smaller "
               "than the equivalence margin (effect_below_margin)" if self.outcome == "effect_below_margin" else "")
        )  # fmt: skip

    def to_check(
        self,
        *,
        id: str,
        claim: str,
        evidence: str | None = None,
        decisive: bool = True,
        power: float | None = None,
        control: Decision | ClaimCheck | None = None,
        control_claim: str = "",
        headroom: Headroom | None = None,
    ) -> ClaimCheck:
        """This decision as a report :class:`ClaimCheck`; ``evidence`` is prepended to :meth:`describe`.

        Args:
            control: the same rule run on the negative control (an arm known to have no effect); when it comes
                out ``supported`` the check is uninformative and cannot decide the verdict.
            control_claim: the control in words ("epsilon-greedy with constant epsilon has sublinear regret").
            headroom: what the design allows (:func:`headroom`); below the paper's effect the check cannot decide.
        """
        text = self.describe() if evidence is None else f"{evidence}; {self.describe()}"
        control_dict = None
        if control is not None:
            if not isinstance(control, (Decision, ClaimCheck)):
                raise TypeError(f"control must be a Decision or a ClaimCheck, got {type(control).__name__}")
            control_dict = _control_dict(control, control_claim)
            text += f"; negative control ({control_dict['claim'] or 'no-effect arm'}): {control_dict['verdict']}"
            if control_dict["verdict"] == "supported":
                text += " (the rule finds an effect where there is none: this check is uninformative)"
        if headroom is not None:
            if not isinstance(headroom, Headroom):
                raise TypeError(f"headroom must be a Headroom (from decide.headroom), got {type(headroom).__name__}")
            text += f"; headroom: {headroom.text}"
        return ClaimCheck(
            claim=claim,
            verdict=self.verdict,
            evidence=text,
            id=id,
            rule=self.rule,
            effect=_finite_or_none(self.effect),
            effect_name=self.effect_name,
            ci=None if not all(math.isfinite(c) for c in self.ci) else self.ci,
            ci_level=self.ci_level,
            p_value=_finite_or_none(self.p_value),
            power=power,
            n=self.n,
            decisive=decisive,
            outcome=self.outcome,
            control=control_dict,
            headroom=headroom.to_dict() if headroom is not None else None,
            margin=self.margin,
            equivalence_margin=self.equivalence_margin,
        )



Margins = Callable[[dict[str, Any]], tuple[Any, Any]]


def _states_margins(margins: Margins) -> Callable[[Callable[..., Decision]], Callable[..., Decision]]:
    """Record on the returned :class:`Decision` the margins the rule used (``margins`` maps the call's bound
    arguments to ``(margin, equivalence_margin)``), so the report can draw them beside the effect."""

    def wrap(fn: Callable[..., Decision]) -> Callable[..., Decision]:
        signature = inspect.signature(fn)

        @functools.wraps(fn)
        def decide(*args: Any, **kwargs: Any) -> Decision:
            decision = fn(*args, **kwargs)  # validates the arguments first
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            margin, eq = margins(bound.arguments)
            return replace(decision, margin=None if margin is None else _finite_or_none(float(margin)),
                           equivalence_margin=None if eq is None else _finite_or_none(float(eq)))  # fmt: skip

        return decide

    return wrap


def _control_dict(control: Decision | ClaimCheck, claim: str) -> dict[str, Any]:
    if isinstance(control, Decision):
        ci = list(control.ci) if all(math.isfinite(c) for c in control.ci) else None
        return {"claim": claim, "verdict": control.verdict, "effect": _finite_or_none(control.effect),
                "ci": ci, "p_value": _finite_or_none(control.p_value), "evidence": control.describe()}  # fmt: skip
    return {"claim": claim or control.claim, "verdict": control.verdict, "effect": control.effect,
            "ci": list(control.ci) if control.ci is not None else None, "p_value": control.p_value,
            "evidence": control.evidence}  # fmt: skip


def _outcome(verdict: str, p_support: float, p_refute: float, alpha: float) -> str:
    if math.isfinite(p_support) and math.isfinite(p_refute) and p_support < alpha and p_refute < alpha:
        return "effect_below_margin"
    return {"supported": "effect_shown", "not_supported": "refuted"}.get(verdict, "undecided")


def _finite_or_none(x: float) -> float | None:
    return float(x) if x is not None and math.isfinite(x) else None


def _num(x: float, signed: bool = False) -> str:
    if not math.isfinite(x):
        return "n/a"
    if x == 0:
        s = "0"
    elif 1e-3 <= abs(x) < 1e4:
        s = f"{x:.3g}" if abs(x) >= 1 else f"{x:.3f}"
    else:
        s = f"{x:.2e}"
    return ("+" + s) if signed and x > 0 else s


def _p(p: float) -> str:
    if not math.isfinite(p):
        return "= n/a"
    return "< 0.001" if p < 1e-3 else f"= {p:.3f}"


def _verdict(p_support: float, p_refute: float, alpha: float) -> Verdict:
    shown = math.isfinite(p_support) and p_support < alpha
    refuted = math.isfinite(p_refute) and p_refute < alpha
    if shown and refuted:  # effect_below_margin: evidence of equal strength both ways (see module docstring)
        return "inconclusive"
    if shown:
        return "supported"
    if refuted:
        return "not_supported"
    return "inconclusive"


def _no_data(effect_name: str, rule: str, test: str, alpha: float, n: int) -> Decision:
    nan = math.nan
    return Decision("inconclusive", nan, effect_name, (nan, nan), 1 - 2 * alpha, nan, nan, n, alpha,
                    rule + " (too few values to test)", test)  # fmt: skip


# --------------------------------------------------------------------------------------------------
# Argument checks
# --------------------------------------------------------------------------------------------------


def _check_alpha(alpha: float) -> float:
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 < alpha < 0.5:
        raise ValueError(f"alpha must be a number in (0, 0.5), got {alpha!r}")
    return float(alpha)


def _check_alternative(alternative: str) -> Alternative:
    if alternative not in _ALTERNATIVES:
        raise ValueError(f"alternative must be 'greater' or 'less', got {alternative!r}")
    return alternative  # type: ignore[return-value]


def _check_margin(name: str, value: float | None, *, positive: bool = False) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    if positive and value <= 0:
        raise ValueError(f"{name} must be > 0, got {value!r}")
    return float(value)


def _as_values(name: str, values: Any) -> np.ndarray:
    if isinstance(values, (str, bytes)) or values is None:
        raise TypeError(f"{name} must be a sequence of numbers, got {type(values).__name__}")
    try:
        arr = np.asarray(
            [math.nan if v is None else v for v in np.ravel(np.asarray(values, dtype=object))], dtype=float
        )
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be a sequence of numbers: {exc}") from exc
    if np.isinf(arr).any():
        raise ValueError(f"{name} contains an infinite value; NaN (missing) is allowed and dropped")
    return arr


# --------------------------------------------------------------------------------------------------
# Means: paired, unpaired, one sample
# --------------------------------------------------------------------------------------------------


def _direction_words(alternative: str, margin: float) -> str:
    rel = ">" if alternative == "greater" else "<"
    return f"effect {rel} {_num(margin)}"


def _refute_words(alternative: str, margin: float, eq: float | None) -> str:
    rel = "<" if alternative == "greater" else ">"
    words = f"effect {rel} {_num(margin)} at the same level"
    if eq is not None:
        words += f", or TOST equivalence within +-{_num(eq)}"
    return words


def _one_sample(
    x: np.ndarray,
    *,
    value: float,
    alternative: Alternative,
    alpha: float,
    equivalence_margin: float | None,
    test: str,
    effect_name: str,
    rule: str,
    test_name: str,
    center: float = 0.0,
) -> Decision:
    """One-sample machinery shared by paired comparisons (x = differences) and :func:`compare_to_value`.

    ``value`` is the bar of the claim (``margin`` for differences); ``center`` the value around which
    equivalence is tested (0 for differences).
    """
    x = x[~np.isnan(x)]
    n = int(x.size)
    if n < 2:
        return _no_data(effect_name, rule, test_name, alpha, n)
    other = "less" if alternative == "greater" else "greater"
    level = 1 - 2 * alpha
    if test == "t":
        mean = float(x.mean())
        sd = float(x.std(ddof=1))
        if sd == 0.0:
            # No spread at all (a deterministic experiment): the sign of mean - value decides exactly.
            p_sup = 0.0 if (mean > value if alternative == "greater" else mean < value) else 1.0
            p_opp = 0.0 if (mean < value if alternative == "greater" else mean > value) else 1.0
            p_eq = (0.0 if abs(mean - center) < equivalence_margin else 1.0) if equivalence_margin else math.nan
            return Decision(_verdict(p_sup, min(p_opp, p_eq) if equivalence_margin else p_opp, alpha), mean,
                            effect_name, (mean, mean), level, p_sup,
                            min(p_opp, p_eq) if equivalence_margin else p_opp, n, alpha,
                            rule, test_name + " (no spread: decided by the sign)")  # fmt: skip
        p_sup = float(stats.ttest_1samp(x, value, alternative=alternative).pvalue)
        p_opp = float(stats.ttest_1samp(x, value, alternative=other).pvalue)
        half = float(stats.t.ppf(1 - alpha, n - 1)) * sd / math.sqrt(n)
        ci = (mean - half, mean + half)
        effect = mean
        if equivalence_margin is not None:
            p_lo = float(stats.ttest_1samp(x, center - equivalence_margin, alternative="greater").pvalue)
            p_hi = float(stats.ttest_1samp(x, center + equivalence_margin, alternative="less").pvalue)
            p_eq = max(p_lo, p_hi)
        else:
            p_eq = math.nan
    elif test == "rank":
        effect = float(np.median(x))
        if np.all(x == x[0]):
            p_sup = 0.0 if (x[0] > value if alternative == "greater" else x[0] < value) else 1.0
            p_opp = 0.0 if (x[0] < value if alternative == "greater" else x[0] > value) else 1.0
        else:
            p_sup = _wilcoxon(x - value, alternative)
            p_opp = _wilcoxon(x - value, other)
        ci = _bootstrap_ci(x, np.median, level)
        if equivalence_margin is not None:
            p_eq = max(_wilcoxon(x - (center - equivalence_margin), "greater"),
                       _wilcoxon(x - (center + equivalence_margin), "less"))  # fmt: skip
        else:
            p_eq = math.nan
    else:
        raise ValueError(f"test must be 't' or 'rank', got {test!r}")
    p_ref = p_opp if equivalence_margin is None else min(p_opp, p_eq)
    return Decision(_verdict(p_sup, p_ref, alpha), effect, effect_name, ci, level, p_sup, p_ref, n, alpha,
                    rule, test_name)  # fmt: skip


def _wilcoxon(d: np.ndarray, alternative: str) -> float:
    d = d[d != 0]
    if d.size == 0:
        return 1.0
    return float(stats.wilcoxon(d, alternative=alternative).pvalue)


def _bootstrap_ci(x: np.ndarray, statistic: Callable[..., Any], level: float, *samples: np.ndarray):
    data = (x, *samples)
    if min(len(s) for s in data) < 2 or all(np.all(s == s[0]) for s in data):
        v = float(statistic(*data))
        return (v, v)
    res = stats.bootstrap(
        data,
        lambda *a, axis=-1: statistic(*a, axis=axis),
        confidence_level=level,
        n_resamples=2000,
        method="percentile",
        rng=np.random.default_rng(0),  # a fixed generator: the same data always give the same interval
        paired=False,
        vectorized=True,
    )
    return (float(res.confidence_interval.low), float(res.confidence_interval.high))


@_states_margins(lambda a: (a["margin"], a["equivalence_margin"]))
def compare(
    method: Sequence[float],
    baseline: Sequence[float],
    *,
    paired: bool,
    alternative: Alternative = "greater",
    margin: float = 0.0,
    equivalence_margin: float | None = None,
    alpha: float = 0.05,
    test: Literal["t", "rank"] = "t",
    effect_name: str = "",
    units: Sequence[Any] | tuple[Sequence[Any], Sequence[Any]] | None = None,
    pooled: str | None = None,
) -> Decision:
    """Is ``method`` better than ``baseline``? A one-sided comparison of means (or locations).

    The claim is ``effect > margin`` (``alternative="greater"``, e.g. accuracy) or ``effect < margin``
    (``"less"``, e.g. regret), with ``effect = method - baseline``.

    Args:
        method, baseline: one value per seed (or trial). NaN marks a missing value: with ``paired`` the
            whole pair is dropped, otherwise the value.
        paired: the i-th values share a seed (paired t-test on the differences / Wilcoxon signed-rank);
            else Welch's unequal-variance t-test / Mann-Whitney U.
        alternative: the claimed direction.
        margin: the effect the claim must exceed (0: any improvement).
        equivalence_margin: when given, ``not_supported`` may also come from a TOST showing
            ``|effect| < equivalence_margin`` ("no effect", evidence of absence).
        alpha: level of each one-sided test.
        test: ``"t"`` (means) or ``"rank"`` (locations: Hodges-Lehmann-free median difference for paired
            data, difference of medians for unpaired, percentile-bootstrap interval with a fixed seed).
        effect_name: what the effect is, for the report.
        units: the independent unit of each value (seed, trained model, environment): one sequence for paired
            data (the unit of each pair), a pair of sequences for unpaired data. Repeated units are refused.
        pooled: why several values of one unit may be pooled as independent (otherwise they are refused).
    """
    alpha = _check_alpha(alpha)
    alternative = _check_alternative(alternative)
    margin = _check_margin("margin", margin)
    eq = _check_margin("equivalence_margin", equivalence_margin, positive=True)
    if units is not None:
        if paired:
            _check_units(units, len(method), pooled, "method")
        else:
            if not (isinstance(units, tuple) and len(units) == 2):
                raise ValueError("units of an unpaired comparison must be (units of method, units of baseline)")
            _check_units(units[0], len(method), pooled, "method")
            _check_units(units[1], len(baseline), pooled, "baseline")
    else:
        _check_units(None, 0, pooled, "method")
    if not isinstance(paired, bool):
        raise TypeError(f"paired must be True or False, got {paired!r}")
    if test not in ("t", "rank"):
        raise ValueError(f"test must be 't' or 'rank', got {test!r}")
    a = _as_values("method", method)
    b = _as_values("baseline", baseline)
    stat = "mean" if test == "t" else "median"
    name = effect_name or f"{stat} difference (method - baseline)"
    rule = (f"one-sided {'paired ' if paired else ''}{'t-test' if test == 't' else 'rank test'} at alpha "
            f"{alpha:g}: supported if {_direction_words(alternative, margin)}; not_supported if "
            f"{_refute_words(alternative, margin, eq)}; otherwise inconclusive")  # fmt: skip
    if paired:
        if a.shape != b.shape:
            raise ValueError(f"paired comparison needs method and baseline of equal length, got {a.size} and {b.size}")
        keep = ~(np.isnan(a) | np.isnan(b))
        return _one_sample(a[keep] - b[keep], value=margin, alternative=alternative, alpha=alpha,
                           equivalence_margin=eq, test=test, effect_name=name, rule=rule,
                           test_name="paired t-test" if test == "t" else "Wilcoxon signed-rank")  # fmt: skip
    a, b = a[~np.isnan(a)], b[~np.isnan(b)]
    return _two_sample(a, b, margin=margin, alternative=alternative, alpha=alpha, eq=eq, test=test,
                       name=name, rule=rule)  # fmt: skip


def _two_sample(a, b, *, margin, alternative, alpha, eq, test, name, rule) -> Decision:
    n = int(min(a.size, b.size))
    test_name = "Welch t-test" if test == "t" else "Mann-Whitney U"
    if a.size < 2 or b.size < 2:
        return _no_data(name, rule, test_name, alpha, n)
    other = "less" if alternative == "greater" else "greater"
    level = 1 - 2 * alpha
    if test == "t":
        effect = float(a.mean() - b.mean())
        va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
        se = math.sqrt(va + vb)
        if se == 0.0:
            p_sup = 0.0 if (effect > margin if alternative == "greater" else effect < margin) else 1.0
            p_opp = 0.0 if (effect < margin if alternative == "greater" else effect > margin) else 1.0
            p_eq = (0.0 if abs(effect) < eq else 1.0) if eq else math.nan
            p_ref = p_opp if eq is None else min(p_opp, p_eq)
            return Decision(_verdict(p_sup, p_ref, alpha), effect, name, (effect, effect), level, p_sup, p_ref,
                            n, alpha, rule, test_name + " (no spread: decided by the sign)")  # fmt: skip
        df = (va + vb) ** 2 / (va**2 / (a.size - 1) + vb**2 / (b.size - 1))
        t_sup = (effect - margin) / se
        p_greater = float(stats.t.sf(t_sup, df))
        p_sup = p_greater if alternative == "greater" else float(stats.t.cdf(t_sup, df))
        p_opp = float(stats.t.cdf(t_sup, df)) if alternative == "greater" else p_greater
        half = float(stats.t.ppf(1 - alpha, df)) * se
        ci = (effect - half, effect + half)
        if eq is not None:
            p_eq = max(float(stats.t.sf((effect + eq) / se, df)), float(stats.t.cdf((effect - eq) / se, df)))
        else:
            p_eq = math.nan
    else:
        effect = float(np.median(a) - np.median(b))
        p_sup = float(stats.mannwhitneyu(a - margin, b, alternative=alternative).pvalue)
        p_opp = float(stats.mannwhitneyu(a - margin, b, alternative=other).pvalue)
        ci = _bootstrap_ci(a, lambda x, y, axis=-1: np.median(x, axis=axis) - np.median(y, axis=axis),
                           level, b)  # fmt: skip
        if eq is not None:
            p_eq = max(float(stats.mannwhitneyu(a + eq, b, alternative="greater").pvalue),
                       float(stats.mannwhitneyu(a - eq, b, alternative="less").pvalue))  # fmt: skip
        else:
            p_eq = math.nan
    p_ref = p_opp if eq is None else min(p_opp, p_eq)
    return Decision(_verdict(p_sup, p_ref, alpha), effect, name, ci, level, p_sup, p_ref, n, alpha, rule,
                    test_name)  # fmt: skip


@_states_margins(lambda a: (a["value"], None))
def compare_to_value(
    values: Sequence[float],
    value: float,
    *,
    alternative: Alternative = "greater",
    alpha: float = 0.05,
    test: Literal["t", "rank"] = "t",
    effect_name: str = "",
    units: Sequence[Any] | None = None,
    pooled: str | None = None,
) -> Decision:
    """Do the values exceed (or stay below) a bar that the paper itself states?

    For claims such as "coverage stays above 0.9 - 0.02" or "success above 80%" measured over seeds.
    ``effect`` is the mean (or median); the claim is ``mean > value`` (``"greater"``) or ``mean < value``
    (``"less"``); the refuting test is the other side of ``value``. For a claim of *equality* with a value
    use :func:`equivalence` (``baseline=value``). ``units``/``pooled``: as in :func:`compare` (one
    independent unit per value; repeated units refused unless ``pooled`` says why pooling is valid).
    """
    _check_units(units, len(values) if units is not None else 0, pooled, "values")
    alpha = _check_alpha(alpha)
    alternative = _check_alternative(alternative)
    value = _check_margin("value", value)
    x = _as_values("values", values)
    stat = "mean" if test == "t" else "median"
    name = effect_name or stat
    rel = ">" if alternative == "greater" else "<"
    orel = "<" if alternative == "greater" else ">"
    rule = (f"one-sided one-sample {'t-test' if test == 't' else 'signed-rank test'} at alpha {alpha:g}: "
            f"supported if {stat} {rel} {_num(value)}; not_supported if {stat} {orel} {_num(value)} at the "
            "same level; otherwise inconclusive")  # fmt: skip
    return _one_sample(x, value=value, alternative=alternative, alpha=alpha, equivalence_margin=None,
                       test=test, effect_name=name, rule=rule,
                       test_name="one-sample t-test" if test == "t" else "Wilcoxon signed-rank",
                       center=value)  # fmt: skip


@_states_margins(lambda a: (None, a["margin"]))
def equivalence(
    method: Sequence[float],
    baseline: Sequence[float] | float,
    *,
    margin: float,
    paired: bool = False,
    alpha: float = 0.05,
    effect_name: str = "",
) -> Decision:
    """A claim of "no difference" / "on par" / "flat": TOST within ``+-margin``.

    ``supported`` when both one-sided tests reject ``|effect| >= margin`` (the two-sided ``1 - 2 alpha``
    interval lies inside ``(-margin, margin)``); ``not_supported`` when the effect is shown to lie
    *outside* the band (one-sided test of ``effect > margin`` or ``effect < -margin`` at ``alpha``,
    Holm-free since at most one side can be true); otherwise ``inconclusive``. ``baseline`` may be a
    number (equality with a value) or values (paired or Welch differences).
    """
    alpha = _check_alpha(alpha)
    margin = _check_margin("margin", margin, positive=True)  # type: ignore[assignment]
    if not isinstance(paired, bool):
        raise TypeError(f"paired must be True or False, got {paired!r}")
    a = _as_values("method", method)
    rule = (f"TOST at alpha {alpha:g}: supported if the effect is shown within +-{_num(margin)}; "
            f"not_supported if it is shown outside that band; otherwise inconclusive")  # fmt: skip
    level = 1 - 2 * alpha
    if isinstance(baseline, (int, float)) and not isinstance(baseline, bool):
        x = a[~np.isnan(a)] - float(baseline)
        name = effect_name or f"mean - {_num(float(baseline))}"
        return _tost_one_sample(x, margin, alpha, name, rule, "one-sample TOST")
    b = _as_values("baseline", baseline)
    if paired:
        if a.shape != b.shape:
            raise ValueError(f"paired comparison needs method and baseline of equal length, got {a.size} and {b.size}")
        keep = ~(np.isnan(a) | np.isnan(b))
        return _tost_one_sample(a[keep] - b[keep], margin, alpha,
                                effect_name or "mean difference (method - baseline)", rule, "paired TOST")  # fmt: skip
    a, b = a[~np.isnan(a)], b[~np.isnan(b)]
    name = effect_name or "mean difference (method - baseline)"
    n = int(min(a.size, b.size))
    if a.size < 2 or b.size < 2:
        return _no_data(name, rule, "Welch TOST", alpha, n)
    effect = float(a.mean() - b.mean())
    va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
    se = math.sqrt(va + vb)
    if se == 0.0:
        inside = abs(effect) < margin
        return Decision("supported" if inside else "not_supported", effect, name, (effect, effect), level,
                        0.0 if inside else 1.0, 1.0 if inside else 0.0, n, alpha, rule,
                        "Welch TOST (no spread: decided by the value)")  # fmt: skip
    df = (va + vb) ** 2 / (va**2 / (a.size - 1) + vb**2 / (b.size - 1))
    return _tost_from_t(effect, se, df, margin, alpha, name, rule, "Welch TOST", n)


def _tost_one_sample(x: np.ndarray, margin: float, alpha: float, name: str, rule: str, test: str) -> Decision:
    n = int(x.size)
    if n < 2:
        return _no_data(name, rule, test, alpha, n)
    mean, sd = float(x.mean()), float(x.std(ddof=1))
    if sd == 0.0:
        inside = abs(mean) < margin
        return Decision("supported" if inside else "not_supported", mean, name, (mean, mean), 1 - 2 * alpha,
                        0.0 if inside else 1.0, 1.0 if inside else 0.0, n, alpha, rule,
                        test + " (no spread: decided by the value)")  # fmt: skip
    return _tost_from_t(mean, sd / math.sqrt(n), n - 1, margin, alpha, name, rule, test, n)


def _tost_from_t(effect, se, df, margin, alpha, name, rule, test, n) -> Decision:
    p_lo = float(stats.t.sf((effect + margin) / se, df))  # H0: effect <= -margin
    p_hi = float(stats.t.cdf((effect - margin) / se, df))  # H0: effect >= margin
    p_sup = max(p_lo, p_hi)
    # Refutation: shown above +margin or below -margin (one of the two can hold).
    p_out = min(float(stats.t.sf((effect - margin) / se, df)), float(stats.t.cdf((effect + margin) / se, df)))
    half = float(stats.t.ppf(1 - alpha, df)) * se
    return Decision(_verdict(p_sup, p_out, alpha), effect, name, (effect - half, effect + half), 1 - 2 * alpha,
                    p_sup, p_out, n, alpha, rule, test)  # fmt: skip


# --------------------------------------------------------------------------------------------------
# Rates
# --------------------------------------------------------------------------------------------------


def _check_count(k_name: str, k: int, n_name: str, n: int) -> tuple[int, int]:
    for name, v in ((k_name, k), (n_name, n)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise TypeError(f"{name} must be an int, got {v!r}")
    if n < 0 or k < 0 or k > n:
        raise ValueError(f"{k_name} must satisfy 0 <= {k_name} <= {n_name}, got {k_name}={k}, {n_name}={n}")
    return int(k), int(n)


@_states_margins(lambda a: (a["margin"], a["equivalence_margin"]))
def compare_rates(
    k1: int,
    n1: int,
    k2: int,
    n2: int,
    *,
    alternative: Alternative = "greater",
    margin: float = 0.0,
    equivalence_margin: float | None = None,
    alpha: float = 0.05,
    effect_name: str = "",
) -> Decision:
    """Is the method's rate ``k1/n1`` above (or below) the baseline's ``k2/n2``?

    ``effect = k1/n1 - k2/n2``; the one-sided tests are statsmodels' score tests
    (``test_proportions_2indep(method="score")``, Miettinen-Nurminen, which take a non-zero ``margin``), the
    interval is Newcombe's hybrid score interval of the difference (built from the Wilson intervals of
    each arm); ``equivalence_margin`` adds a TOST (``tost_proportions_2indep``) as a way to refute.
    """
    from statsmodels.stats.proportion import (
        confint_proportions_2indep,
        test_proportions_2indep,
        tost_proportions_2indep,
    )

    alpha = _check_alpha(alpha)
    alternative = _check_alternative(alternative)
    margin = _check_margin("margin", margin)
    eq = _check_margin("equivalence_margin", equivalence_margin, positive=True)
    k1, n1 = _check_count("k1", k1, "n1", n1)
    k2, n2 = _check_count("k2", k2, "n2", n2)
    name = effect_name or "rate difference (method - baseline)"
    rule = (f"one-sided score test of two rates at alpha {alpha:g}: supported if "
            f"{_direction_words(alternative, margin)}; not_supported if {_refute_words(alternative, margin, eq)}; "
            "otherwise inconclusive")  # fmt: skip
    if n1 == 0 or n2 == 0:
        return _no_data(name, rule, "score test", alpha, min(n1, n2))
    effect = k1 / n1 - k2 / n2
    level = 1 - 2 * alpha
    lo, hi = confint_proportions_2indep(k1, n1, k2, n2, method="newcomb", compare="diff", alpha=2 * alpha)
    sm_alt = {"greater": "larger", "less": "smaller"}
    other = "less" if alternative == "greater" else "greater"
    p_sup = _score_p(test_proportions_2indep, k1, n1, k2, n2, margin, sm_alt[alternative], effect, alternative)
    p_opp = _score_p(test_proportions_2indep, k1, n1, k2, n2, margin, sm_alt[other], effect, other)
    if eq is not None:
        with np.errstate(divide="ignore", invalid="ignore"):
            p_eq = float(tost_proportions_2indep(k1, n1, k2, n2, -eq, eq, method="score", compare="diff").pvalue)
        p_ref = min(p_opp, p_eq)
    else:
        p_ref = p_opp
    return Decision(_verdict(p_sup, p_ref, alpha), effect, name, (float(lo), float(hi)), level, p_sup, p_ref,
                    min(n1, n2), alpha, rule, f"score test ({k1}/{n1} vs {k2}/{n2})")  # fmt: skip


def _score_p(test, k1, n1, k2, n2, value, sm_alt, effect, alternative) -> float:
    import warnings

    with warnings.catch_warnings(), np.errstate(divide="ignore", invalid="ignore"):
        # statsmodels also computes the ratio and odds ratio of the rates, which divide by zero at 0/n.
        warnings.simplefilter("ignore", RuntimeWarning)
        res = test(k1, n1, k2, n2, value=value, method="score", compare="diff", alternative=sm_alt)
    p = float(res.pvalue)
    if math.isnan(p):  # degenerate tables (0/n vs 0/n): decided by the sign of the difference
        beyond = effect > value if alternative == "greater" else effect < value
        return 0.0 if beyond and (k1 + k2) not in (0, n1 + n2) else 1.0
    return p


@_states_margins(lambda a: (a["value"], None))
def rate_vs_value(
    k: int,
    n: int,
    value: float,
    *,
    alternative: Alternative = "greater",
    alpha: float = 0.05,
    effect_name: str = "",
) -> Decision:
    """Is the rate ``k/n`` above (or below) a bar the paper states? Exact binomial test, Wilson interval."""
    from statsmodels.stats.proportion import proportion_confint

    alpha = _check_alpha(alpha)
    alternative = _check_alternative(alternative)
    k, n = _check_count("k", k, "n", n)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 1:
        raise ValueError(f"value must be a rate in (0, 1), got {value!r}")
    name = effect_name or "rate"
    rel = ">" if alternative == "greater" else "<"
    orel = "<" if alternative == "greater" else ">"
    rule = (f"one-sided exact binomial test at alpha {alpha:g}: supported if rate {rel} {_num(value)}; "
            f"not_supported if rate {orel} {_num(value)} at the same level; otherwise inconclusive")  # fmt: skip
    if n == 0:
        return _no_data(name, rule, "binomial test", alpha, 0)
    other = "less" if alternative == "greater" else "greater"
    p_sup = float(stats.binomtest(k, n, value, alternative=alternative).pvalue)
    p_ref = float(stats.binomtest(k, n, value, alternative=other).pvalue)
    lo, hi = proportion_confint(k, n, alpha=2 * alpha, method="wilson")
    return Decision(_verdict(p_sup, p_ref, alpha), k / n, name, (float(lo), float(hi)), 1 - 2 * alpha, p_sup,
                    p_ref, n, alpha, rule, f"binomial test ({k}/{n})")  # fmt: skip


def wilson_interval(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of a rate (statsmodels' ``proportion_confint(method="wilson")``)."""
    from statsmodels.stats.proportion import proportion_confint

    k, n = _check_count("k", k, "n", n)
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level!r}")
    if n == 0:
        return (0.0, 1.0)
    lo, hi = proportion_confint(k, n, alpha=1 - level, method="wilson")
    return (float(lo), float(hi))


# --------------------------------------------------------------------------------------------------
# Trends
# --------------------------------------------------------------------------------------------------


@_states_margins(lambda a: (None, a["margin"]) if a["claim"] == "flat" else (a["margin"], None))
def trend(
    x: Sequence[float],
    y: Sequence[float],
    *,
    claim: Literal["increasing", "decreasing", "flat"],
    margin: float = 0.0,
    alpha: float = 0.05,
    method: Literal["ols", "spearman"] = "ols",
    effect_name: str = "",
) -> Decision:
    """Does ``y`` grow, shrink or stay flat in ``x``? (Pass ``log(x)`` / ``log(y)`` for rates.)

    ``method="ols"``: the least-squares slope with its t interval (``n - 2`` degrees of freedom; one point
    per seed and x, so seeds count as replicates). ``claim="increasing"``: supported if slope > margin,
    not_supported if slope < margin, one-sided at ``alpha``. ``"flat"``: TOST on the slope within
    ``+-margin`` (``margin > 0`` required): supported if shown inside, not_supported if shown outside.
    ``method="spearman"``: the rank correlation (``effect`` is rho; its interval by the Fisher z
    transform with the Bonett-Wright variance), for monotone-not-linear claims; "flat" is not offered.
    """
    alpha = _check_alpha(alpha)
    if claim not in ("increasing", "decreasing", "flat"):
        raise ValueError(f"claim must be 'increasing', 'decreasing' or 'flat', got {claim!r}")
    if method not in ("ols", "spearman"):
        raise ValueError(f"method must be 'ols' or 'spearman', got {method!r}")
    margin = _check_margin("margin", margin)  # type: ignore[assignment]
    xa = _as_values("x", x)
    ya = _as_values("y", y)
    if xa.shape != ya.shape:
        raise ValueError(f"x and y must have equal length, got {xa.size} and {ya.size}")
    keep = ~(np.isnan(xa) | np.isnan(ya))
    xa, ya = xa[keep], ya[keep]
    n = int(xa.size)
    level = 1 - 2 * alpha
    if claim == "flat":
        if method != "ols":
            raise ValueError("claim='flat' needs method='ols' (an equivalence test on the slope)")
        if margin <= 0:
            raise ValueError(f"margin must be > 0 for claim='flat' (the equivalence band), got {margin!r}")
        name = effect_name or "slope of y in x"
        rule = (f"TOST on the OLS slope at alpha {alpha:g}: supported if the slope is shown within "
                f"+-{_num(margin)}; not_supported if shown outside; otherwise inconclusive")  # fmt: skip
        if n < 3 or np.ptp(xa) == 0:
            return _no_data(name, rule, "OLS slope TOST", alpha, n)
        slope, se = _ols(xa, ya)
        if se == 0.0:
            inside = abs(slope) < margin
            return Decision("supported" if inside else "not_supported", slope, name, (slope, slope), level,
                            0.0 if inside else 1.0, 1.0 if inside else 0.0, n, alpha, rule,
                            "OLS slope TOST (exact fit)")  # fmt: skip
        return _tost_from_t(slope, se, n - 2, margin, alpha, name, rule, "OLS slope TOST", n)
    alternative: Alternative = "greater" if claim == "increasing" else "less"
    other = "less" if alternative == "greater" else "greater"
    if method == "ols":
        name = effect_name or "slope of y in x"
        rule = (f"one-sided t-test on the OLS slope at alpha {alpha:g}: supported if slope "
                f"{'>' if alternative == 'greater' else '<'} {_num(margin)}; not_supported if slope "
                f"{'<' if alternative == 'greater' else '>'} {_num(margin)} at the same level; otherwise "
                "inconclusive")  # fmt: skip
        if n < 3 or np.ptp(xa) == 0:
            return _no_data(name, rule, "OLS slope t-test", alpha, n)
        slope, se = _ols(xa, ya)
        if se == 0.0:
            beyond = slope > margin if alternative == "greater" else slope < margin
            against = slope < margin if alternative == "greater" else slope > margin
            return Decision(_verdict(0.0 if beyond else 1.0, 0.0 if against else 1.0, alpha), slope, name,
                            (slope, slope), level, 0.0 if beyond else 1.0, 0.0 if against else 1.0, n, alpha,
                            rule, "OLS slope t-test (exact fit)")  # fmt: skip
        t = (slope - margin) / se
        p_g, p_l = float(stats.t.sf(t, n - 2)), float(stats.t.cdf(t, n - 2))
        p_sup, p_ref = (p_g, p_l) if alternative == "greater" else (p_l, p_g)
        half = float(stats.t.ppf(1 - alpha, n - 2)) * se
        return Decision(_verdict(p_sup, p_ref, alpha), slope, name, (slope - half, slope + half), level, p_sup,
                        p_ref, n, alpha, rule, "OLS slope t-test")  # fmt: skip
    name = effect_name or "Spearman rank correlation"
    rule = (f"one-sided Spearman test at alpha {alpha:g}: supported if rho "
            f"{'>' if alternative == 'greater' else '<'} 0; not_supported if rho "
            f"{'<' if alternative == 'greater' else '>'} 0 at the same level; otherwise inconclusive")  # fmt: skip
    if margin != 0.0:
        raise ValueError("method='spearman' tests rho against 0: margin must be 0")
    if n < 4 or np.ptp(xa) == 0 or np.ptp(ya) == 0:
        return _no_data(name, rule, "Spearman test", alpha, n)
    rho = float(stats.spearmanr(xa, ya).statistic)
    p_sup = float(stats.spearmanr(xa, ya, alternative=alternative).pvalue)
    p_ref = float(stats.spearmanr(xa, ya, alternative=other).pvalue)
    z = math.atanh(max(min(rho, 0.999999), -0.999999))
    sez = math.sqrt((1 + rho**2 / 2) / (n - 3))
    zq = float(stats.norm.ppf(1 - alpha))
    ci = (math.tanh(z - zq * sez), math.tanh(z + zq * sez))
    return Decision(_verdict(p_sup, p_ref, alpha), rho, name, ci, level, p_sup, p_ref, n, alpha, rule,
                    "Spearman test")  # fmt: skip


def _ols(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    res = stats.linregress(x, y)
    return float(res.slope), float(res.stderr)


# --------------------------------------------------------------------------------------------------
# Several sub-claims
# --------------------------------------------------------------------------------------------------


def _holm_adjust(p_values: Sequence[float]) -> np.ndarray:
    """Holm-adjusted p-values: ``max_{j <= i} min(1, (m - j) p_(j))`` over the sorted p-values.

    The same numbers as statsmodels' ``multipletests(method="holm")`` (a test checks it), written out
    because that function runs ``gc.collect()`` on every call (about 0.3 s), which power simulations
    that call ``analyze`` thousands of times cannot afford.
    """
    p = np.asarray(p_values, dtype=float)
    m = p.size
    order = np.argsort(p, kind="stable")
    scaled = np.minimum(1.0, (m - np.arange(m)) * p[order])
    adjusted = np.empty(m)
    adjusted[order] = np.maximum.accumulate(scaled)
    return adjusted


def holm(decisions: Sequence[Decision]) -> list[Decision]:
    """Holm's step-down correction across sub-claims (the numbers of statsmodels' ``multipletests(method="holm")``).

    The support p-values are corrected as one family and the refuting p-values as another, each at the
    decisions' common ``alpha``; verdicts are recomputed from the corrected values (so a sub-claim that
    was barely significant alone may become inconclusive). Decisions without data stay as they are.
    """
    decisions = list(decisions)
    if not decisions:
        return []
    alphas = {d.alpha for d in decisions}
    if len(alphas) != 1:
        raise ValueError(f"holm needs decisions made at one alpha, got {sorted(alphas)}")
    alpha = alphas.pop()
    out = list(decisions)
    for attr in ("p_value", "p_refute"):
        idx = [i for i, d in enumerate(out) if math.isfinite(getattr(d, attr))]
        if not idx:
            continue
        for i, p in zip(idx, _holm_adjust([getattr(out[i], attr) for i in idx])):
            out[i] = replace(out[i], **{attr: float(p)})
    m = len(decisions)
    return [
        replace(d, verdict=_verdict(d.p_value, d.p_refute, alpha),
                rule=d.rule + f" (Holm-corrected across {m} sub-claims)")  # fmt: skip
        if math.isfinite(d.p_value) or math.isfinite(d.p_refute) else d
        for d in out
    ]


CombineRule = Literal["all", "any"] | int


def combine(checks: Sequence[ClaimCheck], rule: CombineRule = "all") -> tuple[Verdict, list[str], str]:
    """The paper's verdict from its decisive sub-claims, which ones decided it, and the rule in words.

    - ``"all"`` (a claim that is a conjunction): supported if every decisive sub-claim is supported;
      not_supported if any is not_supported; otherwise inconclusive.
    - ``"any"``: supported if any decisive sub-claim is supported; not_supported if all are.
    - an int ``k``: supported if at least ``k`` decisive sub-claims are supported; not_supported if so many
      are not_supported that ``k`` supported ones are out of reach.

    No decisive sub-claim at all gives ``inconclusive``.
    """
    decisive = [c for c in checks if c.decisive]
    n = len(decisive)
    # A check whose negative control came out supported, or whose headroom is below the paper's effect, counts
    # as inconclusive whatever its own verdict (ClaimCheck.effective_verdict).
    sup = [c.id for c in decisive if c.effective_verdict == "supported"]
    ref = [c.id for c in decisive if c.effective_verdict == "not_supported"]
    inc = [c.id for c in decisive if c.effective_verdict == "inconclusive"]
    if n == 0:
        return "inconclusive", [], "no decisive sub-claim could be evaluated"
    blocked = [c.id for c in decisive if c.effective_verdict != c.verdict]
    verdict, ids, text = _combine_counts(n, sup, ref, inc, rule)
    if blocked:
        text += ("; counted as inconclusive because their negative control came out supported or their headroom "
                 f"is below the paper's effect: {', '.join(blocked)}")  # fmt: skip
    return verdict, ids, text


def _combine_counts(
    n: int, sup: list[str], ref: list[str], inc: list[str], rule: CombineRule
) -> tuple[Verdict, list[str], str]:
    if rule == "all":
        text = (f"supported if all {n} decisive sub-claims are supported; not_supported if any is "
                "not_supported; otherwise inconclusive")  # fmt: skip
        if len(sup) == n:
            return "supported", sup, text
        if ref:
            return "not_supported", ref, text
        return "inconclusive", inc, text
    if rule == "any":
        text = (f"supported if any of the {n} decisive sub-claims is supported; not_supported if all are "
                "not_supported; otherwise inconclusive")  # fmt: skip
        if sup:
            return "supported", sup, text
        if len(ref) == n:
            return "not_supported", ref, text
        return "inconclusive", inc, text
    if isinstance(rule, bool) or not isinstance(rule, int) or not 1 <= rule <= n:
        raise ValueError(f"rule must be 'all', 'any' or an int in [1, {n}], got {rule!r}")
    text = (f"supported if at least {rule} of the {n} decisive sub-claims are supported; not_supported if "
            f"more than {n - rule} are not_supported; otherwise inconclusive")  # fmt: skip
    if len(sup) >= rule:
        return "supported", sup, text
    if len(ref) > n - rule:
        return "not_supported", ref, text
    return "inconclusive", inc, text


def not_run_check(id: str, claim: str, reason: str, *, decisive: bool = True) -> ClaimCheck:
    """The check of a sub-claim whose deciding arm did not run (``reason``: "the SmolLM2 arms need the
    `language` extra"): ``inconclusive``, never decided by a substitute arm."""
    if not isinstance(reason, str) or not reason:
        raise ValueError("reason must say why the arm did not run, e.g. \"needs the `language` extra\"")
    return ClaimCheck(claim=claim, verdict="inconclusive", evidence=f"not run: {reason}", id=id,
                      rule="the deciding arm did not run, so this sub-claim cannot be decided", decisive=decisive,
                      outcome="not_run")  # fmt: skip


# --------------------------------------------------------------------------------------------------
# Headroom: what the design lets the experiment show
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Headroom:
    """The best the baseline can do at this budget and the largest effect the experiment can then show.

    Attributes:
        baseline_best: the baseline's best possible value here (a closed form, e.g. the recall of random search
            at the query budget, or a measured ceiling).
        ceiling: the best value the metric can take (1.0 for a rate).
        max_effect: the largest effect the method can show over the baseline: ``ceiling - baseline_best``
            (``baseline_best - ceiling`` for a metric where lower is better).
        paper_effect: the effect the paper reports (the size the check must be able to show).
        can_decide: ``max_effect >= paper_effect``: otherwise a ceiling, not the method, decides the check.
        text: the statement in words, for the report.
    """

    baseline_best: float
    ceiling: float
    max_effect: float
    paper_effect: float
    can_decide: bool
    text: str

    def to_dict(self) -> dict[str, Any]:
        return {"baseline_best": self.baseline_best, "ceiling": self.ceiling, "max_effect": self.max_effect,
                "paper_effect": self.paper_effect, "can_decide": self.can_decide, "text": self.text}  # fmt: skip


def headroom(
    *, baseline_best: float, ceiling: float, paper_effect: float, alternative: Alternative = "greater", what: str = ""
) -> Headroom:
    """State the headroom of a decisive check from its design.

    Args:
        baseline_best: the best the baseline can do at this budget (e.g. :func:`random_search_recall`).
        ceiling: the metric's best value (1.0 for a recall or an accuracy; 0 for an error).
        paper_effect: the effect size the paper reports (positive: an improvement of that size).
        alternative: ``"greater"`` when higher is better, ``"less"`` when lower is better.
        what: what the baseline's best is, in words ("random search's closed-form recall at 12 queries a cell").
    """
    alternative = _check_alternative(alternative)
    for name, value in (("baseline_best", baseline_best), ("ceiling", ceiling), ("paper_effect", paper_effect)):
        if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
        if not math.isfinite(float(value)):
            raise ValueError(f"{name} must be finite, got {value!r}")
    if paper_effect <= 0:
        raise ValueError(f"paper_effect must be > 0 (the size of the improvement the paper reports), got {paper_effect}")
    max_effect = float(ceiling - baseline_best) if alternative == "greater" else float(baseline_best - ceiling)
    if max_effect < 0:
        raise ValueError(f"baseline_best {baseline_best} lies beyond the ceiling {ceiling} for alternative {alternative!r}")
    can = max_effect >= paper_effect
    text = (f"baseline best {_num(float(baseline_best))}{f' ({what})' if what else ''}, ceiling {_num(float(ceiling))}: "
            f"the largest effect this design can show is {_num(max_effect)} against the paper's {_num(float(paper_effect))}"
            + ("" if can else " (below the paper's effect: this check cannot decide)"))  # fmt: skip
    return Headroom(float(baseline_best), float(ceiling), max_effect, float(paper_effect), can, text)


def random_search_recall(failure_rate: float | Sequence[float], queries: int) -> float:
    """The expected recall of uniform random search with ``queries`` independent queries per cell: the mean over
    cells of ``1 - (1 - p)^queries``, the chance that a cell whose queries fail with probability ``p`` shows at
    least one failure. The closed-form ``baseline_best`` of a failure-finding check."""
    if isinstance(queries, bool) or not isinstance(queries, (int, np.integer)) or queries < 0:
        raise ValueError(f"queries must be a non-negative int, got {queries!r}")
    p = _as_values("failure_rate", np.atleast_1d(np.asarray(failure_rate, dtype=float)))
    if p.size == 0 or np.any(np.isnan(p)) or np.any((p < 0) | (p > 1)):
        raise ValueError("failure_rate must hold probabilities in [0, 1]")
    return float(np.mean(1.0 - (1.0 - p) ** int(queries)))


# --------------------------------------------------------------------------------------------------
# The unit of analysis
# --------------------------------------------------------------------------------------------------


def per_unit(values: Sequence[float], units: Sequence[Any]) -> tuple[list[Any], np.ndarray]:
    """One value per independent unit (seed, trained model, environment): the mean of each unit's values, in
    the order units first appear. Use it before a primitive when several values share a unit."""
    x = _as_values("values", values)
    if len(units) != x.size:
        raise ValueError(f"units must give one unit per value, got {len(units)} units for {x.size} values")
    order: dict[Any, list[float]] = {}
    for u, v in zip(units, x):
        order.setdefault(u, []).append(v)
    return list(order), np.array([float(np.nanmean(vs)) if not np.all(np.isnan(vs)) else math.nan for vs in order.values()])


def _check_units(units: Sequence[Any] | None, n: int, pooled: str | None, what: str) -> None:
    """Refuse pooled pseudo-replicates: ``units`` must name a distinct independent unit per value, unless
    ``pooled`` states why pooling is valid."""
    if pooled is not None and (not isinstance(pooled, str) or not pooled.strip()):
        raise ValueError("pooled must state why pooling values of one unit is valid (a non-empty str)")
    if units is None:
        return
    if isinstance(units, str) or len(units) != n:
        raise ValueError(f"units must give one unit (seed, model, environment) per value of {what}: "
                         f"got {len(units) if not isinstance(units, str) else 'a str'} for {n} values")  # fmt: skip
    if len(set(units)) != n and pooled is None:
        repeated = sorted({str(u) for u in units if list(units).count(u) > 1})[:5]
        raise ValueError(
            f"{what} has several values for one unit ({', '.join(repeated)}): they are pseudo-replicates, not "
            "independent samples; average them per unit (decide.per_unit) or pass pooled='why pooling is valid'"
        )


def analysis(
    checks: Sequence[ClaimCheck],
    *,
    summary: str,
    rule: CombineRule = "all",
    tables: Sequence[Any] = (),
    figures: Sequence[Any] = (),
) -> Analysis:
    """An :class:`Analysis` whose verdict, rule text and ``decided_by`` come from :func:`combine`."""
    verdict, decided_by, text = combine(checks, rule)
    return Analysis(verdict, summary, list(tables), list(figures), list(checks), rule=text, decided_by=decided_by)


# --------------------------------------------------------------------------------------------------
# Power
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Power:
    """How often a rule said each verdict over simulated experiments."""

    supported: float
    not_supported: float
    inconclusive: float
    n_sims: int

    def describe(self) -> str:
        return (f"power {self.supported:.2f} (supported in {self.supported:.0%} of {self.n_sims} simulated "
                f"runs; not_supported in {self.not_supported:.0%})")  # fmt: skip


def power(
    rule_fn: Callable[[Any], Decision | Analysis | ClaimCheck | str],
    simulate_fn: Callable[[np.random.Generator], Any],
    n_sims: int = 500,
    seed: int = 0,
) -> Power:
    """The chance that ``rule_fn`` says each verdict on data drawn by ``simulate_fn(rng)``.

    Simulate data with the effect the paper reports to get the rule's power (its chance of saying
    ``supported`` when the claim is true), or with no effect to get its false-support rate.
    """
    if isinstance(n_sims, bool) or not isinstance(n_sims, int) or n_sims < 1:
        raise ValueError(f"n_sims must be a positive int, got {n_sims!r}")
    rng = np.random.default_rng(seed)
    counts = {"supported": 0, "not_supported": 0, "inconclusive": 0}
    for _ in range(n_sims):
        out = rule_fn(simulate_fn(rng))
        v = out if isinstance(out, str) else out.verdict
        if v not in counts:
            raise ValueError(f"rule_fn returned verdict {v!r}")
        counts[v] += 1
    return Power(counts["supported"] / n_sims, counts["not_supported"] / n_sims, counts["inconclusive"] / n_sims,
                 n_sims)  # fmt: skip


def power_of_compare(
    effect: float,
    sd: float,
    n: int,
    *,
    paired: bool,
    n_sims: int = 2000,
    seed: int = 0,
    **compare_kwargs: Any,
) -> Power:
    """Power of :func:`compare` for normal data with a true mean difference ``effect``.

    ``sd`` is the standard deviation of the paired differences (``paired=True``) or of each arm
    (``paired=False``); ``n`` pairs or values per arm. ``compare_kwargs`` go to :func:`compare`
    (``alternative``, ``margin``, ``equivalence_margin``, ``alpha``).
    """
    if not (isinstance(n, int) and n >= 2):
        raise ValueError(f"n must be an int >= 2, got {n!r}")
    if not (math.isfinite(sd) and sd > 0):
        raise ValueError(f"sd must be a positive number, got {sd!r}")

    def simulate(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        if paired:
            return effect + sd * rng.standard_normal(n), np.zeros(n)
        return effect + sd * rng.standard_normal(n), sd * rng.standard_normal(n)

    return power(lambda ab: compare(ab[0], ab[1], paired=paired, **compare_kwargs), simulate, n_sims, seed)


def power_of_rates(
    p1: float, p2: float, n: int, *, n_sims: int = 2000, seed: int = 0, **kwargs: Any
) -> Power:
    """Power of :func:`compare_rates` with true rates ``p1`` (method) and ``p2`` (baseline), ``n`` each."""
    for name, p in (("p1", p1), ("p2", p2)):
        if not 0 <= p <= 1:
            raise ValueError(f"{name} must be a rate in [0, 1], got {p!r}")
    if not (isinstance(n, int) and n >= 1):
        raise ValueError(f"n must be a positive int, got {n!r}")
    return power(
        lambda ks: compare_rates(int(ks[0]), n, int(ks[1]), n, **kwargs),
        lambda rng: (rng.binomial(n, p1), rng.binomial(n, p2)),
        n_sims,
        seed,
    )
