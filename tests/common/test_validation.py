"""The shared argument checks of :mod:`icml24.common.validation`."""

from __future__ import annotations

import doctest
import math
from fractions import Fraction

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from icml24.common import validation
from icml24.common.validation import finite_real_array, integer, positive_int, probability, real, real_array


def test_docstring_examples():
    assert doctest.testmod(validation, raise_on_error=False).failed == 0


@pytest.mark.parametrize("value", [1, 7, np.int64(3), np.uint8(2), np.int32(1)])
def test_positive_int_accepts_python_and_numpy_integers(value):
    out = positive_int(value, "steps")
    assert out == int(value) and type(out) is int


@pytest.mark.parametrize("value", [True, False, 2.0, 2.5, "3", None, 1 + 0j, np.float64(2.0), np.bool_(True)])
def test_positive_int_refuses_other_kinds_with_a_type_error(value):
    with pytest.raises(TypeError, match=r"steps must be an int >= 1, got "):
        positive_int(value, "steps")


@pytest.mark.parametrize("value", [0, -1, np.int64(-5)])
def test_positive_int_refuses_values_below_one(value):
    with pytest.raises(ValueError, match=rf"batch_size must be an int >= 1, got {int(value)}"):
        positive_int(value, "batch_size")


@settings(max_examples=100, deadline=None, derandomize=True)
@given(st.integers(min_value=-(10**6), max_value=10**6), st.integers(min_value=-3, max_value=3))
def test_integer_accepts_exactly_the_values_at_or_above_low(value, low):
    if value >= low:
        assert integer(value, "n", low=low) == value
        assert integer(np.int64(value), "n", low=low) == value
    else:
        with pytest.raises(ValueError, match=f"n must be an int >= {low}"):
            integer(value, "n", low=low)


def test_integer_without_low_takes_any_int():
    assert integer(-4, "offset") == -4
    with pytest.raises(TypeError, match="offset must be an int, got float"):
        integer(-4.0, "offset")


@pytest.mark.parametrize("value", [0.5, 1, np.float32(0.25), np.int64(2), Fraction(1, 2)])
def test_real_accepts_real_numbers(value):
    out = real(value, "lr")
    assert out == float(value) and type(out) is float


@pytest.mark.parametrize("value", [True, "1.0", None, 1j, np.complex128(1.0), torch.tensor(1.0)])
def test_real_refuses_non_reals(value):
    with pytest.raises(TypeError, match="lr must be a real number"):
        real(value, "lr")


def test_real_ranges_and_finiteness():
    assert real(0.0, "w", low=0.0) == 0.0
    with pytest.raises(ValueError, match="w must be > 0"):
        real(0.0, "w", low=0.0, low_open=True)
    with pytest.raises(ValueError, match="w must be <= 1"):
        real(1.5, "w", high=1)
    with pytest.raises(ValueError, match="w must be < 1"):
        real(1.0, "w", high=1, high_open=True)
    for bad in (math.nan, math.inf, -math.inf):
        with pytest.raises(ValueError, match="w must be finite"):
            real(bad, "w")


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.floats(allow_nan=True, allow_infinity=True), st.booleans())
def test_probability_accepts_exactly_the_unit_interval(value, open_interval):
    inside = 0 < value < 1 if open_interval else 0 <= value <= 1
    if inside:
        assert probability(value, "alpha", open_interval=open_interval) == value
    else:
        with pytest.raises(ValueError, match=r"alpha must lie in [\[(]0, 1[\])]"):
            probability(value, "alpha", open_interval=open_interval)


def test_probability_refuses_bool_and_complex():
    with pytest.raises(TypeError, match="alpha"):
        probability(True, "alpha")
    with pytest.raises(TypeError, match="complex"):
        probability(0.5 + 0j, "alpha")


def test_real_array_converts_to_float64_and_checks_ndim():
    out = real_array(np.arange(3, dtype=np.int32), "scores", ndim=1)
    assert out.dtype == np.float64 and out.tolist() == [0.0, 1.0, 2.0]
    assert np.isinf(real_array([1.0, math.inf], "scores")).any()  # infinities pass: no finiteness demanded
    assert real_array(torch.tensor([0.5, 1.5]), "scores").tolist() == [0.5, 1.5]
    assert real_array(np.array([1.0, 2.0], dtype=object), "scores").tolist() == [1.0, 2.0]
    with pytest.raises(ValueError, match=r"scores must be 1-D, got shape \(1, 3\)"):
        real_array(np.zeros((1, 3)), "scores", ndim=1)


@pytest.mark.parametrize(
    "x",
    [
        np.array([1.0 + 0j, 2.0]),
        np.array([1.0, 2.0], dtype=np.complex64),
        [1.0, 2j],
        np.array([1.0, 2j], dtype=object),
        torch.tensor([1.0 + 1j]),
    ],
)
def test_real_array_refuses_complex_input(x):
    with pytest.raises(TypeError, match="scores must hold real numbers, got complex"):
        real_array(x, "scores")


@pytest.mark.parametrize("x", [["1.0", "2.0"], np.array(["a"]), np.array([object()], dtype=object)])
def test_real_array_refuses_strings_and_objects(x):
    with pytest.raises(TypeError, match="scores must hold real numbers"):
        real_array(x, "scores")


@settings(max_examples=100, deadline=None, derandomize=True)
@given(st.lists(st.floats(allow_nan=True, allow_infinity=True, width=64), min_size=1, max_size=20))
def test_finite_real_array_refuses_exactly_the_non_finite(values):
    if all(math.isfinite(v) for v in values):
        out = finite_real_array(values, "x", ndim=1)
        assert np.array_equal(out, np.asarray(values, dtype=np.float64))
    else:
        with pytest.raises(ValueError, match="x must be finite"):
            finite_real_array(values, "x", ndim=1)


def test_finite_real_array_refuses_complex_before_finiteness():
    with pytest.raises(TypeError, match="complex"):
        finite_real_array(np.array([math.nan + 1j]), "x")
