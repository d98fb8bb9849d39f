"""The concept grid and its batched perturbations: the index <-> level bijection, the identity cell, rotations
against torch.rot90, blur against a direct 2-D Gaussian convolution, brightness as a product, and the
row order of perturb_grid."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.nn import functional as F

from icml24.evaluation.failure_landscape import ConceptGrid, apply_concepts, perturb_grid

GRID = ConceptGrid()


def _images(n: int = 4, size: int = 16, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    x = torch.zeros(n, 1, size, size)
    x[:, :, 4:12, 4:12] = torch.rand(n, 1, 8, 8, generator=g)  # content away from the border
    return x


def test_index_levels_bijection_over_the_grid():
    idx = np.arange(GRID.n_cells)
    lv = GRID.levels(idx)
    assert GRID.n_cells == 125 and lv.shape == (125, 3)
    assert len({tuple(r) for r in lv}) == 125  # injective on 125 cells: a bijection onto the 5x5x5 grid
    np.testing.assert_array_equal(GRID.index(lv), idx)
    # mixed radix, last concept fastest (the official action_dict's order)
    assert tuple(GRID.levels(1)) == (0, 0, 1) and tuple(GRID.levels(5)) == (0, 1, 0) and tuple(GRID.levels(25)) == (1, 0, 0)


@settings(max_examples=60, derandomize=True, deadline=None)
@given(st.integers(1, 4), st.integers(1, 4), st.integers(1, 4), st.data())
def test_index_roundtrip_on_any_grid(nr, nb, nk, data):
    grid = ConceptGrid(rotations=tuple(float(5 * i) for i in range(nr)), blurs=tuple(0.5 * i for i in range(nb)),
                       brightness=tuple(1.0 - 0.1 * i for i in range(nk)))
    i = data.draw(st.integers(0, grid.n_cells - 1))
    assert grid.index(grid.levels(i)) == i
    v = grid.values(i)
    assert v[0] in grid.rotations and v[1] in grid.blurs and v[2] in grid.brightness
    c = grid.coordinates()
    assert c.shape == (grid.n_cells, 3) and c.min() >= 0 and c.max() <= 1


def test_identity_cell_leaves_images_unchanged():
    x = _images()
    cell = GRID.identity_cell
    assert cell is not None and tuple(GRID.values(cell)) == (0.0, 0.0, 1.0)
    out = apply_concepts(x, np.repeat(GRID.values(cell)[None], len(x), 0))
    torch.testing.assert_close(out, x)


@pytest.mark.parametrize("angle,k", [(90.0, 1), (-90.0, -1), (180.0, 2)])
def test_right_angle_rotation_is_rot90(angle, k):
    x = _images()
    out = apply_concepts(x, np.tile([angle, 0.0, 1.0], (len(x), 1)))
    torch.testing.assert_close(out, torch.rot90(x, k=k, dims=(2, 3)), atol=1e-5, rtol=0)


@pytest.mark.parametrize("angle", [8.0, 16.0, 30.0])
def test_rotation_commutes_with_a_mirror_as_the_opposite_rotation(angle):
    # flip o rot(a) = rot(-a) o flip: an exact symmetry of a rotation about the image centre
    x = _images()
    flip = lambda t: torch.flip(t, dims=(3,))  # noqa: E731
    a = apply_concepts(x, np.tile([angle, 0.0, 1.0], (len(x), 1)))
    b = apply_concepts(flip(x), np.tile([-angle, 0.0, 1.0], (len(x), 1)))
    torch.testing.assert_close(flip(a), b, atol=1e-5, rtol=0)
    # content away from the border keeps (almost) all its mass
    torch.testing.assert_close(a.sum((1, 2, 3)), x.sum((1, 2, 3)), atol=0.05 * float(x.sum((1, 2, 3)).min()), rtol=0)


def test_blur_matches_a_direct_2d_gaussian_convolution_and_keeps_mass():
    x = _images()
    sigma = 1.2
    out = apply_concepts(x, np.tile([0.0, sigma, 1.0], (len(x), 1)))
    r = int(np.ceil(3 * sigma))
    t = torch.arange(-r, r + 1, dtype=torch.float32)
    k2 = torch.exp(-(t[:, None] ** 2 + t[None, :] ** 2) / (2 * sigma**2))
    k2 = k2 / k2.sum()
    ref = F.conv2d(x, k2.view(1, 1, 2 * r + 1, 2 * r + 1), padding=r)
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=0)
    # content 4 px from the border, kernel radius 4: nothing leaves the image
    torch.testing.assert_close(out.sum((1, 2, 3)), x.sum((1, 2, 3)), atol=1e-4, rtol=0)


def test_brightness_is_a_clipped_product():
    x = _images()
    out = apply_concepts(x, np.tile([0.0, 0.0, 0.4], (len(x), 1)))
    torch.testing.assert_close(out, 0.4 * x)
    up = apply_concepts(x, np.tile([0.0, 0.0, 3.0], (len(x), 1)))
    torch.testing.assert_close(up, (3.0 * x).clamp(0, 1))


def test_perturb_grid_rows_are_image_major_and_match_apply_concepts():
    grid = ConceptGrid(rotations=(-10.0, 0.0, 20.0), blurs=(0.0, 1.0), brightness=(1.0, 0.5))
    x = _images(3)
    allp = perturb_grid(x, grid)
    assert allp.shape == (3 * grid.n_cells, 1, 16, 16)
    for i in range(3):
        for c in (0, 5, grid.n_cells - 1):
            one = apply_concepts(x[i : i + 1], grid.values(np.array([c])))
            torch.testing.assert_close(allp[i * grid.n_cells + c], one[0])


def test_bad_grids_and_inputs_are_refused():
    with pytest.raises(ValueError, match="blurs"):
        ConceptGrid(blurs=(0.0, -1.0))
    with pytest.raises(ValueError, match="rotations"):
        ConceptGrid(rotations=(0.0, 0.0))
    with pytest.raises(ValueError, match="index"):
        GRID.levels(125)
    with pytest.raises(ValueError, match="values"):
        apply_concepts(_images(2), np.zeros((3, 3)))
    with pytest.raises(ValueError, match="images"):
        apply_concepts(torch.zeros(2, 3, 4, 4), np.zeros((2, 3)))
