"""Complex saliency maps and masks are refused with a TypeError (issue 33), not cast with a ComplexWarning."""

from __future__ import annotations

import numpy as np
import pytest

from icml24.vision.size_invariant_sod.metrics import mae, si_mae


def test_mae_refuses_complex_pred_and_gt():
    p = np.random.default_rng(0).random((2, 8, 8))
    g = np.zeros((2, 8, 8))
    g[:, 2:4, 2:4] = 1
    assert np.array_equal(mae(p, g), np.abs(p - g).mean(axis=(1, 2)))
    with pytest.raises(TypeError, match="pred must hold real numbers, got complex"):
        mae(p + 0j, g)
    with pytest.raises(TypeError, match="gt must hold real numbers, got complex"):
        mae(p, g + 0j)
    with pytest.raises(TypeError, match="pred"):
        si_mae(p.astype(np.complex64), g)
