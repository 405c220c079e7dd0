"""Built-in record filters (see :mod:`replicator.core.filters` for the interface).

``{ plugin = "replicator.core.filters.builtin:by_header",
    config = { name = "env", value = "test", action = "drop" } }``
drops records that carry a header ``env`` with the value ``test`` (any value when
``value`` is left out); ``action = "keep"`` keeps only those.

``{ plugin = "replicator.core.filters.builtin:by_key_prefix",
    config = { prefix = "tmp-", action = "drop" } }``
drops records whose key starts with the UTF-8 bytes of ``prefix`` (null keys never match).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from replicator.core.filters import RecordFilter


def _action(config: dict[str, Any]) -> bool:
    """True when matching records are kept."""
    action = config.get("action", "drop")
    if action not in ("keep", "drop"):
        raise ValueError(f"action must be 'keep' or 'drop', got {action!r}")
    return action == "keep"


def by_header(config: dict[str, Any]) -> RecordFilter:
    name = config.get("name")
    if not isinstance(name, str) or not name:
        raise ValueError("name (the header's name) is required")
    value = config.get("value")
    if value is not None and not isinstance(value, str):
        raise ValueError("value must be a string")
    wanted = None if value is None else value.encode()
    keep_matches = _action(config)

    def decide(records: pa.Table) -> np.ndarray:
        headers = records.column("headers")
        if isinstance(headers, pa.ChunkedArray):
            headers = headers.combine_chunks()
        flat = headers.flatten()
        hit = pc.equal(flat.field("key"), name)
        if wanted is not None:
            hit = pc.and_(hit, pc.equal(flat.field("value"), pa.scalar(wanted, pa.binary())))
        hits = hit.fill_null(False).to_numpy(zero_copy_only=False).astype(np.int64)
        bounds = (headers.offsets.to_numpy() - headers.offsets[0].as_py()).astype(np.int64)
        totals = np.concatenate([[0], np.cumsum(hits)])
        matches = totals[bounds[1:]] > totals[bounds[:-1]]
        return matches if keep_matches else ~matches

    return decide


def by_key_prefix(config: dict[str, Any]) -> RecordFilter:
    prefix = config.get("prefix")
    if not isinstance(prefix, str) or not prefix:
        raise ValueError("prefix is required")
    keep_matches = _action(config)
    raw = prefix.encode()

    def decide(records: pa.Table) -> np.ndarray:
        heads = pc.binary_slice(records.column("key"), 0, len(raw))
        matched = pc.equal(heads, pa.scalar(raw, pa.binary())).fill_null(False)
        matches = matched.to_numpy(zero_copy_only=False).astype(bool)
        return matches if keep_matches else ~matches

    return decide
