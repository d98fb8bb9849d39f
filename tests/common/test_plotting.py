"""The shared plotting helpers: the band is the stated spread, labels carry units, problems are found."""

from __future__ import annotations

import math

import numpy as np
import pytest

from icml24.common.plotting import (
    METHOD_COLOURS,
    figure_problems,
    label_axes,
    legend_outside,
    mark_no_data,
    mean_and_spread,
    new_figure,
    plot_mean_band,
    plot_mean_errorbar,
    series_styles,
    spread_caption,
)


def test_mean_and_spread_by_hand():
    mean, half, n = mean_and_spread([[1.0, 3.0], [2.0, float("nan")], []])
    assert mean[0] == 2.0 and math.isclose(half[0], math.sqrt(2)) and n.tolist() == [2, 1, 0]
    assert half[1] == 0.0 and math.isnan(mean[2])
    _, sem, _ = mean_and_spread([[1.0, 3.0]], "sem")
    assert math.isclose(sem[0], 1.0)
    _, ci, _ = mean_and_spread([[1.0, 3.0]], "ci95")
    assert math.isclose(ci[0], 12.706204736 * 1.0, rel_tol=1e-6)  # t_{0.975, 1} * sem
    with pytest.raises(ValueError, match="spread"):
        mean_and_spread([[1.0]], "iqr")
    with pytest.raises(TypeError, match="per_seed_values"):
        mean_and_spread(3.0)


def test_band_spans_mean_plus_minus_std_and_figure_is_labelled():
    fig, axes = new_figure(1, 2)
    ax = axes[0, 0]
    line = plot_mean_band(ax, [1, 2, 3], np.array([[0.0, 2.0], [1.0, 3.0], [2.0, 4.0]]), "method")
    assert line.get_label() == "method" and line.get_ydata().tolist() == [1.0, 2.0, 3.0]
    band = ax.collections[0].get_paths()[0].vertices
    assert math.isclose(band[:, 1].max(), 3.0 + math.sqrt(2)) and math.isclose(band[:, 1].min(), 1.0 - math.sqrt(2))
    plot_mean_band(ax, [1, 2, 3], [[1.0], [1.0], [1.0]], "baseline")
    assert figure_problems(fig) == [
        "panel 1: no x-axis label",
        "panel 1: no y-axis label",
        "panel 1: 2 labelled lines but no legend",
        "panel 2: empty axes; say there is no data (mark_no_data)",
    ]
    label_axes(ax, "steps", "return", xunit="env steps", yunit="reward units")
    ax.legend()
    assert ax.get_xlabel() == "steps (env steps)"
    assert figure_problems(fig) == ["panel 2: empty axes; say there is no data (mark_no_data)"]
    plot_mean_errorbar(axes[0, 1], ["SAPG", "PPO"], [[1.0, 2.0], [0.5, 0.7]], "final")
    assert figure_problems(fig) == ["panel 2: no x-axis label"]  # its row's y label is panel 1's
    fig2, axes2 = new_figure(2, 1)
    for ax in axes2[:, 0]:
        plot_mean_band(ax, [1, 2], [[1.0], [2.0]], "m")
    axes2[1, 0].set_xlabel("steps")
    assert figure_problems(fig2) == ["panel 1: no y-axis label", "panel 2: no y-axis label"]  # shared x
    with pytest.raises(ValueError, match="xlabel"):
        label_axes(ax, "", "y")
    with pytest.raises(ValueError, match="3 points"):
        plot_mean_band(ax, [1, 2, 3], [[1.0]], "bad")


def test_spread_caption_says_what_the_band_is():
    assert spread_caption("std", 5) == "mean over 5 seeds; band: ± one standard deviation over seeds (ddof=1)"
    assert spread_caption("sem", over="trials", kind="error bars").startswith("mean over trials; error bars:")


