"""The restructuring step: the simulated human's choice, the augmentation sampler touches only the chosen
concepts, and fine-tuning returns a copy that fades the chosen cells."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from icml24.evaluation.failure_landscape import (
    ConceptGrid,
    RestructureConfig,
    SearchTrace,
    apply_concepts,
    augment_with_concepts,
    evaluate_landscape,
    restructure,
    select_failure_modes,
)

from .conftest import SMALL_GRID


def _trace(cells, failed):
    cells = np.asarray(cells)
    return SearchTrace("t", images=np.zeros(len(cells), np.int64), cells=cells,
                       rewards=np.where(failed, 1.0, -1.0), failed=np.asarray(failed))


def test_simulated_human_marks_the_most_frequent_failing_cells():
    t = _trace([4, 4, 4, 2, 2, 7, 7, 9, 1], [True, True, True, True, True, True, True, False, True])
    assert select_failure_modes(t, 12, 3) == [4, 2, 7]  # 3, 2, 2 failures; 7 beats 1 (fewer) and ties go low
    assert select_failure_modes(t, 12, 10) == [4, 2, 7, 1]  # only cells that failed
    with pytest.raises(ValueError, match="n_cells"):
        select_failure_modes(t, 5, 3)


def test_augmentation_applies_only_the_chosen_cells():
    grid = ConceptGrid()
    g = torch.Generator().manual_seed(0)
    x = torch.rand(4000, 1, 16, 16)
    chosen = [3, 77, 120]
    out, applied = augment_with_concepts(x, grid, chosen, 0.5, g)
    assert set(applied.unique().tolist()) <= {-1, *chosen}
    frac = float((applied >= 0).float().mean())
    assert abs(frac - 0.5) < 4 * np.sqrt(0.25 / 4000)
    untouched = applied < 0
    torch.testing.assert_close(out[untouched], x[untouched])
    for c in chosen:
        rows = applied == c
        ref = apply_concepts(x[rows], np.repeat(grid.values(c)[None], int(rows.sum()), 0))
        torch.testing.assert_close(out[rows], ref)
    none, applied0 = augment_with_concepts(x, grid, chosen, 0.0, g)
    assert bool((applied0 < 0).all()) and torch.equal(none, x)


def test_restructure_returns_a_copy_that_fades_the_chosen_cells(trained, digits):
    model, pool, pool_labels = trained
    images, labels = digits
    before = evaluate_landscape(model, pool, pool_labels, SMALL_GRID)
    chosen = [int(c) for c in np.argsort(-before.failure_rate)[:2]]
    params = [p.detach().clone() for p in model.parameters()]
    tuned = restructure(model, images[:600], labels[:600], chosen, SMALL_GRID,
                        config=RestructureConfig(epochs=3, batch_size=32), seed=0)
    assert tuned is not model
    assert all(torch.equal(p, q) for p, q in zip(params, model.parameters(), strict=True))
    after = evaluate_landscape(tuned, pool, pool_labels, SMALL_GRID)
    assert after.failure_rate[chosen].mean() < before.failure_rate[chosen].mean() - 0.1
