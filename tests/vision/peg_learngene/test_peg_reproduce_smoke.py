"""A tiny-scale run of the reproduction's job (every method, two sizes) and the training helpers."""

from __future__ import annotations

import pytest
import torch

from icml24.common.experiment import Job, JobResult
from icml24.vision.peg_learngene import TrainConfig, accuracy, digits_split, train_classifier
from icml24.vision.peg_learngene.reproduce import REPRODUCTION, analyze, run_seed


def test_digits_split_is_the_notes_split():
    d = digits_split(3, shots=20)
    assert set(d["y_ancestry"].tolist()) == set(range(5)) and set(d["y_train"].tolist()) == set(range(5))
    assert torch.bincount(d["y_train"]).tolist() == [20] * 5
    assert len(d["x_train"]) + len(d["x_test"]) == 1797 - len(d["x_ancestry"]) - len(d["x_ancestry_test"])
    assert d["x_train"].shape[1:] == (1, 8, 8) and float(d["x_train"].max()) <= 1.0
    again = digits_split(3, shots=20)
    assert torch.equal(d["x_test"], again["x_test"])


def test_training_learns_above_chance_and_records_a_curve():
    d = digits_split(0, shots=20)
    from icml24.vision.tiny_vit import TinyViT

    torch.manual_seed(0)
    m = TinyViT(image_size=8, patch_size=2, num_classes=5, dim=16, depth=1, num_heads=2, mlp_dim=16, dropout=0.0)
    before = accuracy(m, d["x_ancestry_test"], d["y_ancestry_test"])
    curve = train_classifier(m, d["x_ancestry"], d["y_ancestry"], config=TrainConfig(epochs=4, lr=3e-3),
                             x_test=d["x_ancestry_test"], y_test=d["y_ancestry_test"],
                             generator=torch.Generator().manual_seed(0))  # fmt: skip
    assert len(curve) == 4 and curve[-1] > max(0.4, before + 0.1)  # chance is 0.2


def test_tiny_run_has_every_metric_and_analyzes():
    cfg = {"ancestry_epochs": 1, "epochs": 2, "sizes": [[2, 3], [4, 6]], "eval_subset": 50,
           "methods": ["random", "peg", "direct", "peg_uniform", "tleg"],
           "extra": ["ancestry", "peg_random_maps", "peg_released"]}  # fmt: skip
    m = run_seed(cfg, 0)
    assert 0.0 <= m["ancestry_acc"] <= 1.0
    for method in cfg["methods"]:
        for size in ("2x3", "4x6"):
            assert 0.0 <= m[f"{size}/{method}/acc"] <= 1.0
            assert len(m[f"{size}/{method}/curve"]) == 2
    for method in cfg["extra"]:
        assert f"4x6/{method}/acc" in m and f"2x3/{method}/acc" not in m
    job = Job("peg-learngene", "descendants", "icml24.vision.peg_learngene.reproduce:run_seed", cfg, 0)
    a = analyze([JobResult(job, "ok", m)], "smoke")
    assert a.verdict == "inconclusive"  # one seed decides nothing
    assert len(a.tables) == 5


@pytest.mark.parametrize("scale", ["smoke", "quick", "full"])
def test_jobs_per_scale(scale):
    jobs = REPRODUCTION.jobs(scale)
    assert len(jobs) == {"smoke": 1, "quick": 4, "full": 6}[scale]
    assert all(j.experiment == "descendants" for j in jobs)
