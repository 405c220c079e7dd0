"""Decimal numbers in names and values read from a bucket: ASCII digits only. Pure.

``str.isdigit()`` is true for characters ``int()`` refuses (``"²"``), and ``int()`` takes
digits of every script (Arabic-Indic one-zero is 10), so a name an attacker writes into a
bucket could either crash a service with a plain ``ValueError`` or pass for another, real
name (a partition directory spelled so, for partition 10). Every number parsed out of a
bucket's keys or JSON goes through :func:`parse_decimal`, which accepts only the one
spelling the replicator itself writes (``f"{n:0{width}d}"``) and returns None for anything
else: the caller raises its own area's error naming the object.
"""

from __future__ import annotations

_DIGITS = frozenset("0123456789")
MAX_DIGITS = 20
"""Enough for any signed 64-bit value; longer text is refused before ``int()`` sees it
(which would spend time on, or refuse, thousands of digits)."""


def parse_decimal(
    text: object,
    *,
    minimum: int = 0,
    maximum: int = 2**63 - 1,
    width: int = 0,
) -> int | None:
    """The integer ``text`` spells in ASCII decimal, or None.

    Accepted only in its canonical form: what ``f"{value:0{width}d}"`` writes (no sign
    but a single '-' for negative values, no '+', no spaces, no leading zeros beyond
    ``width``), and only within ``minimum..maximum`` (negative values only when
    ``minimum`` is below zero)."""
    if not isinstance(text, str) or not 0 < len(text) <= max(MAX_DIGITS, width):
        return None
    digits = text[1:] if text.startswith("-") and minimum < 0 else text
    if not digits or not _DIGITS.issuperset(digits):
        return None
    value = int(text)
    if f"{value:0{width}d}" != text or not minimum <= value <= maximum:
        return None
    return value
