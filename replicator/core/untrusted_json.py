"""JSON from outside the process (S3 objects, SQS messages, Kafka records, Parquet
footers): parsed with a size cap, refused when nested too deep, and type-checked field by
field before anything uses it. Pure.

Every failure is a ``ValueError`` whose text names what is wrong (never echoing more than
a field's value), so callers turn it into their own error with where it came from.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

Kinds = type | tuple[type, ...]


def json_object(raw: str | bytes, max_bytes: int) -> dict[str, Any]:
    """``raw`` as a JSON object: at most ``max_bytes``, not nested too deep."""
    if len(raw) > max_bytes:
        raise ValueError(f"{len(raw)} bytes, more than the {max_bytes} allowed")
    try:
        data = json.loads(raw)
    except RecursionError:
        raise ValueError("JSON nested too deep") from None
    if not isinstance(data, dict):
        raise ValueError(f"a JSON {type(data).__name__}, not an object")
    return data


def check_fields(
    data: Mapping[str, Any], fields: Mapping[str, tuple[Kinds, bool]]
) -> dict[str, Any]:
    """The ``fields`` (name -> (types, required)) of ``data``, each required one there and
    each value of one of its types (a bool is no int). Other keys are left out: a newer
    version may add fields, and an older reader must still read what it knows."""
    for name, (kinds, required) in fields.items():
        if name not in data:
            if required:
                raise ValueError(f"{name} is missing")
            continue
        value = data[name]
        allowed = kinds if isinstance(kinds, tuple) else (kinds,)
        if (isinstance(value, bool) and bool not in allowed) or not isinstance(value, allowed):
            raise ValueError(f"{name} is {str(value)[:80]!r}, not of the expected type")
    return {name: data[name] for name in fields if name in data}
