"""The F-measure and AUC reject a non-positive beta^2 and a negative or non-finite smoothing."""

from __future__ import annotations

import numpy as np
import pytest

from icml24.vision.size_invariant_sod.metrics import auc, f_measure, si_auc, si_f_measure


def test_f_and_auc_reject_bad_beta2_and_smoothing():
    p = np.random.default_rng(0).random((8, 8))
    g = np.zeros((8, 8))
    g[2:4, 2:4] = 1
    for fn in (f_measure, si_f_measure):
        with pytest.raises(ValueError, match="beta2"):
            fn(p, g, beta2=-1.0)
        with pytest.raises(ValueError, match="smoothing"):
            fn(p, g, smoothing=-1.0)
    for fn in (auc, si_auc):
        with pytest.raises(ValueError, match="smoothing"):
            fn(p, g, smoothing=float("nan"))
