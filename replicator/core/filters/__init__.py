"""Record filters: plugins that decide which records are replicated.

A plugin is a Python callable named ``module:attribute`` in the config
(``filters = [{ plugin = "mypkg.filters:drop_tests", config = { field = "env" } }]`` on a
relay topic or an ingress source). It is called once with its ``config`` table and returns
the filter. The filter is called with a batch of records of one source partition, as a
``pyarrow.Table`` with the columns

    topic (string), partition (int32), offset (int64), timestamp (timestamp[ms, UTC]),
    timestamp_type (int8), key (binary), value (binary),
    headers (list<struct<key: string, value: binary>>)

and returns one decision per record, in order: True keeps the record. A pyarrow boolean
array, a NumPy boolean array or a list of bools will do. Filters run in the order listed;
a dropped record still advances the checkpoint, so it is neither a gap nor re-delivered.
A filter that raises, or answers with the wrong number of decisions, halts its partition
with an error naming the plugin.

Two built-in filters: :func:`replicator.core.filters.builtin.by_header` and
:func:`replicator.core.filters.builtin.by_key_prefix`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from replicator.core.config import FilterSpec
from replicator.core.errors import ConfigError
from replicator.core.filters.errors import FilterError

RecordFilter = Callable[[pa.Table], Any]
"""Records in, one keep decision per record out."""


@dataclass(frozen=True)
class NamedFilter:
    plugin: str
    decide: RecordFilter


def load_filter(spec: FilterSpec, where: str, source: str = "config") -> NamedFilter:
    """Import ``spec.plugin`` and call it with its config. ``where`` is the key path of the
    spec, for the :class:`ConfigError` a missing plugin or a rejected config raises."""
    module_name, _, attribute = spec.plugin.partition(":")
    try:
        factory = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(source, [(where, f"cannot load filter {spec.plugin}: {exc}")]) from None
    try:
        decide = factory(dict(spec.config))
    except Exception as exc:
        raise ConfigError(
            source, [(where, f"filter {spec.plugin} refused its config: {exc}")]
        ) from None
    if not callable(decide):
        raise ConfigError(source, [(where, f"filter {spec.plugin} did not return a callable")])
    return NamedFilter(spec.plugin, decide)


class FilterChain:
    """The filters of one source, applied in order."""

    def __init__(self, filters: Sequence[NamedFilter]) -> None:
        self.filters = tuple(filters)

    def __bool__(self) -> bool:
        return bool(self.filters)

    def apply(self, records: pa.Table, topic: str, partition: int) -> pa.Table:
        """The records every filter keeps (segment schema, as given)."""
        if not self.filters or records.num_rows == 0:
            return records
        if isinstance(records, pa.RecordBatch):
            records = pa.Table.from_batches([records])
        view = records.add_column(0, "topic", pa.repeat(pa.scalar(topic), records.num_rows))
        view = view.add_column(
            1, "partition", pa.repeat(pa.scalar(partition, pa.int32()), records.num_rows)
        )
        keep = np.ones(records.num_rows, dtype=bool)
        for named in self.filters:
            keep &= _decisions(named, view)
            if not keep.any():
                break
        return records if keep.all() else records.filter(pa.array(keep))


def load_chain(specs: Sequence[FilterSpec], where: str, source: str = "config") -> FilterChain:
    return FilterChain([load_filter(s, f"{where}[{i}]", source) for i, s in enumerate(specs)])


def _decisions(named: NamedFilter, view: pa.Table) -> np.ndarray:
    try:
        answer = named.decide(view)
    except Exception as exc:
        raise FilterError(named.plugin, f"{type(exc).__name__}: {exc}") from exc
    if isinstance(answer, pa.ChunkedArray):
        answer = answer.combine_chunks()
    if isinstance(answer, pa.Array):
        if answer.null_count:
            raise FilterError(named.plugin, "returned null decisions")
        answer = answer.to_numpy(zero_copy_only=False)
    decisions = np.asarray(answer)
    if decisions.dtype != bool or decisions.shape != (view.num_rows,):
        raise FilterError(
            named.plugin,
            f"returned {decisions.dtype} of shape {decisions.shape}, expected "
            f"{view.num_rows} booleans",
        )
    return decisions
