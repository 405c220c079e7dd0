"""Parsing of human-written durations ("250ms", "5m", "7d") and sizes ("64KiB", "4GiB").

Pure functions: config validation uses them, and so can any CLI flag.
"""

from __future__ import annotations

import re

_DURATION_UNITS = {
    "ms": 0.001,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
    "d": 86400.0,
}
_SIZE_UNITS = {
    "B": 1,
    "KB": 1000,
    "MB": 1000**2,
    "GB": 1000**3,
    "TB": 1000**4,
    "KiB": 1024,
    "MiB": 1024**2,
    "GiB": 1024**3,
    "TiB": 1024**4,
}
_DURATION_RE = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s*(ms|s|m|h|d)\s*$")
_SIZE_RE = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s*([KMGT]i?B|B)\s*$")


def parse_duration(text: str) -> float:
    """Return the duration in seconds.

    A unit is required: a bare number is ambiguous between seconds and milliseconds.
    """
    match = _DURATION_RE.match(text)
    if not match:
        raise ValueError(
            f"unparseable duration {text!r}: expected a number and a unit "
            "(ms, s, m, h, d), e.g. '250ms' or '5m'"
        )
    number = float(match.group(1))
    if number < 0:
        raise ValueError(f"negative duration {text!r}")
    return number * _DURATION_UNITS[match.group(2)]


def parse_size(text: str | int) -> int:
    """Return the size in bytes; a plain integer is taken as bytes."""
    if isinstance(text, bool):
        raise ValueError("expected a size like '64KiB', not a boolean")
    if isinstance(text, int):
        if text < 0:
            raise ValueError(f"negative size {text}")
        return text
    match = _SIZE_RE.match(text)
    if not match:
        raise ValueError(
            f"unparseable size {text!r}: expected a number and a unit "
            "(B, KB, MB, GB, TB, KiB, MiB, GiB, TiB), e.g. '100MiB'"
        )
    number = float(match.group(1))
    if number < 0:
        raise ValueError(f"negative size {text!r}")
    return int(number * _SIZE_UNITS[match.group(2)])


def format_size(n: int) -> str:
    """Render a byte count for humans, e.g. 1536 -> '1.5KiB'."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{int(value)}{unit}" if unit == "B" else f"{value:.1f}{unit}"
        value /= 1024
    raise AssertionError("unreachable")
