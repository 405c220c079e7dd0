import pytest

from replicator.core.segments.errors import SegmentKeyError
from replicator.core.segments.key import (
    MAX_OFFSET,
    SegmentKey,
    check_region_name,
    check_topic_name,
    partition_s3_prefix,
    topic_descriptor_s3_key,
)


def test_key_layout_pads_offsets_to_twenty_digits():
    key = SegmentKey("us-east-1", "sensor.events", 3, 0, 0, 41)
    assert key.to_s3_key("data") == (
        "data/us-east-1/sensor.events/3/0/00000000000000000000-00000000000000000041"
    )


def test_max_offset_round_trips():
    key = SegmentKey("r", "t", 0, 2, MAX_OFFSET, MAX_OFFSET)
    text = key.to_s3_key("p")
    assert text.endswith("09223372036854775807-09223372036854775807")
    assert SegmentKey.from_s3_key(text, "p") == key


@pytest.mark.parametrize("topic", ["a.b.c", "with-dash", "with_underscore", "MiXeD.09_-x"])
def test_topic_names_with_dots_dashes_underscores_round_trip(topic):
    key = SegmentKey("eu-west-1", topic, 11, 1, 100, 199)
    assert SegmentKey.from_s3_key(key.to_s3_key("data"), "data") == key


@pytest.mark.parametrize("prefix", ["data", "a/b/c", ""])
def test_prefixes_with_slashes_or_empty_round_trip(prefix):
    key = SegmentKey("r1", "t", 0, 0, 5, 5)
    assert SegmentKey.from_s3_key(key.to_s3_key(prefix), prefix) == key


@pytest.mark.parametrize(
    ("key", "reason"),
    [
        ("other/r/t/0/0/00000000000000000000-00000000000000000001", "not under prefix"),
        ("data/r/t/0/00000000000000000000-00000000000000000001", "does not have the form"),
        ("data/r/t/x/0/00000000000000000000-00000000000000000001", "partition 'x'"),
        ("data/r/t/01/0/00000000000000000000-00000000000000000001", "partition '01'"),
        ("data/r/t/0/L/00000000000000000000-00000000000000000001", "level 'L'"),
        ("data/r/t/0/0/0-1", "two 20-digit offsets"),
        ("data/r/t/0/0/00000000000000000000-00000000000000000001.tmp", "two 20-digit"),
        ("data/r/t/_topic.json", "does not have the form"),
        ("data/r/t/0/0/00000000000000000009-00000000000000000001", "invalid covered range"),
        ("data/r/t/0/0/99999999999999999999-99999999999999999999", "invalid covered range"),
        # Digits of other scripts: int() reads them, the replicator never writes them.
        (
            "data/r/t/\u0661\u0660/0/00000000000000000000-00000000000000000001",
            "partition '\u0661\u0660'",
        ),
        ("data/r/t/1\u0661/0/00000000000000000000-00000000000000000001", "partition '1\u0661'"),
        ("data/r/t/0/\u0661/00000000000000000000-00000000000000000001", "level '\u0661'"),
        ("data/r/t/0/1\u0661/00000000000000000000-00000000000000000001", "level '1\u0661'"),
        (
            "data/r/t/0/0/\u0660\u0660\u0660\u0660\u0660\u0660\u0660\u0660\u0660\u0660\u0660\u0660\u0660\u0660\u0660\u0660\u0660\u0660\u0660\u0660-00000000000000000001",
            "two 20-digit",
        ),
        ("data/r/t/²/0/00000000000000000000-00000000000000000001", "partition '²'"),
    ],
)
def test_malformed_keys_are_rejected_with_a_reason(key, reason):
    with pytest.raises(SegmentKeyError, match=reason):
        SegmentKey.from_s3_key(key, "data")


def test_invalid_fields_are_rejected():
    with pytest.raises(SegmentKeyError, match="invalid Kafka topic name"):
        SegmentKey("r", "a/b", 0, 0, 0, 0)
    with pytest.raises(SegmentKeyError, match="negative partition"):
        SegmentKey("r", "t", -1, 0, 0, 0)
    with pytest.raises(SegmentKeyError, match="invalid covered range"):
        SegmentKey("r", "t", 0, 0, -1, 0)


def test_covered_range_helpers():
    key = SegmentKey("r", "t", 0, 0, 10, 19)
    assert key.offset_count == 10
    assert key.covers(10) and key.covers(19)
    assert not key.covers(9) and not key.covers(20)


def test_lexicographic_order_of_keys_is_offset_order():
    keys = [SegmentKey("r", "t", 0, 0, s, s + 9) for s in (0, 10, 100, 1000, 10**12)]
    texts = [k.to_s3_key("data") for k in keys]
    assert sorted(texts) == texts


def test_prefix_helpers():
    assert partition_s3_prefix("data", "r", "t.x", 4) == "data/r/t.x/4/"
    assert topic_descriptor_s3_key("data", "r", "t.x") == "data/r/t.x/_topic.json"


