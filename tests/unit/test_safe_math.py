"""Tests for the safe arithmetic evaluator behind the ``calculate`` tool."""

from __future__ import annotations

import math
import time

import pytest

from workers.tools.builtin.safe_math import CalculationError, evaluate, format_number

# Generous: every attack below is refused in well under a millisecond, but would take
# minutes to hours (or exhaust memory) if it were actually computed.
ATTACK_TIME_LIMIT = 5.0  # each attack done in full would take minutes or more


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("2+2", 4),
        ("12 times 13", 156),
        ("12 x 13", 156),
        ("12x13", 156),
        ("12 \u00d7 13", 156),
        ("12 \u00f7 4", 3),
        ("3 multiplied by 4", 12),
        ("10 divided by 4", 2.5),
        ("5 minus 2 plus 1", 4),
        ("2 to the power of 10", 1024),
        ("2^10", 1024),
        ("2**10", 1024),
        ("2 ** -2", 0.25),
        ("20 percent of 50", 10),
        ("20% of 50", 10),
        ("10 / 4", 2.5),
        ("7 // 2", 3),
        ("7 % 3", 1),
        ("(1+2)*3", 9),
        ("-3 ** 2", -9),
        ("--3", 3),
        ("+3", 3),
        ("1e3", 1000),
        ("2.5 * 4", 10),
        ("sqrt(16)", 4),
        ("abs(-5)", 5),
        ("round(2.345, 2)", round(2.345, 2)),
        ("round(2.5)", round(2.5)),
        ("floor(2.7)", 2),
        ("ceil(2.1)", 3),
        ("factorial(5)", 120),
        ("log(100, 10)", 2),
        ("log(e)", 1),
        ("log10(1000)", 3),
        ("log2(1024)", 10),
        ("exp(0)", 1),
        ("sin(0)", 0),
        ("cos(0)", 1),
        ("tan(0)", 0),
        ("degrees(pi)", 180),
        ("radians(180)", math.pi),
        ("asin(1)", math.pi / 2),
        ("acos(1)", 0),
        ("atan(1)", math.pi / 4),
        ("min(3, 1, 2)", 1),
        ("max(3, 1, 2)", 3),
        ("hypot(3, 4)", 5),
        ("pi", math.pi),
        ("tau", math.tau),
        ("PI * 2", math.tau),
        ("2**4095 // 2**4094", 2),
        ("(" * 32 + "1" + ")" * 32, 1),
    ],
)
def test_correct_results(expression: str, expected: float) -> None:
    result = evaluate(expression)
    assert not isinstance(result, bool)
    assert result == pytest.approx(expected)


def test_integer_results_stay_exact() -> None:
    assert evaluate("12 times 13") == 156
    assert isinstance(evaluate("12 times 13"), int)
    assert evaluate("2**100") == 2**100
    assert evaluate("factorial(20)") == math.factorial(20)


@pytest.mark.parametrize(
    "expression",
    [
        "9**9**9**9",
        "10**10**10",
        "(10**1000)**1000",
        "2**100000",
        "2.0**100000",
        "0.5**-100000",
        "factorial(100000)",
        "factorial(1000)*factorial(1000)*factorial(1000)*factorial(1000)*factorial(1000)",
        "10**4000*10**4000",
        "2**4095*2**4095",
        "round(1, -1000000000)",
        "'a'*10",
        "__import__('os')",
        "().__class__",
        "open('x')",
        "(lambda: 1)()",
        "[x for x in range(10**9)]",
        "1/0",
        "1%0",
        "1//0",
        "0**-1",
        "(" * 34 + "1" + ")" * 34,
        "1+" * 5000 + "1",
        "1+" * 120 + "1",
        "1e308*10",
        "1e400",
        "exp(1000)",
    ],
)
def test_attacks_are_refused_fast(expression: str) -> None:
    start = time.perf_counter()
    with pytest.raises(CalculationError):
        evaluate(expression)
    assert time.perf_counter() - start < ATTACK_TIME_LIMIT


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("1/0", "division by zero"),
        ("1%0", "division by zero"),
        ("1e308*10", "result is not a finite number"),
        ("foo(2)", "unknown name 'foo'; allowed: "),
        ("x + 1", "unknown name 'x'"),
        ("open('x')", "unknown name 'open'"),
        ("().__class__", "unsupported expression"),
        ("'a'*10", "unsupported expression"),
        ("sin(x=1)", "unsupported expression"),
        ("[1, 2]", "unsupported expression"),
        ("1 < 2", "unsupported expression"),
        ("2 +* 3", "could not parse '2 +* 3': "),
        ("(" * 33 + "1" + ")" * 33, "nested too deeply"),
        ("1+" * 5000 + "1", "too long"),
        ("1+" * 120 + "1", "too complex"),
        ("9**9**9", "exponent too large"),
        ("10**2000", "result too large"),
        ("factorial(1001)", "factorial() argument"),
        ("factorial(2.5)", "factorial() argument"),
        ("sqrt(-1)", "math domain error in sqrt()"),
        ("(-8) ** 0.5", "not a real number"),
        ("sqrt", "'sqrt' is a function"),
        ("pi(2)", "'pi' is a constant"),
        ("sqrt(1, 2)", "sqrt() takes 1 argument(s)"),
        ("1_000", "unsupported number"),
        ("", "empty expression"),
    ],
)
def test_error_messages(expression: str, message: str) -> None:
    with pytest.raises(CalculationError) as info:
        evaluate(expression)
    assert message in str(info.value)


def test_calculation_error_is_a_value_error() -> None:
    assert issubclass(CalculationError, ValueError)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (156, "156"),
        (156.0, "156"),
        (-3, "-3"),
        (0.0, "0"),
        (-0.0, "0"),
        (2.5, "2.5"),
        (1 / 3, "0.3333333333"),
        (2 / 3, "0.6666666667"),
        (1.5e20, "1.5e+20"),
        (1e-7, "1e-07"),
        (math.pi, "3.141592654"),
        (2**100, str(2**100)),
    ],
)
def test_format_number(value: int | float, text: str) -> None:
    assert format_number(value) == text


def test_format_number_of_evaluated_results() -> None:
    assert format_number(evaluate("12 times 13")) == "156"
    assert format_number(evaluate("20 percent of 50")) == "10"
    assert format_number(evaluate("1 / 3")) == "0.3333333333"
