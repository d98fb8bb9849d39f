"""Shared plotting helpers for the papers' figures, so that every figure shows its spread the same way and
says what it is.

A typical figure of an ``analyze``::

    fig, axes = new_figure(1, 2)
    ax = axes[0, 0]
    for name, per_seed in curves.items():          # per_seed[i] = the seeds' values at x[i]
        plot_mean_band(ax, x, per_seed, label=name)
    label_axes(ax, "number of factors d", "cumulative regret", yunit="reward units")
    ax.legend()
    Figure("regret vs d", figure_png(fig), caption=spread_caption("std", n_seeds))

:func:`figure_problems` lists what a figure lacks (axis labels, a legend for several lines); the tests of a
paper can assert it is empty.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from icml24.common.experiment import figure_png, new_figure

__all__ = [
    "FOREST_CAPTION",
    "ForestRow",
    "METHOD_COLOURS",
    "NO_DATA",
    "figure_png",
    "figure_problems",
    "forest_plot",
    "label_axes",
    "legend_outside",
    "log_ticks",
    "mark_no_data",
    "mean_and_spread",
    "new_figure",
    "plot_mean_band",
    "plot_mean_errorbar",
    "series_styles",
    "spread_caption",
]

SPREAD_WORDS = {
    "std": "± one standard deviation over {over} (ddof=1)",
    "sem": "± one standard error of the mean over {over}",
    "ci95": "95% t-interval of the mean over {over}",
}


def mean_and_spread(
    per_seed_values: Sequence[Sequence[float]] | np.ndarray, spread: str = "std"
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per point: the mean, the half-width of the band and the count, ignoring NaN.

    Args:
        per_seed_values: one sequence of seed values per x point (ragged is fine), or a 2-D array of shape
            ``(points, seeds)``.
        spread: ``"std"`` (sample std, ddof=1), ``"sem"`` (std / sqrt(n)) or ``"ci95"`` (half-width of the
            95% t-interval of the mean).

    A point with one finite value has a zero band; a point with none has NaN mean and band.
    """
    if spread not in SPREAD_WORDS:
        raise ValueError(f"spread must be one of {tuple(SPREAD_WORDS)}, got {spread!r}")
    if isinstance(per_seed_values, (str, bytes)) or not hasattr(per_seed_values, "__len__"):
        raise TypeError(f"per_seed_values must be a sequence of per-seed sequences, got {type(per_seed_values).__name__}")
    means, halves, counts = [], [], []
    for i, point in enumerate(per_seed_values):
        arr = np.atleast_1d(np.asarray(point, dtype=float))
        if arr.ndim != 1:
            raise ValueError(f"per_seed_values[{i}] must be a flat sequence of seed values, got shape {arr.shape}")
        arr = arr[np.isfinite(arr)]
        n = arr.size
        counts.append(n)
        if n == 0:
            means.append(math.nan)
            halves.append(math.nan)
            continue
        means.append(float(arr.mean()))
        sd = float(arr.std(ddof=1)) if n > 1 else 0.0
        if spread == "std":
            halves.append(sd)
        elif spread == "sem":
            halves.append(sd / math.sqrt(n))
        else:
            from scipy import stats

            halves.append(float(stats.t.ppf(0.975, n - 1)) * sd / math.sqrt(n) if n > 1 else 0.0)
    return np.asarray(means), np.asarray(halves), np.asarray(counts)


def _check_x(x: Sequence[Any], per_seed_values: Sequence[Any]) -> np.ndarray:
    xs = np.asarray(x)
    if xs.ndim != 1:
        raise ValueError(f"x must be one-dimensional, got shape {xs.shape}")
    if len(xs) != len(per_seed_values):
        raise ValueError(f"x has {len(xs)} points but per_seed_values has {len(per_seed_values)}")
    return xs