@pytest.mark.parametrize("name", ["orders\n", "orders\r\n", ".", ".."])
def test_names_match_whole_strings_only(name):
    with pytest.raises(SegmentKeyError):
        check_topic_name(name)
    with pytest.raises(SegmentKeyError):
        check_region_name(name)


def test_an_s3_key_with_a_trailing_newline_is_not_another_segment():
    s3_key = SegmentKey("us-east-1", "orders", 0, 0, 0, 9).to_s3_key("data")
    for forged in (s3_key + "\n", s3_key.replace("/0/0/", "/0\n/0/")):
        with pytest.raises(SegmentKeyError):
            SegmentKey.from_s3_key(forged, "data")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([], "not a JSON object"),
        ({"partitions": "many"}, "'partitions' is 'many'"),
        ({"partitions": 0}, "'partitions' is 0"),
        ({"partitions": True}, "'partitions' is True"),
        ({"partitions": 10**9}, "not a partition count"),
        ({"partitions": 2, "configs": ["x"]}, "'configs' is not a table"),
        ({"partitions": 2, "configs": {"a": {"b": 1}}}, "'configs' is not a table"),
        ({"partitions": 2, "configs": {"cleanup.policy": "none"}}, "cleanup.policy = 'none'"),
        ({"partitions": 2, "configs": {"retention.ms": "soon"}}, "retention.ms = 'soon'"),
        ({"partitions": 2, "configs": {"retention.ms": True}}, "retention.ms = 'True'"),
        ({"partitions": 2, "configs": {"max.message.bytes": "1e9"}}, "max.message.bytes"),
        ({"partitions": 2, "configs": {"min.cleanable.dirty.ratio": 7}}, "dirty.ratio = '7'"),
        ({"partitions": 2, "configs": {"retention.ms": "²"}}, "retention.ms = '²'"),
        ({"partitions": 2, "configs": {"retention.bytes": "--5"}}, "retention.bytes = '--5'"),
        (
            {"partitions": 2, "configs": {"retention.ms": "\u0661\u0660"}},
            "retention.ms = '\u0661\u0660'",
        ),
        ({"partitions": 2, "configs": {"retention.ms": "-2"}}, "retention.ms = '-2'"),
        ({"partitions": 2, "configs": {"retention.ms": "9" * 5000}}, "retention.ms = '999"),
        ({"partitions": 2, "export_start": {"²": 0}}, "export_start partition '²'"),
        ({"partitions": 2, "export_start": {"\u0661": 0}}, "export_start partition '\u0661'"),
        ({"partitions": 2, "export_start": {"01": 0}}, "export_start partition '01'"),
        ({"partitions": 2, "export_start": {"0": -1}}, "export_start of partition 0 is -1"),
        ({"partitions": 2, "export_start": {"0": "5"}}, "export_start of partition 0 is '5'"),
        (
            {"partitions": 2, "configs": {"message.timestamp.type": "Now"}},
            "message.timestamp.type = 'Now'",
        ),
    ],
)
def test_unusable_descriptors_are_named_with_their_key(data, message):
    from replicator.core.segments.descriptor import parse_descriptor
    from replicator.core.segments.errors import DescriptorError

    with pytest.raises(DescriptorError, match=r"data/r/t/_topic\.json") as raised:
        parse_descriptor(data, "data/r/t/_topic.json")
    assert message in str(raised.value)


def test_configs_outside_the_allow_list_are_dropped_when_read():
    from replicator.core.segments.descriptor import parse_descriptor

    data = {
        "partitions": 2,
        "configs": {
            "retention.ms": 86_400_000,
            "cleanup.policy": "compact,delete",
            "min.cleanable.dirty.ratio": "0.5",
            "unclean.leader.election.enable": "true",
            "min.insync.replicas": "1",
            "follower.replication.throttled.replicas": "*",
        },
    }
    assert parse_descriptor(data, "k").configs == {
        "retention.ms": "86400000",
        "cleanup.policy": "compact,delete",
        "min.cleanable.dirty.ratio": "0.5",
    }


def test_a_descriptor_round_trips_with_its_export_starts():
    from replicator.core.segments.descriptor import describe, parse_descriptor

    parsed = parse_descriptor(describe("t", 3, {"retention.ms": "5"}, "r", {0: 7}), "k")
    assert (parsed.partitions, parsed.configs, parsed.export_start) == (
        3,
        {"retention.ms": "5"},
        {0: 7},
    )


def test_a_key_is_a_segment_only_in_the_spelling_it_was_written_in():
    """Whatever parses must write back to the very key it was parsed from: no second
    name for one segment."""
    key = SegmentKey("r", "t", 11, 0, 0, 1)
    s3_key = key.to_s3_key("data")
    assert SegmentKey.from_s3_key(s3_key, "data") == key
    forged = s3_key.replace("/11/", "/1\u0661/")  # int() reads 11
    with pytest.raises(SegmentKeyError):
        SegmentKey.from_s3_key(forged, "data")