def test_new_figure_is_constrained_and_no_paper_calls_tight_layout():
    from pathlib import Path

    import icml24

    fig, _ = new_figure(1, 2)
    assert type(fig.get_layout_engine()).__name__ == "ConstrainedLayoutEngine"
    root = Path(icml24.__file__).parent
    offenders = [str(p.relative_to(root)) for p in root.rglob("*.py") if "tight_layout(" in p.read_text()]
    assert offenders == [], "tight_layout() on a constrained figure warns and replaces its layout"


def test_series_styles_give_every_method_a_colour_and_every_setting_a_line_style():
    methods = [f"method {i}" for i in range(6)]
    styles = series_styles(methods, ["m=1", "m=8"])  # lp-coresets' Fig. 1: 12 series
    assert len(styles) == 12
    looks = {(s["color"], s["linestyle"]) for s in styles.values()}
    assert len(looks) == 12  # no two series alike (a 10-colour cycle gave two methods blue and orange)
    assert len({styles[(m, "m=1")]["color"] for m in methods}) == 6
    assert styles[("method 0", "m=1")]["color"] == styles[("method 0", "m=8")]["color"]
    assert styles[("method 0", "m=1")]["linestyle"] != styles[("method 0", "m=8")]["linestyle"]
    assert series_styles(["a"]) == {("a", ""): {"color": METHOD_COLOURS[0], "linestyle": "-", "marker": "o"}}
    with pytest.raises(ValueError, match="methods"):
        series_styles([f"m{i}" for i in range(len(METHOD_COLOURS) + 1)])
    with pytest.raises(ValueError, match="distinct"):
        series_styles(["a", "a"])


def test_lines_drawn_alike_a_legend_over_the_data_and_empty_panels_are_problems():
    fig, axes = new_figure(1, 2)
    ax = axes[0, 0]
    for name in ("a", "b"):
        ax.plot([0, 1, 2], [0.0, 1.0, 2.0] if name == "a" else [2.0, 1.0, 0.0], color="C0", label=name)
    label_axes(ax, "x", "y")
    ax.legend(loc="center")  # over the crossing point at (1, 1)
    problems = figure_problems(fig)
    assert "panel 1: lines 'a' and 'b' look the same" in problems
    assert any(p.startswith("panel 1: the legend covers") for p in problems)
    assert "panel 2: empty axes; say there is no data (mark_no_data)" in problems
    # The fixes: a style each, the legend outside the data, and the empty panel says so.
    fig, axes = new_figure(1, 2)
    ax = axes[0, 0]
    styles = series_styles(["a", "b"])
    for name in ("a", "b"):
        ax.plot([0, 1, 2], [0.0, 1.0, 2.0] if name == "a" else [2.0, 1.0, 0.0], label=name, **styles[(name, "")])
    label_axes(ax, "x", "y")
    legend_outside(fig)
    mark_no_data(axes[0, 1])
    assert figure_problems(fig) == []
    assert axes[0, 1].texts[0].get_text() == "no data at this scale"


def test_colliding_tick_labels_are_a_problem():
    fig, axes = new_figure(1, 1, width=2.0)
    ax = axes[0, 0]
    ax.plot(range(30), range(30))
    ax.set_xticks(range(30))
    ax.set_xticklabels([f"label number {i}" for i in range(30)])
    label_axes(ax, "x", "y")
    assert "panel 1: x tick labels overlap" in figure_problems(fig)
    ax.set_xticks([0, 15, 29])
    ax.set_xticklabels(["0", "15", "29"])
    assert figure_problems(fig) == []


def test_log_ticks_label_only_the_given_values():
    from icml24.common.plotting import log_ticks

    fig, axes = new_figure()
    ax = axes[0, 0]
    ax.plot([100, 200, 400], [1.0, 0.5, 0.25], marker="o")
    ax.set(xscale="log", yscale="log")
    label_axes(ax, "k", "error")
    log_ticks(ax, [100, 200, 400])
    fig.draw_without_rendering()
    assert [t.get_text() for t in ax.get_xticklabels(which="both") if t.get_text()] == ["100", "200", "400"]
    assert figure_problems(fig) == []
    with pytest.raises(ValueError, match="axis"):
        log_ticks(ax, [1], axis="z")