def plot_mean_band(
    ax: Any,
    x: Sequence[float],
    per_seed_values: Sequence[Sequence[float]] | np.ndarray,
    label: str,
    *,
    spread: str = "std",
    alpha: float = 0.2,
    **line_kwargs: Any,
) -> Any:
    """Plot the mean over seeds as a line and the spread as a shaded band; return the line.

    Args:
        ax: a matplotlib ``Axes``.
        x: the x positions (numbers).
        per_seed_values: per x point, the values of every seed (see :func:`mean_and_spread`).
        label: the legend label: the method's name as the README writes it.
        spread: what the band is (``"std"``, ``"sem"``, ``"ci95"``); say it with :func:`spread_caption`.
        alpha: the band's opacity.
        line_kwargs: passed to ``ax.plot`` (``color``, ``marker``, ``linestyle``...).
    """
    xs = _check_x(x, per_seed_values)
    mean, half, _ = mean_and_spread(per_seed_values, spread)
    line_kwargs.setdefault("marker", "o" if len(xs) <= 12 else None)
    (line,) = ax.plot(xs, mean, label=label, **line_kwargs)
    ax.fill_between(xs, mean - half, mean + half, color=line.get_color(), alpha=alpha, linewidth=0)
    return line


def plot_mean_errorbar(
    ax: Any,
    x: Sequence[Any],
    per_seed_values: Sequence[Sequence[float]] | np.ndarray,
    label: str,
    *,
    spread: str = "std",
    capsize: float = 3.0,
    **kwargs: Any,
) -> Any:
    """Plot the mean over seeds with error bars (for few or categorical x); return the container.

    Categorical ``x`` (strings) are placed at 0, 1, ... with the strings as tick labels, rotated when they
    would overlap.
    """
    xs = _check_x(x, per_seed_values)
    mean, half, _ = mean_and_spread(per_seed_values, spread)
    positions: Any = xs
    if xs.dtype.kind in "USO":
        positions = np.arange(len(xs))
        ax.set_xticks(positions)
        labels = [str(v) for v in xs]
        crowded = sum(map(len, labels)) > 40  # rotate rather than let the tick labels overlap
        ax.set_xticklabels(labels, rotation=30 if crowded else 0, ha="right" if crowded else "center")
    kwargs.setdefault("marker", "o")
    kwargs.setdefault("linestyle", "none")
    return ax.errorbar(positions, mean, yerr=half, label=label, capsize=capsize, **kwargs)


def label_axes(
    ax: Any,
    xlabel: str,
    ylabel: str,
    *,
    xunit: str | None = None,
    yunit: str | None = None,
    title: str | None = None,
) -> None:
    """Label both axes (``"wall time (s)"``: the unit goes in parentheses) and optionally the title.

    A quantity without a unit (a count, a ratio) passes no unit; an empty label is an error.
    """
    for name, text in (("xlabel", xlabel), ("ylabel", ylabel)):
        if not isinstance(text, str) or not text.strip():
            raise ValueError(f"{name} must be a non-empty string, got {text!r}")
    ax.set_xlabel(f"{xlabel} ({xunit})" if xunit else xlabel)
    ax.set_ylabel(f"{ylabel} ({yunit})" if yunit else ylabel)
    if title:
        ax.set_title(title)


def spread_caption(spread: str = "std", n: int | None = None, *, over: str = "seeds", kind: str = "band") -> str:
    """The words for a figure's caption: ``"line: mean over 5 seeds; band: ± one standard deviation over
    seeds (ddof=1)"``."""
    if spread not in SPREAD_WORDS:
        raise ValueError(f"spread must be one of {tuple(SPREAD_WORDS)}, got {spread!r}")
    count = f"{n} {over}" if n is not None else over
    return f"mean over {count}; {kind}: " + SPREAD_WORDS[spread].format(over=over)


