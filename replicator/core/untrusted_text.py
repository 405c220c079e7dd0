"""Names from outside (group ids, S3 keys, topic names a bucket lists) made safe to print
in a text log line or on a terminal. Pure.

A group id may hold any character and a bucket's writer chooses its object keys: a
percent-encoded ``%0A`` decodes to a newline that would forge a second log line, an
escape sequence would rewrite the operator's terminal. :func:`escape` keeps printable
text as it is (any script) and writes everything else as a Python escape (``\\n``,
``\\x1b``, ``\\u202e``), with backslashes doubled so that an escape in the output always
means the original held that character. JSON log lines need no more: ``json.dumps``
escapes control characters already.
"""

from __future__ import annotations

MAX_CHARS = 300
"""Longer names are cut (with the number of characters left out): a log line stays a line."""

_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\\": "\\\\"}


def escape(text: object, max_chars: int = MAX_CHARS) -> str:
    """``text`` (``str()`` of it) with every non-printable character escaped."""
    value = str(text)
    cut = len(value) - max_chars
    if cut > 0:
        value = value[:max_chars]
    escaped = "".join(_escape_char(c) for c in value)
    return f"{escaped}...({cut} more)" if cut > 0 else escaped


def _escape_char(char: str) -> str:
    if char in _NAMED:
        return _NAMED[char]
    if char.isprintable():
        return char
    code = ord(char)
    return (
        f"\\x{code:02x}"
        if code < 0x100
        else f"\\u{code:04x}"
        if code < 0x10000
        else f"\\U{code:08x}"
    )
