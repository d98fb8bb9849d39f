"""The backward-error-analysis lens of the paper (Barrett & Dherin, ICLR 2021, Theorem 3.1), on a quadratic.

One gradient-descent step of size h follows the gradient flow of the modified loss
``L + (h/4) |grad L|^2`` for time h up to O(h^3), but that of ``L`` itself only up to O(h^2): halving h
divides the first error by about 8 and the second by about 4.
"""

import numpy as np
from scipy.linalg import expm


def _errors(h: float) -> tuple[float, float]:
    rng = np.random.default_rng(0)
    q = rng.standard_normal((4, 4))
    a = q @ q.T + np.eye(4)  # L(theta) = theta' A theta / 2, grad L = A theta
    theta = rng.standard_normal(4)
    gd = theta - h * a @ theta
    plain_flow = expm(-h * a) @ theta
    # grad of L + (h/4)|A theta|^2 is (A + (h/2) A^2) theta
    modified_flow = expm(-h * (a + 0.5 * h * a @ a)) @ theta
    return float(np.linalg.norm(gd - plain_flow)), float(np.linalg.norm(gd - modified_flow))


def test_gradient_descent_follows_the_modified_flow_to_third_order():
    (p1, m1), (p2, m2) = _errors(1e-2), _errors(5e-3)
    assert m1 < p1 / 10  # much closer to the modified flow
    assert 3.5 < p1 / p2 < 4.5  # plain flow: error ~ h^2
    assert 7.0 < m1 / m2 < 9.0  # modified flow: error ~ h^3
