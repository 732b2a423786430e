"""One number style in the terminal (blocklab.units): significant digits and thousands
separators, as the summary prints them, in the economics table and the overhead self-test."""

from __future__ import annotations

import pytest

from blocklab.commands.selftest import ratio_lines
from blocklab.units import fmt_number, fmt_p_value, sig3


@pytest.mark.parametrize(
    ("x", "digits", "text"),
    [
        (5250, 3, "5,250"),
        (6200.0, 6, "6,200"),
        (0.013111105710000525, 3, "0.0131"),
        (129.99, 6, "129.99"),
        (1.5, 3, "1.5"),
        (9.996, 3, "10"),
        (0.98765, 4, "0.9877"),
        (-1234.5, 3, "-1,234"),
        (0, 3, "0"),
        (float("nan"), 3, "–"),
    ],
)
def test_fmt_number(x: float, digits: int, text: str) -> None:
    assert fmt_number(x, digits) == text


def test_the_summarys_sig3_keeps_its_trailing_zeros() -> None:
    assert sig3(1.5) == "1.50" and sig3(5250) == "5,250" and sig3(9.996) == "10.0"


def test_p_values() -> None:
    assert fmt_p_value(0.013111105710000525) == "0.013"
    assert fmt_p_value(0.0002) == "< 0.001"
    assert fmt_p_value(None) == "n/a"


def test_the_self_test_prints_its_ratio_ci_and_p_in_that_style() -> None:
    lines = ratio_lines(0.987654321, 0.97123456, 1.0012345, 0.013111105710000525)
    assert lines == [
        "instrumented/bare tps ratio (geometric mean): 0.9877",
        "95 % CI of the ratio: [0.9712, 1.001]  p=0.013",
    ]
    assert ratio_lines(1.0, None, None, None)[1] == "95 % CI of the ratio: n/a  p=n/a"
