"""Record filters: the built-ins, plugins loaded by name, and failures that name the plugin."""

from __future__ import annotations

import sys
import types

import pyarrow as pa
import pytest

from replicator.core.config import FilterSpec
from replicator.core.errors import ConfigError
from replicator.core.filters import FilterChain, load_chain, load_filter
from replicator.core.filters.errors import FilterError
from tests.fixtures.records import every_shape, to_batch


def records() -> pa.Table:
    return pa.Table.from_batches([to_batch(every_shape())])


def kept_keys(chain: FilterChain) -> list[bytes | None]:
    return chain.apply(records(), "orders", 3).column("key").to_pylist()


def builtin(factory: str, **config: object) -> FilterSpec:
    return FilterSpec(plugin=f"replicator.core.filters.builtin:{factory}", config=config)


def test_by_header_drops_or_keeps_records_carrying_the_header():
    drop = load_chain([builtin("by_header", name="h")], "f")
    assert b"dup" not in kept_keys(drop) and len(kept_keys(drop)) == len(every_shape()) - 1
    keep = load_chain([builtin("by_header", name="n", action="keep")], "f")
    assert kept_keys(keep) == [b"nullhdr"]
    by_value = load_chain([builtin("by_header", name="h", value="2", action="keep")], "f")
    assert kept_keys(by_value) == [b"dup"]
    no_match = load_chain([builtin("by_header", name="h", value="9", action="keep")], "f")
    assert kept_keys(no_match) == []


def test_by_key_prefix_never_matches_null_keys():
    chain = load_chain([builtin("by_key_prefix", prefix="d", action="keep")], "f")
    assert kept_keys(chain) == [b"dup"]
    dropped = load_chain([builtin("by_key_prefix", prefix="d")], "f")
    assert None in kept_keys(dropped) and b"dup" not in kept_keys(dropped)


def test_filters_apply_in_order_and_keep_the_segment_schema():
    chain = load_chain(
        [builtin("by_key_prefix", prefix="tomb"), builtin("by_header", name="h")], "f"
    )
    kept = chain.apply(records(), "orders", 3)
    assert kept.schema == records().schema
    assert kept.num_rows == len(every_shape()) - 2


def test_a_plugin_sees_topic_and_partition_and_decides_per_record():
    module = types.ModuleType("filters_under_test")

    def odd_offsets(config: dict) -> object:
        def decide(table: pa.Table) -> list[bool]:
            assert set(table.column("topic").to_pylist()) == {config["topic"]}
            assert set(table.column("partition").to_pylist()) == {3}
            return [o % 2 == 1 for o in table.column("offset").to_pylist()]

        return decide

    def broken(config: dict) -> object:
        return lambda table: 1 / 0

    def wrong_length(config: dict) -> object:
        return lambda table: [True]

    module.odd_offsets = odd_offsets  # type: ignore[attr-defined]
    module.broken = broken  # type: ignore[attr-defined]
    module.wrong_length = wrong_length  # type: ignore[attr-defined]
    sys.modules["filters_under_test"] = module
    try:
        spec = FilterSpec(plugin="filters_under_test:odd_offsets", config={"topic": "orders"})
        kept = load_chain([spec], "f").apply(records(), "orders", 3)
        assert kept.column("offset").to_pylist() == [1, 3, 5, 7, 9]
        for name, reason in (("broken", "ZeroDivisionError"), ("wrong_length", "expected 10")):
            chain = load_chain([FilterSpec(plugin=f"filters_under_test:{name}")], "f")
            with pytest.raises(FilterError, match=f"filters_under_test:{name} failed.*{reason}"):
                chain.apply(records(), "orders", 3)
    finally:
        del sys.modules["filters_under_test"]


def test_unknown_plugins_and_bad_configs_are_config_errors_naming_where():
    with pytest.raises(ConfigError, match=r"relay.topics\[0\].filters\[0\]: cannot load"):
        load_filter(FilterSpec(plugin="no.such.module:f"), "relay.topics[0].filters[0]")
    with pytest.raises(ConfigError, match="refused its config: name"):
        load_filter(builtin("by_header"), "f")
    with pytest.raises(ConfigError, match="action must be"):
        load_filter(builtin("by_key_prefix", prefix="x", action="maybe"), "f")


def test_a_record_batch_is_filtered_like_a_table():
    batch = to_batch(every_shape())
    chain = load_chain([builtin("by_header", name="h")], "f")
    assert chain.apply(batch, "orders", 0).num_rows == len(every_shape()) - 1
