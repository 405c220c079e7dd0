"""confluent-kafka messages to Arrow columns (:func:`replicator.core.kafka.records.
message_columns`, the egress read loop's and the relay's per-batch conversion): column by
column, it must say exactly what each message says, read one message at a time — for
messages with and without headers, empty keys and values, absent ones, every timestamp
type."""

from __future__ import annotations

from typing import Any

from confluent_kafka import Message
from hypothesis import given, settings
from hypothesis import strategies as st

from replicator.core.kafka.records import message_columns, messages_to_records
from replicator.core.segments.format import SCHEMA

HEADERS_TYPE = SCHEMA.field("headers").type

_headers = st.none() | st.lists(st.tuples(st.text(max_size=8), st.binary(max_size=8)), max_size=3)
_message = st.builds(
    lambda offset, key, value, headers, ts_type, ts: Message(
        topic="t",
        partition=0,
        offset=offset,
        key=key,
        value=value,
        headers=headers,
        timestamp=(ts_type, ts),
    ),
    offset=st.integers(0, 2**62),
    key=st.none() | st.binary(max_size=16),
    value=st.none() | st.binary(max_size=64),
    headers=_headers,
    ts_type=st.sampled_from([0, 1, 2]),
    ts=st.integers(-1, 2**45),
)


def one_by_one(message: Any) -> dict[str, Any]:
    return {
        "offset": message.offset(),
        "timestamp_ms": message.timestamp()[1],
        "timestamp_type": message.timestamp()[0],
        "key": message.key(),
        "value": message.value(),
        "headers": [{"key": k, "value": v} for k, v in (message.headers() or [])],
    }


@settings(max_examples=200, deadline=None)
@given(st.lists(_message, max_size=20))
def test_the_columns_say_what_each_message_says(messages: list[Any]) -> None:
    columns = message_columns(messages, HEADERS_TYPE)
    got = [
        {
            "offset": columns.offset[i].as_py(),
            "timestamp_ms": columns.timestamp_ms[i].as_py(),
            "timestamp_type": columns.timestamp_type[i].as_py(),
            "key": columns.key[i].as_py(),
            "value": columns.value[i].as_py(),
            "headers": columns.headers[i].as_py(),
        }
        for i in range(len(messages))
    ]
    assert got == [one_by_one(m) for m in messages]


def test_no_messages_give_empty_columns_of_the_segment_schema() -> None:
    batch = messages_to_records([])
    assert batch.num_rows == 0
    assert batch.schema == SCHEMA