def figure_problems(fig: Any) -> list[str]:
    """What a matplotlib figure lacks for a reader; empty when it is fine.

    Per panel with data: a missing x label (unless a panel of the same grid column has one: a shared
    axis labelled once), a missing y label (unless a panel of the same grid row has one), several
    labelled lines with no legend anywhere in the figure (one shared legend is enough), two labelled
    lines drawn alike (same colour, line style and marker: :func:`series_styles` gives each its own),
    a legend inside the panel that covers data points (:func:`legend_outside`), and tick labels that
    collide. A visible panel with no data must say so (:func:`mark_no_data`), not show empty axes.
    """
    from matplotlib.colors import to_rgba

    def plain(ax: Any) -> bool:
        return ax.get_visible() and ax.name == "rectilinear" and not hasattr(ax, "_colorbar")

    axes = [ax for ax in fig.get_axes() if ax.has_data() and plain(ax)]
    any_legend = bool(fig.legends) or any(ax.get_legend() is not None for ax in fig.get_axes())
    fig.draw_without_rendering()  # lay out (constrained layout, tick labels) to measure what overlaps
    renderer = fig.canvas.get_renderer()

    def grid(ax: Any) -> tuple[range, range] | None:
        spec = ax.get_subplotspec() if hasattr(ax, "get_subplotspec") else None
        return (spec.rowspan, spec.colspan) if spec is not None else None

    def labelled_near(ax: Any, axis: str) -> bool:
        mine = grid(ax)
        if mine is None:
            return False
        for other in axes:
            theirs = grid(other)
            if other is ax or theirs is None:
                continue
            same = set(mine[1]) & set(theirs[1]) if axis == "x" else set(mine[0]) & set(theirs[0])
            if same and (other.get_xlabel() if axis == "x" else other.get_ylabel()).strip():
                return True
        return False

    problems = []
    for i, ax in enumerate(fig.get_axes()):
        where = f"panel {i + 1}" + (f" ({ax.get_title()})" if ax.get_title() else "")
        if ax not in axes:
            if plain(ax) and ax.axison and not ax.has_data() and not ax.texts and ax.get_legend() is None:
                problems.append(f"{where}: empty axes; say there is no data (mark_no_data)")
            continue
        if not ax.get_xlabel().strip() and not labelled_near(ax, "x"):
            problems.append(f"{where}: no x-axis label")
        if not ax.get_ylabel().strip() and not labelled_near(ax, "y"):
            problems.append(f"{where}: no y-axis label")
        labelled = [ln for ln in ax.get_lines() if not ln.get_label().startswith("_")]
        if len(labelled) > 1 and not any_legend:
            problems.append(f"{where}: {len(labelled)} labelled lines but no legend")
        looks: dict[tuple[Any, ...], str] = {}
        for ln in labelled:
            look = (to_rgba(ln.get_color()), str(ln.get_linestyle()), str(ln.get_marker()))
            if look in looks and looks[look] != ln.get_label():
                problems.append(f"{where}: lines {looks[look]!r} and {ln.get_label()!r} look the same")
            looks.setdefault(look, ln.get_label())
        legend = ax.get_legend()
        if legend is not None and legend.get_visible():
            box = legend.get_window_extent(renderer)
            covered = sum(
                int(box.contains(float(px), float(py)))
                for ln in ax.get_lines()
                for px, py in ax.transData.transform(ln.get_xydata()[np.isfinite(ln.get_xydata()).all(axis=1)])
            )  # fmt: skip
            if covered:
                problems.append(f"{where}: the legend covers {covered} data point(s); put it outside (legend_outside)")
        for axis_name, axis in (("x", ax.xaxis), ("y", ax.yaxis)):
            boxes = [t.get_window_extent(renderer) for t in axis.get_ticklabels(which="both")
                     if t.get_visible() and t.get_text().strip()]  # fmt: skip
            if any(a.overlaps(b) for k, a in enumerate(boxes) for b in boxes[k + 1:]):
                problems.append(f"{where}: {axis_name} tick labels overlap")
    return problems



# ------------------------------------------------------------------------------------------ styles

