"""The shared plotting helpers: the band is the stated spread, labels carry units, problems are found."""

from __future__ import annotations

import math

import numpy as np
import pytest

from icml24.common.plotting import (
    figure_problems,
    label_axes,
    mean_and_spread,
    new_figure,
    plot_mean_band,
    plot_mean_errorbar,
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
    ]
    label_axes(ax, "steps", "return", xunit="env steps", yunit="reward units")
    ax.legend()
    assert ax.get_xlabel() == "steps (env steps)" and figure_problems(fig) == []  # panel 2 is empty
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
