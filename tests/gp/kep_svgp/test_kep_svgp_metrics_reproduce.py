"""Uncertainty metrics against hand-computed values and scikit-learn; the KEP-SVGP reproduction at smoke scale."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from icml24.common.experiment import execute_job
from icml24.gp.kep_svgp import metrics as M
from icml24.gp.kep_svgp.reproduce import REPRODUCTION, shift


def test_ece_and_aurc_by_hand():
    probs = np.array([[0.9, 0.1], [0.8, 0.2], [0.4, 0.6], [0.3, 0.7]])
    labels = np.array([0, 1, 1, 0])
    # Bins of width 1/15: confidences 0.9, 0.8, 0.6, 0.7 fall in separate bins; |acc - conf| = .1, .8, .4, .7.
    assert M.ece(probs, labels) == pytest.approx((0.1 + 0.8 + 0.4 + 0.7) / 4)
    # Sorted by confidence 0.9 (ok), 0.8 (wrong), 0.7 (wrong), 0.6 (ok): risks 0, 1/2, 2/3, 2/4.
    assert M.aurc(probs, labels) == pytest.approx((0 + 1 / 2 + 2 / 3 + 2 / 4) / 4)
    assert M.accuracy(probs, labels) == 0.5
    assert M.nll(probs, labels) == pytest.approx(-np.mean(np.log([0.9, 0.2, 0.6, 0.3])))
    assert M.brier(probs, labels) == pytest.approx(np.mean([0.02, 1.28, 0.32, 0.98]))


def test_auroc_matches_sklearn_with_ties():
    rng = np.random.default_rng(0)
    pos, neg = rng.integers(0, 5, 40).astype(float), rng.integers(0, 5, 30).astype(float) - 0.5
    ref = roc_auc_score(np.r_[np.ones(40), np.zeros(30)], np.r_[pos, neg])
    assert M.auroc(pos, neg) == pytest.approx(ref)
    probs = rng.dirichlet(np.ones(4), 50)
    labels = rng.integers(0, 4, 50)
    ok = probs.argmax(1) == labels
    assert M.failure_auroc(probs, labels) == pytest.approx(roc_auc_score(ok, probs.max(1)))


def test_metrics_bad_input():
    with pytest.raises(ValueError, match="2-D"):
        M.ece(np.ones(3), np.zeros(3))
    with pytest.raises(ValueError, match="labels"):
        M.nll(np.full((3, 2), 0.5), np.zeros(2))
    with pytest.raises(ValueError, match="finite"):
        M.aurc(np.array([[np.nan, 1.0]]), np.zeros(1))


def test_shifts_keep_shape_and_range():
    rng = np.random.default_rng(0)
    x = rng.random((5, 1, 8, 8)).astype(np.float32)
    for kind in ("clean", "noise", "rotate", "dropout"):
        out = shift(x, kind, rng)
        assert out.shape == x.shape and out.min() >= 0.0 and out.max() <= 1.0 + 1e-6
    with pytest.raises(ValueError, match="shift"):
        shift(x, "blur", rng)


def test_smoke_reproduction_runs_and_is_deterministic():
    jobs = REPRODUCTION.jobs("smoke")
    results = [execute_job(j) for j in jobs]
    assert [r.error for r in results if r.status != "ok"] == []
    again = execute_job(jobs[0])
    assert again.metrics == results[0].metrics
    analysis = REPRODUCTION.analyze(results, "smoke")
    assert analysis.verdict in ("supported", "not_supported", "inconclusive") and analysis.tables
    REPRODUCTION.analyze([], "smoke")
    for scale in ("quick", "full"):
        assert REPRODUCTION.jobs(scale)


def test_temperature_scaling_recovers_the_temperature_and_lowers_nll():
    from icml24.gp.kep_svgp.metrics import apply_temperature, fit_temperature, nll

    rng = np.random.default_rng(0)
    logits = 3.0 * rng.standard_normal((4000, 5))
    labels = np.array([rng.choice(5, p=np.exp(z) / np.exp(z).sum()) for z in logits])  # calibrated at T = 1
    over = np.exp(2.5 * logits) / np.exp(2.5 * logits).sum(1, keepdims=True)  # over-confident: logits x 2.5
    t = fit_temperature(over, labels)
    assert t == pytest.approx(2.5, rel=0.1)
    assert nll(apply_temperature(over, t), labels) < nll(over, labels)
    np.testing.assert_allclose(apply_temperature(over, 1.0), over, atol=1e-12)
    np.testing.assert_allclose(apply_temperature(over, 2.5).sum(1), 1.0)
    with pytest.raises(ValueError, match="temperature"):
        apply_temperature(over, 0.0)
    with pytest.raises(ValueError, match="labels"):
        fit_temperature(over, labels + 5)
