"""Invariants of the size-invariant SOD metrics (Li et al., ICML 2024), against closed forms, a per-object
Python loop, scikit-learn and pysodmetrics."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from icml24.vision.size_invariant_sod import (
    auc,
    decode_frames_bitmask,
    encode_frames_bitmask,
    evaluate,
    f_measure,
    frame_mae_terms,
    mae,
    make_multi_object_saliency,
    object_frames,
    si_auc,
    si_f_measure,
    si_mae,
)


def _scene(seed: int = 0, n: int = 6, size: int = 40):
    data = make_multi_object_saliency(n, size, radius_range=(2.0, 12.0), seed=seed)
    rng = np.random.default_rng(seed + 100)
    pred = np.clip(0.7 * data.masks + rng.uniform(0, 0.4, size=data.masks.shape), 0, 1)
    return pred, data.masks


# --------------------------------------------------------------------------- naive per-object oracle


def _naive_boxes(g: np.ndarray) -> list[tuple[int, int, int, int]]:
    from scipy import ndimage

    lab, n = ndimage.label(g > 0.5)
    out = []
    for k in range(1, n + 1):
        ys, xs = np.nonzero(lab == k)
        out.append((ys.min(), ys.max() + 1, xs.min(), xs.max() + 1))
    return out


def _naive_si_mae(p: np.ndarray, g: np.ndarray) -> float:
    boxes = _naive_boxes(g)
    if not boxes:
        return float(np.abs(p - g).mean())
    covered = np.zeros(g.shape, bool)
    terms = []
    for y0, y1, x0, x1 in boxes:
        terms.append(np.abs(p[y0:y1, x0:x1] - g[y0:y1, x0:x1]).mean())
        covered[y0:y1, x0:x1] = True
    bg = ~covered
    alpha = bg.sum() / (g.size - bg.sum())
    mae0 = np.abs(p[bg] - g[bg]).mean() if bg.any() else 0.0
    return float((sum(terms) + alpha * mae0) / (len(boxes) + alpha))


def _naive_f(p: np.ndarray, g: np.ndarray, num: int = 100, s: float = 1.0) -> np.ndarray:
    t = np.arange(num) / (num - 1)
    f = []
    for th in t:
        y = p >= th
        tp = (y & g).sum()
        pr, rc = tp / (y.sum() + s), tp / (g.sum() + s)
        f.append(0.0 if pr + rc == 0 else 1.3 * pr * rc / (0.3 * pr + rc))
    return np.array(f)


def _naive_si_f(p: np.ndarray, g: np.ndarray) -> float:
    pn = (p - p.min() + 1e-20) / (p.max() - p.min() + 1e-20)
    pn = np.clip(pn, 0, 1)
    return float(np.mean([_naive_f(pn[a:b, c:d], g[a:b, c:d]).mean() for a, b, c, d in _naive_boxes(g)]))


# -------------------------------------------------------------------------------------------- tests


def test_batched_equals_naive_per_object_loop():
    pred, gt = _scene()
    got_mae = si_mae(pred, gt)
    got_f = si_f_measure(pred, gt)
    for i in range(len(pred)):
        assert got_mae[i] == pytest.approx(_naive_si_mae(pred[i], gt[i]), abs=1e-12)
        assert got_f[i] == pytest.approx(_naive_si_f(pred[i], gt[i]), abs=1e-12)
        assert si_mae(pred[i], gt[i]) == pytest.approx(got_mae[i], abs=1e-15)
        assert si_auc(pred[i], gt[i]) == pytest.approx(si_auc(pred, gt)[i], abs=1e-15)


def test_torch_and_numpy_inputs_agree():
    pred, gt = _scene(1)
    for fn in (mae, si_mae, f_measure, si_f_measure, auc, si_auc):
        np.testing.assert_allclose(fn(torch.from_numpy(pred), torch.from_numpy(gt)), fn(pred, gt), atol=1e-12)


def _cross_filling_image(h: int = 24, w: int = 30) -> np.ndarray:
    """One connected object whose bounding box is the whole image (a plus touching all four edges)."""
    g = np.zeros((h, w), bool)
    g[h // 2 - 2 : h // 2 + 2, :] = True
    g[:, w // 2 - 2 : w // 2 + 2] = True
    return g


@pytest.mark.parametrize("normalization", ["paper", "code"])
def test_one_object_filling_the_image_equals_standard_metric(normalization):
    g = _cross_filling_image()
    rng = np.random.default_rng(3)
    p = rng.random(g.shape)
    fr = object_frames(g)
    assert fr.n_objects.tolist() == [1] and fr.boxes[0, 1:].tolist() == [0, 24, 0, 30]
    assert si_mae(p, g, normalization=normalization) == pytest.approx(mae(p, g), abs=1e-14)
    assert si_f_measure(p, g) == pytest.approx(f_measure(p, g), abs=1e-14)
    assert si_f_measure(p, g, aggregate="max") == pytest.approx(f_measure(p, g, aggregate="max"), abs=1e-14)
    assert si_auc(p, g) == pytest.approx(auc(p, g), abs=1e-14)


def test_decomposition_identity_mae_is_size_weighted_average_of_frames():
    # Disjoint boxes: MAE = sum_k |F_k|/HW MAE_k + |F_0|/HW MAE_0 exactly (the paper's decomposition).
    g = np.zeros((32, 32))
    g[2:10, 3:9] = 1
    g[20:23, 25:31] = 1
    g[14, 14] = 1
    p = np.random.default_rng(0).random(g.shape)
    t = frame_mae_terms(p, g)
    fr = t["frames"]
    area = fr.box_areas
    bg = 32 * 32 - area.sum()
    recon = (area * t["mae_k"]).sum() / 1024 + bg / 1024 * t["mae_0"][0]
    assert recon == pytest.approx(mae(p, g), abs=1e-12)
    assert t["alpha"][0] == pytest.approx(bg / area.sum())


def test_size_invariance_si_mae_unchanged_when_an_object_is_upscaled():
    """Stack two fully salient crops separated by background rows with zero error; duplicating the rows of
    the second crop (nearest-neighbour 2x along y) keeps every frame's error distribution and alpha
    (background grown in proportion), so SI-MAE is unchanged while MAE moves."""
    rng = np.random.default_rng(7)
    w = 6
    p1, p2 = rng.random((4, w)), rng.random((4, w))

    def build(p2_crop: np.ndarray, bg_rows: int) -> tuple[np.ndarray, np.ndarray]:
        parts_p = [p1, np.zeros((1, w)), p2_crop, np.zeros((bg_rows - 1, w))]
        parts_g = [np.ones((4, w)), np.zeros((1, w)), np.ones(p2_crop.shape), np.zeros((bg_rows - 1, w))]
        return np.concatenate(parts_p), np.concatenate(parts_g)

    pa, ga = build(p2, bg_rows=8)  # object area 48, background 48: alpha = 1
    pb, gb = build(np.repeat(p2, 2, axis=0), bg_rows=12)  # object area 72, background 72: alpha = 1
    assert object_frames(ga).n_objects[0] == 2 and object_frames(gb).n_objects[0] == 2
    assert si_mae(pa, ga) == pytest.approx(si_mae(pb, gb), abs=1e-14)
    assert abs(mae(pa, ga) - mae(pb, gb)) > 1e-3


@settings(max_examples=25, deadline=None, derandomize=True)
@given(seed=st.integers(0, 10_000), op=st.sampled_from(["T", "flipud", "fliplr", "rot90"]))
def test_order_invariance_under_relabelling_transforms(seed, op):
    # Transposes and flips reorder the objects (labels follow raster order) but keep every frame.
    pred, gt = _scene(seed, n=2, size=32)
    f = {"T": lambda a: a.transpose(0, 2, 1), "flipud": lambda a: a[:, ::-1], "fliplr": lambda a: a[:, :, ::-1],
         "rot90": lambda a: np.rot90(a, axes=(1, 2))}[op]  # fmt: skip
    for fn in (si_mae, si_f_measure, si_auc):
        np.testing.assert_allclose(fn(f(pred).copy(), f(gt).copy()), fn(pred, gt), atol=1e-12)


def test_batch_permutation_permutes_results():
    pred, gt = _scene(4)
    perm = np.random.default_rng(0).permutation(len(pred))
    np.testing.assert_allclose(si_mae(pred[perm], gt[perm]), si_mae(pred, gt)[perm], atol=1e-15)


def test_perfect_prediction():
    _, gt = _scene(5)
    p = gt.astype(float)
    assert np.all(si_mae(p, gt) == 0)
    assert np.allclose(si_auc(p, gt, smoothing=0.0), 1.0)
    assert np.allclose(si_f_measure(p, gt, aggregate="max", smoothing=0.0), 1.0)
    # With the official +1 smoothing a frame with G positives scores at most G/(G+1): objects here have
    # >= 12 pixels, so SI-F max >= 12/13.
    assert np.all(si_f_measure(p, gt, aggregate="max") >= 12 / 13 - 1e-12)


def test_empty_ground_truth_falls_back_to_standard_metric():
    rng = np.random.default_rng(0)
    p = rng.random((3, 20, 20))
    g = np.zeros_like(p)
    np.testing.assert_allclose(si_mae(p, g), mae(p, g))
    np.testing.assert_allclose(si_f_measure(p, g), f_measure(p, g))
    assert not np.isnan(si_mae(p, g)).any() and not np.isnan(si_f_measure(p, g)).any()
    # ROC-AUC of a single-class image is undefined: both give NaN, and evaluate() skips it.
    assert np.isnan(si_auc(p, g)).all() and np.isnan(auc(p, g)).all()
    assert not np.isnan(evaluate(p, g)["mae"])


def test_components_below_min_area_are_ignored_and_largest_kept_as_fallback():
    g = np.zeros((20, 20))
    g[2:9, 2:9] = 1  # 49 px
    g[15, 15] = 1  # 1 px
    assert object_frames(g, min_area=10).n_objects.tolist() == [1]
    assert object_frames(g, min_area=0).n_objects.tolist() == [2]
    fr = object_frames(g, min_area=100)  # nothing survives: keep the largest (pysodmetrics' rule)
    assert fr.n_objects.tolist() == [1] and fr.areas.tolist() == [49]
    assert object_frames(g, min_area=100, keep_largest=False).n_objects.tolist() == [0]


def test_bitmask_round_trip_with_overlapping_boxes():
    g = np.zeros((2, 24, 24))
    g[0, 2:12, 2] = 1
    g[0, 11, 2:12] = 1  # an L whose box contains the next object
    g[0, 5:7, 6:8] = 1
    g[1, 20:23, 1:4] = 1
    fr = object_frames(g)
    weight = encode_frames_bitmask(fr)
    decoded = decode_frames_bitmask(weight)
    for i in range(2):
        want = [tuple(int(v) for v in b[1:]) for b in fr.boxes if b[0] == i]
        assert sorted(decoded[i]) == sorted(want)
    assert fr.n_objects.tolist() == [2, 1]
    assert (fr.coverage() > 1).any()  # the boxes do overlap


def test_auc_matches_sklearn():
    from sklearn.metrics import roc_auc_score

    rng = np.random.default_rng(0)
    g = rng.random((64, 64)) < 0.3
    # On the threshold grid and without smoothing the trapezoid AUC is exactly the ROC-AUC.
    p_grid = np.clip(np.round((0.3 * g + rng.random(g.shape) * 0.7) * 99) / 99, 0, 1)
    assert auc(p_grid, g, smoothing=0.0) == pytest.approx(roc_auc_score(g.ravel(), p_grid.ravel()), abs=1e-12)
    # Continuous scores, 100 thresholds, +1 smoothing: within 0.01 (the discretisation gap).
    p = np.clip(0.3 * g + rng.random(g.shape) * 0.7, 0, 1)
    assert auc(p, g) == pytest.approx(roc_auc_score(g.ravel(), p.ravel()), abs=0.01)


def test_per_frame_auc_matches_sklearn_inside_each_box():
    from sklearn.metrics import roc_auc_score

    pred, gt = _scene(2, n=1, size=48)
    p, g = np.round(pred[0] * 99) / 99, gt[0]
    want = [
        roc_auc_score(g[a:b, c:d].ravel(), p[a:b, c:d].ravel())
        for a, b, c, d in _naive_boxes(g)
        if 0 < g[a:b, c:d].mean() < 1
    ]
    assert si_auc(p, g, smoothing=0.0) == pytest.approx(np.mean(want), abs=1e-12)


def _uint8_pair(seed: int):
    pred, gt = _scene(seed, n=1, size=48)
    return (pred[0] * 255).astype(np.uint8), (gt[0] * 255).astype(np.uint8)


def _pysod_normalise(pu: np.ndarray) -> np.ndarray:
    p = pu / 255
    return (p - p.min()) / (p.max() - p.min())


def test_standard_mae_and_f_curve_match_pysodmetrics():
    sod = pytest.importorskip("py_sod_metrics")
    pu, gu = _uint8_pair(0)
    m = sod.MAE()
    m.step(pu, gu)
    pn = _pysod_normalise(pu)
    assert mae(pn, gu > 128) == pytest.approx(float(m.get_results()["mae"]), abs=1e-12)
    f = sod.FmeasureV2(metric_handlers={"fm": sod.FmeasureHandler(with_dynamic=True, with_adaptive=False, beta=0.3)})
    f.step(pu, gu)
    curve = np.asarray(f.get_results()["fm"]["dynamic"]).ravel()
    ours = f_measure(np.floor(pn * 255) / 255, gu > 128, aggregate="curve", num_thresholds=256, smoothing=0.0,
                     normalize=False)  # fmt: skip
    np.testing.assert_allclose(np.sort(ours), np.sort(curve), atol=1e-10)
    assert ours.mean() == pytest.approx(curve.mean(), abs=1e-10)


def test_si_mae_matches_pysodmetrics():
    sod = pytest.importorskip("py_sod_metrics")
    for seed in range(3):
        pu, gu = _uint8_pair(seed)
        m = sod.SizeInvarianceMAE()
        m.step(pu, gu)
        ours = si_mae(_pysod_normalise(pu), gu > 128, min_area=50)
        assert ours == pytest.approx(float(m.get_results()["si_mae"]), abs=1e-12)


def test_code_normalisation_divides_by_k_plus_one_plus_alpha():
    pred, gt = _scene(3, n=1)
    t = frame_mae_terms(pred, gt)
    k, a = t["frames"].n_objects[0], t["alpha"][0]
    num = t["mae_k"].sum() + a * t["mae_0"][0]
    assert si_mae(pred, gt, normalization="code")[0] == pytest.approx(num / (k + 1 + a), abs=1e-14)
    assert si_mae(pred, gt)[0] == pytest.approx(num / (k + a), abs=1e-14)


def test_mae_misses_small_objects_but_si_mae_does_not():
    # The paper's motivating example: a 96x96 image, one disk of radius 20 and two of radius 3 and 2.
    yy, xx = np.mgrid[:96, :96]
    big = (yy - 40) ** 2 + (xx - 40) ** 2 <= 400
    g = big | ((yy - 80) ** 2 + (xx - 15) ** 2 <= 9) | ((yy - 15) ** 2 + (xx - 85) ** 2 <= 4)
    a = big.astype(float)  # perfect on the big disk, misses both small ones
    b = np.clip(0.9 * g + 0.05, 0, 1)  # finds all, soft everywhere
    assert mae(a, g) < mae(b, g)
    assert si_mae(a, g) > si_mae(b, g)


@pytest.mark.parametrize(
    ("pred", "gt", "exc", "match"),
    [
        (np.zeros((4, 4)), np.zeros((4, 5)), ValueError, "same shape"),
        (np.zeros(4), np.zeros(4), ValueError, r"\(H, W\)"),
        (np.zeros((0, 4)), np.zeros((0, 4)), ValueError, "non-empty"),
        (np.full((4, 4), np.nan), np.zeros((4, 4)), ValueError, "non-finite"),
        (np.full((4, 4), 1.5), np.zeros((4, 4)), ValueError, r"\[0, 1\]"),
        (np.full((4, 4), -0.1), np.zeros((4, 4)), ValueError, r"\[0, 1\]"),
        (np.zeros((4, 4)), np.full((4, 4), 2.0), ValueError, "binary"),
        (np.zeros((4, 4), bool), np.zeros((4, 4)), TypeError, "real-valued"),
        ("abc", np.zeros((4, 4)), TypeError, "numpy array or torch tensor"),
    ],
)
def test_bad_input_raises(pred, gt, exc, match):
    for fn in (mae, si_mae, si_f_measure, si_auc):
        with pytest.raises(exc, match=match):
            fn(pred, gt)


def test_bad_options_raise():
    p, g = np.zeros((4, 4)), np.zeros((4, 4))
    with pytest.raises(ValueError, match="normalization"):
        si_mae(p, g, normalization="nope")
    with pytest.raises(ValueError, match="aggregate"):
        si_f_measure(p, g, aggregate="median")
    with pytest.raises(ValueError, match="num_thresholds"):
        auc(p, g, num_thresholds=1)
    with pytest.raises(ValueError, match="connectivity"):
        object_frames(g, connectivity=6)
    with pytest.raises(ValueError, match="frames were built"):
        si_mae(np.zeros((2, 4, 4)), np.zeros((2, 4, 4)), object_frames(np.zeros((3, 4, 4))))


def test_box_pixels_enumerates_each_box_in_order():
    from icml24.vision.size_invariant_sod.frames import box_pixels

    shape = (2, 7, 9)
    boxes = np.array([[0, 1, 4, 2, 5], [1, 0, 7, 0, 9], [0, 3, 4, 8, 9], [1, 2, 2, 3, 5]])  # last one empty
    idx = np.arange(np.prod(shape)).reshape(shape)
    want = np.concatenate([idx[i, a:b, c:d].ravel() for i, a, b, c, d in boxes])
    np.testing.assert_array_equal(box_pixels(boxes, shape), want)
