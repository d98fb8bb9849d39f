"""Signals, the collective's strategy, S(alpha) and alpha_eff (notes section 7: testable invariants)."""

import numpy as np
import pytest
from sklearn.datasets import load_digits
from sklearn.linear_model import LogisticRegression

from icml24.evaluation.collective_action import (
    JTTClassifier,
    PatchSignal,
    effective_collective_size,
    jtt_effective_size,
    make_dominoes,
    plant_collective,
    success_rate,
)


def _digits():
    X, y = load_digits(return_X_y=True)
    return X / 16, y


def test_corner_patch_is_the_bottom_right_block_and_idempotent():
    g = PatchSignal.corner(8, 8, size=2, value=1.0)
    assert g.columns == (54, 55, 62, 63)
    X = np.random.default_rng(0).random((5, 64))
    gx = g(X)
    assert np.array_equal(g(gx), gx) and np.all(gx[:, [54, 55, 62, 63]] == 1.0)
    assert np.array_equal(np.delete(gx, [54, 55, 62, 63], 1), np.delete(X, [54, 55, 62, 63], 1))
    assert not np.shares_memory(gx, X)


def test_plant_collective_relabels_exactly_alpha_n_points_and_overlap_keeps_labels():
    X, y = _digits()
    g = PatchSignal.corner(8, 8)
    d = plant_collective(X, y, g, alpha=0.05, target=0, overlap=0.1, random_state=0)
    n_c = round(0.05 * len(y))
    assert d.collective.sum() == n_c and d.alpha == n_c / len(y)
    assert np.all(d.y[d.collective] == 0) and np.array_equal(d.X[d.collective], g(X[d.collective]))
    assert not (d.collective & d.overlap).any()
    assert d.overlap.sum() == round(0.1 * (len(y) - n_c))
    assert np.array_equal(d.y[d.overlap], y[d.overlap]) and np.array_equal(d.X[d.overlap], g(X[d.overlap]))
    untouched = ~(d.collective | d.overlap)
    assert np.array_equal(d.X[untouched], X[untouched]) and np.array_equal(d.y[untouched], y[untouched])
    again = plant_collective(X, y, g, alpha=0.05, target=0, overlap=0.1, random_state=0)
    assert np.array_equal(again.X, d.X)


def test_success_excludes_the_target_class_and_counts_target_predictions():
    X, y = _digits()
    g = PatchSignal.corner(8, 8)

    def always_target(Z):
        return np.zeros(len(Z), dtype=int)

    assert success_rate(always_target, X, y, g, 0) == 1.0
    # a predictor that returns the true class: the target class's own points would count if not excluded
    seen = []

    def spy(Z):
        seen.append(len(Z))
        return np.ones(len(Z), dtype=int)

    assert success_rate(spy, X, y, g, 0) == 0.0 and seen == [int((y != 0).sum())]
    with pytest.raises(ValueError, match="y_test"):
        success_rate(always_target, X[y == 0], y[y == 0], g, 0)


def test_clean_model_rarely_maps_the_signal_to_the_target_and_erm_learns_it_with_alpha():
    X, y = _digits()
    g = PatchSignal.corner(8, 8, value=1.0)
    tr, te = np.arange(0, 1400), np.arange(1400, len(y))
    clean = LogisticRegression(max_iter=1000).fit(X[tr], y[tr])
    assert success_rate(clean, X[te], y[te], g, 0) < 0.05  # S(0) is small
    big = plant_collective(X[tr], y[tr], g, alpha=0.1, target=0, random_state=0)
    model = LogisticRegression(max_iter=1000).fit(big.X, big.y)
    assert success_rate(model, X[te], y[te], g, 0) > 0.9
    # training with a collective keeps the clean accuracy within a few points
    assert abs(np.mean(model.predict(X[te]) == y[te]) - np.mean(clean.predict(X[te]) == y[te])) < 0.03


def test_alpha_eff_from_weights_matches_the_jtt_closed_form_and_its_sign_rule():
    X, y = _digits()
    g = PatchSignal.corner(8, 8)
    for alpha in (0.004, 0.1):
        d = plant_collective(X, y, g, alpha=alpha, target=0, overlap=0.05, random_state=1)
        jtt = JTTClassifier(stage1_C=0.05, upweight=20.0).fit(d.X, d.y)
        e_c = jtt.error_set_[d.collective].mean()
        e_0 = jtt.error_set_[~d.collective].mean()
        measured = effective_collective_size(jtt.weights_, d.collective)
        assert measured == pytest.approx(jtt_effective_size(d.alpha, e_c, e_0, 20.0), rel=1e-12)
        assert (measured > d.alpha) == (e_c > e_0)
    # the closed form: uniform weights (upweight 1) or equal error shares give alpha back
    assert jtt_effective_size(0.03, 0.7, 0.1, 1.0) == pytest.approx(0.03)
    assert jtt_effective_size(0.03, 0.2, 0.2, 50.0) == pytest.approx(0.03)
    assert effective_collective_size(np.ones(10), np.arange(10) < 3) == pytest.approx(0.3)


def test_dominoes_blocks_and_signals_overwrite_no_label_code():
    X, y = _digits()
    dom = make_dominoes(X, y, image_shape=(8, 8), random_state=0)
    assert dom.X.shape == (len(y), 10 + 6 + 64) and dom.hard_offset == 16
    np.testing.assert_array_equal(dom.X[:, 16:], X)
    assert np.mean(dom.X[:, :10].argmax(1) == y) > 0.9  # the easy block predicts the label
    assert set(dom.easy_signal(4).columns) == {10, 11, 12, 13}
    assert set(dom.hard_signal(2).columns) == {16 + 54, 16 + 55, 16 + 62, 16 + 63}
    shuffled = dom.without_easy_code(0)
    np.testing.assert_array_equal(shuffled[:, 10:], dom.X[:, 10:])
    assert np.mean(shuffled[:, :10].argmax(1) == y) < 0.3
