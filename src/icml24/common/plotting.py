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
from typing import Any

import numpy as np

from icml24.common.experiment import figure_png, new_figure

__all__ = [
    "figure_png",
    "figure_problems",
    "label_axes",
    "mean_and_spread",
    "new_figure",
    "plot_mean_band",
    "plot_mean_errorbar",
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
    axis labelled once), a missing y label (unless a panel of the same grid row has one), and several
    labelled lines with no legend anywhere in the figure (one shared legend is enough).
    """
    axes = [
        ax for ax in fig.get_axes()
        if ax.has_data() and ax.get_visible() and ax.name == "rectilinear" and not hasattr(ax, "_colorbar")
    ]  # fmt: skip
    any_legend = bool(fig.legends) or any(ax.get_legend() is not None for ax in fig.get_axes())

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
        if ax not in axes:
            continue
        where = f"panel {i + 1}" + (f" ({ax.get_title()})" if ax.get_title() else "")
        if not ax.get_xlabel().strip() and not labelled_near(ax, "x"):
            problems.append(f"{where}: no x-axis label")
        if not ax.get_ylabel().strip() and not labelled_near(ax, "y"):
            problems.append(f"{where}: no y-axis label")
        labelled = [ln for ln in ax.get_lines() if not ln.get_label().startswith("_")]
        if len(labelled) > 1 and not any_legend:
            problems.append(f"{where}: {len(labelled)} labelled lines but no legend")
    return problems
