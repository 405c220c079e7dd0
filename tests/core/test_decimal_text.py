import pytest

from replicator.core.decimal_text import parse_decimal


@pytest.mark.parametrize(
    ("text", "value"),
    [("0", 0), ("7", 7), ("10", 10), ("9223372036854775807", 2**63 - 1)],
)
def test_canonical_ascii_decimals_parse(text, value):
    assert parse_decimal(text) == value


@pytest.mark.parametrize(
    "text",
    [
        "²",  # isdigit() is true, int() refuses it
        "1²",
        "\u0661\u0660",  # Arabic-Indic digits: int() reads 10
        "\uff11",  # fullwidth digit
        "--5",
        "-5",  # negative where only naturals are wanted
        "+5",
        " 5",
        "5 ",
        "5\n",
        "05",  # another spelling of 5: not the one written
        "",
        "0x10",
        "1_000",
        "9223372036854775808",  # past signed 64 bits
        "9" * 5000,  # int() would refuse it (or spend time on it)
        None,
        5,
        b"5",
    ],
)
def test_anything_but_the_canonical_spelling_is_none(text):
    assert parse_decimal(text) is None


def test_signed_values_when_the_minimum_is_negative():
    assert parse_decimal("-1", minimum=-1) == -1
    assert parse_decimal("-2", minimum=-1) is None
    assert parse_decimal("-0", minimum=-1) is None
    assert parse_decimal("--1", minimum=-1) is None
    assert parse_decimal("-²", minimum=-1) is None


def test_fixed_width_spellings():
    assert parse_decimal("0000000000042", width=13) == 42
    assert parse_decimal("42", width=13) is None
    assert parse_decimal("00000000000042", width=13) is None
    assert parse_decimal("12345678901234", width=13) == 12345678901234


def test_bounds():
    assert parse_decimal("10", maximum=9) is None
    assert parse_decimal("3", minimum=4) is None
