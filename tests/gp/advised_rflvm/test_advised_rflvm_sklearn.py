"""AdvisedRFLVM is a scikit-learn transformer: every estimator check of scikit-learn passes (issue 13).

No check is expected to fail. ``check_array_api_input`` skips itself when ``array_api_strict`` is absent.
``check_estimators_nan_inf`` is not run for NaN because the estimator declares ``allow_nan`` (NaN marks a
missing entry); inf is still rejected (tested in test_advised_rflvm_model.py).
"""

from __future__ import annotations

import warnings

from sklearn.utils.estimator_checks import parametrize_with_checks

from icml24.gp.advised_rflvm import AdvisedRFLVM

_SMALL = AdvisedRFLVM(n_iter=5, n_frequencies=3, n_eval_draws=2, transform_n_iter=10, random_state=0)


@parametrize_with_checks([_SMALL])
def test_sklearn_estimator_check(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check(estimator)