METHOD_COLOURS = (
    "#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#000000", "#F0E442",
    "#7f7f7f", "#8c564b", "#17becf", "#bcbd22", "#9467bd", "#1f3a93", "#a6761d", "#e7298a",
)  # fmt: skip
"""One colour per method: Okabe-Ito's eight colour-blind-safe colours first, then eight more distinct ones."""

SETTING_STYLES = ("-", "--", ":", "-.", (0, (5, 1)), (0, (3, 1, 1, 1, 1, 1)))
"""One line style per setting (solid, dashed, dotted, dash-dot, then two dash patterns)."""

SETTING_MARKERS = ("o", "s", "^", "D", "v", "P")


def series_styles(methods: Sequence[str], settings: Sequence[str] = ()) -> dict[tuple[str, str], dict[str, Any]]:
    """The style of every (method, setting) series of a multi-series plot: one colour per method and one
    line style (and marker) per setting, so no two series look alike and the legend reads as a grid.

    Returns ``{(method, setting): {"color": ..., "linestyle": ..., "marker": ...}}`` to pass to
    :func:`plot_mean_band` / ``ax.plot``; with no ``settings`` the key's setting is ``""``.

    Raises:
        ValueError: more methods than :data:`METHOD_COLOURS` or more settings than :data:`SETTING_STYLES`
            (split the figure into panels instead), or a repeated name.
    """
    methods, settings = list(methods), list(settings) or [""]
    for name, items, limit in (("methods", methods, len(METHOD_COLOURS)), ("settings", settings, len(SETTING_STYLES))):
        if len(set(items)) != len(items):
            raise ValueError(f"{name} must be distinct, got {items!r}")
        if len(items) > limit:
            raise ValueError(f"{name}: {len(items)} are more than the {limit} distinct styles; use more panels")
    if not methods:
        raise ValueError("methods must name at least one method")
    return {
        (m, s): {"color": METHOD_COLOURS[i], "linestyle": SETTING_STYLES[j], "marker": SETTING_MARKERS[j]}
        for i, m in enumerate(methods)
        for j, s in enumerate(settings)
    }


NO_DATA = "no data at this scale"


def mark_no_data(ax: Any, text: str = NO_DATA) -> None:
    """Say in a panel that it has nothing to show (instead of empty 0-1 axes)."""
    ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center", color="#666")
    ax.set_xticks([])
    ax.set_yticks([])


def log_ticks(ax: Any, values: Sequence[float], axis: str = "x") -> None:
    """A log axis labelled at ``values`` only (``100, 200, 400``), without the minor-tick labels that
    matplotlib adds to a short log range and that collide (``2x10^2 3x10^2 4x10^2``)."""
    from matplotlib.ticker import NullFormatter, NullLocator

    if axis not in ("x", "y"):
        raise ValueError(f"axis must be 'x' or 'y', got {axis!r}")
    target = ax.xaxis if axis == "x" else ax.yaxis
    target.set_minor_locator(NullLocator())
    target.set_minor_formatter(NullFormatter())
    (ax.set_xticks if axis == "x" else ax.set_yticks)(list(values), labels=[f"{v:g}" for v in values])


def legend_outside(fig: Any, ax: Any | None = None, **kwargs: Any) -> Any:
    """One legend for the figure, outside the data (right of the panels; needs :func:`new_figure`'s
    constrained layout). ``ax`` gives the handles (default: every labelled artist of every panel, once)."""
    if ax is not None:
        handles, labels = ax.get_legend_handles_labels()
    else:
        seen: dict[str, Any] = {}
        for a in fig.get_axes():
            for h, lab in zip(*a.get_legend_handles_labels(), strict=True):
                seen.setdefault(lab, h)
        handles, labels = list(seen.values()), list(seen)
    kwargs.setdefault("loc", "outside right upper")
    kwargs.setdefault("fontsize", 8)
    return fig.legend(handles, labels, **kwargs)


# ------------------------------------------------------------------------------------------ forest plot

