"""Table cells: mean and spread printed to the same decimal place, and ``results.json`` numbers at full
precision (recomputed from the values, not parsed back from the rounded text)."""

from __future__ import annotations

import math
import statistics

import pytest

from icml24.common.experiment import cell_to_json, fmt_mean_spread, fmt_mean_std, numeric_cell


@pytest.mark.parametrize(
    ("values", "text"),
    [
        # The examples: "0.001 ± 7.854e-04 (n=3)", "20 ± 0.000", "3.82e+03 ± 0.000" before.
        ([0.0005, 0.0012, 0.0021], "0.001267 ± 0.000802 (n=3)"),
        ([20, 20, 20], "20 ± 0 (n=3)"),
        ([3820.0, 3820.0, 3820.0], "3820 ± 0 (n=3)"),
        ([3823.4, 3823.4], "3823 ± 0 (n=2)"),  # an exact value keeps its integer digits
        ([0.5, 0.7], "0.600 ± 0.141 (n=2)"),
        ([1.0, 2.0, 3.0], "2.00 ± 1.00 (n=3)"),
        ([0.25, 0.25], "0.25 ± 0.00 (n=2)"),
        ([12345.6, 12345.7], "12345.7 ± 0.1 (n=2)"),  # the mean shows at most digits + 3 digits
        ([1e-7, 1.3e-7, 1.1e-7], "1.133e-07 ± 0.153e-07 (n=3)"),  # one exponent for both
        ([382123, 382456, 381999], "3.82193e+05 ± 0.00236e+05 (n=3)"),
        ([-4e-05, 4e-05], "0.00e-05 ± 5.66e-05 (n=2)"),  # no "-0.00"
        ([0.512], "0.512 ± — (n=1)"),  # one value has no spread
        ([20], "20.0 ± — (n=1)"),
        ([0.5, 0.5 + 1e-12], "0.500000 ± 7.1e-13 (n=2)"),  # a spread below the mean's last digit
    ],
)
def test_mean_and_spread_share_one_decimal_place(values, text):
    assert fmt_mean_std(values) == text
    assert numeric_cell(values).text == text


def test_the_place_follows_the_spread_and_digits_counts_its_significant_digits():
    assert fmt_mean_std([1.0, 1.2], 2) == "1.10 ± 0.14 (n=2)"
    assert fmt_mean_std([1.0, 1.2], 4) == "1.1000 ± 0.1414 (n=2)"
    assert fmt_mean_spread(3.14159, 0.0123, 5, 2) == "3.142 ± 0.012 (n=5)"
    assert fmt_mean_spread(float("nan"), None, 1) == "nan ± — (n=1)"
    with pytest.raises(ValueError, match="digits"):
        fmt_mean_spread(1.0, 0.1, 2, 0)
    with pytest.raises(ValueError, match="spread"):
        fmt_mean_spread(1.0, -0.1, 2)


def test_results_json_numbers_are_full_precision_not_the_rounded_text():
    values = [0.002537, 0.0025, 0.0026]
    cell = cell_to_json(fmt_mean_std(values))
    assert cell["mean"] == statistics.fmean(values) and math.isclose(cell["std"], statistics.stdev(values), rel_tol=1e-12)
    assert cell["mean"] != float(cell["text"].split(" ")[0])  # the text is rounded; the number is not
    assert cell["n"] == 3 and cell["values"] == values
    one = cell_to_json(fmt_mean_std([0.512]))
    assert one["mean"] == 0.512 and one["std"] is None and one["n"] == 1
    assert numeric_cell([0.512]).std is None and numeric_cell([0.512]).to_dict()["std"] is None
    # A plain string (no values) is still parsed, "—" as no spread.
    assert cell_to_json("0.512 ± — (n=1)") == {"text": "0.512 ± — (n=1)", "mean": 0.512, "std": None, "n": 1}
    assert math.isclose(cell_to_json("1.133e-07 ± 0.153e-07 (n=3)")["std"], 1.53e-08)
