"""SyflowSubgroupDiscovery is a scikit-learn estimator: every estimator check of scikit-learn passes.

No check is expected to fail (no exceptions are listed). The fit under the checks is tiny (3 + 6 epochs, one
subgroup) so that the suite stays fast; ``check_array_api_input`` skips itself when array_api_strict is absent.
"""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.utils.estimator_checks import parametrize_with_checks

from icml24.subgroups.syflow import Rule, SyflowSubgroupDiscovery, make_planted_subgroup


@parametrize_with_checks([SyflowSubgroupDiscovery(1, pop_epochs=3, epochs=6)])
def test_sklearn_estimator_check(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check(estimator)


def test_fit_predict_rules_and_feature_names():
    import pandas as pd

    d = make_planted_subgroup(1500, 4, 1, "normal", seed=0)
    X = pd.DataFrame(d.X, columns=["a", "b", "c", "e"])
    est = SyflowSubgroupDiscovery(2, pop_epochs=150, epochs=300).fit(X, d.y)
    assert len(est.rules_) == 2 and all(isinstance(r, Rule) for r in est.rules_)
    member = est.predict(X)
    assert member.shape == (1500, 2) and member.dtype == bool
    soft = est.decision_function(X)
    assert soft.shape == (1500, 2) and ((soft >= 0) & (soft <= 1)).all()
    best = max(range(2), key=lambda k: (member[:, k] & d.members).sum() / max(1, (member[:, k] | d.members).sum()))
    names = {c.name for c in est.rules_[best].conditions}
    # The planted feature is in the best rule; an extra loose condition on a noise column depends on the float
    # kernels (AVX-512 machines found {e} alone, AVX2 finds "c > 0.14 AND 0.25 < e < 0.31"), so it is not asserted.
    assert ["a", "b", "c", "e"][d.features[0]] in names, str(est.rules_[best])
    jaccard = (member[:, best] & d.members).sum() / max(1, (member[:, best] | d.members).sum())
    # 0.44 under AVX2 (the extra condition cuts the subgroup): float32 recovery is kernel-fragile; branch graphs38
    # makes float64 the default, as the official code does. Far above a rule unrelated to the planted feature.
    assert jaccard > 0.35, (jaccard, str(est.rules_[best]))
    np.testing.assert_array_equal(member[:, best], est.rules_[best].covers(d.X))