VERDICT_COLOURS = {"supported": "#1a7f37", "not_supported": "#cf222e", "inconclusive": "#9a6700"}
"""The report's verdict colours (the HTML badges use the same)."""


@dataclass(frozen=True)
class ForestRow:
    """One check in :func:`forest_plot`: its effect with CI in the check's own units.

    Attributes:
        label: the row's name (``"lp-coresets: flat-in-m"``).
        group: the heading the row is listed under (the paper's field).
        verdict: the check's verdict (its colour).
        effect: the estimated effect (``None``: only the CI is drawn).
        ci: its confidence interval ``(low, high)``; an infinite end is drawn as an arrow.
        margin: the value the rule compares the effect with, when known (a black tick).
        equivalence_margin: the half-width of the rule's no-effect band around 0, when it has one (dashed grey
            ticks at both ends of the band).
        paper_effect: the effect the paper reports, when known (an open diamond).
        control: the negative control's ``(effect, ci, verdict)``, drawn grey beside the check.
        uninformative: the check cannot decide (its control came out supported, or the design leaves less
            headroom than the paper's effect): an open marker.
        text: the numbers in the check's units, printed at the right end of the row.
    """

    label: str
    group: str
    verdict: str
    effect: float | None
    ci: tuple[float, float] | None = None
    margin: float | None = None
    equivalence_margin: float | None = None
    paper_effect: float | None = None
    control: tuple[float | None, tuple[float, float] | None, str] | None = None
    uninformative: bool = False
    text: str = ""


def _row_scale(row: ForestRow) -> float:
    """Half the row's x range: the largest finite magnitude among everything the row draws."""
    xs = [row.effect, row.margin, row.equivalence_margin, row.paper_effect, *(row.ci or ())]
    if row.control is not None:
        xs += [row.control[0], *(row.control[1] or ())]
    finite = [abs(x) for x in xs if x is not None and math.isfinite(x)]
    return max(finite, default=0.0) or 1.0


