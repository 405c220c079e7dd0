import pytest

from replicator.core.untrusted_text import escape


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("payments", "payments"),
        ("zahlungen-ü-数据", "zahlungen-ü-数据"),
        ("a b", "a b"),
        ("forged\n2026-01-01 ERROR fake", "forged\\n2026-01-01 ERROR fake"),
        ("\r\t", "\\r\\t"),
        ("\x1b[2J\x1b]0;title\x07", "\\x1b[2J\\x1b]0;title\\x07"),
        ("\x7f\x85", "\\x7f\\x85"),
        ("left\u202eright", "left\\u202eright"),  # bidi override
        ("zero\u200bwidth", "zero\\u200bwidth"),
        ("line\u2028sep", "line\\u2028sep"),
        ("back\\slash", "back\\\\slash"),  # an escape in the output is always one
        ("\U000e0001", "\\U000e0001"),
    ],
)
def test_printable_text_stays_and_everything_else_is_escaped(text, shown):
    assert escape(text) == shown
    assert escape(text).isprintable()


def test_long_names_are_cut_saying_how_much():
    assert escape("x" * 305) == "x" * 300 + "...(5 more)"
    assert escape("ab\n", max_chars=2) == "ab...(1 more)"


def test_anything_is_shown_as_its_str():
    assert escape(42) == "42"