def forest_plot(rows: Sequence[ForestRow], *, title: str = "") -> Any:
    """Every check as its effect with CI, one row each, grouped under headings (a forest plot).

    Checks measure different things (a difference of accuracies, a slope, a rate), so each row has its own
    x scale: every value of the row divided by the largest magnitude the row draws (its effect, CI, margin,
    paper effect, control), so the row spans [-1, 1] with 0 in the middle, and its numbers in its own units
    are printed at the right. The caption must say so (:data:`FOREST_CAPTION`). Returns the figure.
    """
    if not rows:
        raise ValueError("rows must hold at least one ForestRow")
    groups: dict[str, list[ForestRow]] = {}
    for row in rows:
        if not isinstance(row, ForestRow):
            raise TypeError(f"rows must be ForestRow objects, got {type(row).__name__}")
        groups.setdefault(row.group, []).append(row)
    n_lines = len(rows) + len(groups)
    fig, axes = new_figure(1, 1, width=11.0, height=1.3 + 0.24 * n_lines)
    ax = axes[0, 0]
    y, ticks, labels = 0.0, [], []
    edge = 1.08
    for group, members in groups.items():
        ax.text(-edge, y, group, fontweight="bold", fontsize=9, va="center", ha="left",
                transform=ax.transData)  # fmt: skip
        ax.axhline(y + 0.5, color="#ddd", linewidth=0.8)
        y += 1
        for row in members:
            s = _row_scale(row)
            colour = VERDICT_COLOURS.get(row.verdict, "#6e7781")
            _draw_interval(ax, row.effect, row.ci, s, y, colour, edge, hollow=row.uninformative, size=6)
            if row.control is not None:
                c_effect, c_ci, _ = row.control
                _draw_interval(ax, c_effect, c_ci, s, y + 0.32, "#8c959f", edge, hollow=True, size=4, marker="s")
            if row.margin is not None and math.isfinite(row.margin):
                ax.plot([row.margin / s] * 2, [y - 0.35, y + 0.35], color="black", linewidth=1.2)
            if row.equivalence_margin is not None and math.isfinite(row.equivalence_margin):
                for end in (-row.equivalence_margin, row.equivalence_margin):
                    ax.plot([end / s] * 2, [y - 0.3, y + 0.3], color="#57606a", linewidth=1.0, linestyle="--")
            if row.paper_effect is not None and math.isfinite(row.paper_effect):
                ax.plot(row.paper_effect / s, y, marker="D", markerfacecolor="none", markeredgecolor="black",
                        markersize=5, linestyle="none")  # fmt: skip
            ax.text(edge + 0.04, y, row.text, fontsize=7, va="center", ha="left", family="monospace")
            ticks.append(y)
            labels.append(row.label)
            y += 1
    ax.axvline(0.0, color="#999", linewidth=0.8, linestyle=":")
    ax.set_xlim(-edge, edge)
    ax.set_ylim(y - 0.4, -0.6)
    ax.set_yticks(ticks)
    ax.set_yticklabels(labels, fontsize=7)
    ax.set_xticks([-1, 0, 1])
    ax.set_xticklabels(["-max", "0", "+max"])
    label_axes(ax, "effect / the largest magnitude in its row", "check")
    ax.tick_params(axis="y", length=0)
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], color=c, marker="o", linestyle="-", label=v.replace("_", " "))
               for v, c in VERDICT_COLOURS.items()]  # fmt: skip
    handles += [
        Line2D([], [], color="#8c959f", marker="s", markerfacecolor="none", label="negative control"),
        Line2D([], [], color="black", marker="|", linestyle="none", markersize=10, label="rule's margin"),
        Line2D([], [], color="#57606a", linestyle="--", label="no-effect band (equivalence)"),
        Line2D([], [], color="black", marker="D", markerfacecolor="none", linestyle="none", label="paper's effect"),
        Line2D([], [], color="#6e7781", marker="o", markerfacecolor="none", linestyle="none",
               label="cannot decide (control supported or no headroom)"),
    ]  # fmt: skip
    fig.legend(handles=handles, loc="outside upper center", ncols=4, fontsize=8, frameon=False)
    if title:
        ax.set_title(title)
    return fig


FOREST_CAPTION = (
    "Each row is one decisive check: its effect (dot) with its confidence interval (line), coloured by its "
    "verdict; an arrow marks an interval open on that side. Checks measure different things, so each row "
    "has its own scale: its values are divided by the largest magnitude the row draws, and the numbers in "
    "the check's own units are printed at the right (effect [CI]). The black tick is the rule's margin "
    "where the check states it (the bar the effect must pass), the dashed grey ticks the ends of its no-effect "
    "band where the rule has one, the open diamond the paper's effect where known, the grey square below a "
    "row the negative control's effect and interval."
)


def _draw_interval(ax: Any, effect: float | None, ci: Any, scale: float, y: float, colour: str, edge: float,
                   *, hollow: bool, size: float, marker: str = "o") -> None:  # fmt: skip
    if ci is not None and len(ci) == 2:
        lo = -math.inf if ci[0] is None else float(ci[0])
        hi = math.inf if ci[1] is None else float(ci[1])
        if math.isnan(lo) or math.isnan(hi):
            lo, hi = -math.inf, math.inf
        a, b = max(lo / scale, -edge), min(hi / scale, edge)
        ax.plot([a, b], [y, y], color=colour, linewidth=1.6, solid_capstyle="butt")
        if not math.isfinite(lo):
            ax.plot(a, y, marker="<", color=colour, markersize=5)
        if not math.isfinite(hi):
            ax.plot(b, y, marker=">", color=colour, markersize=5)
    if effect is not None and math.isfinite(effect):
        face = "white" if hollow else colour
        ax.plot(effect / scale, y, marker=marker, color=colour, markerfacecolor=face, markersize=size,
                linestyle="none")  # fmt: skip
