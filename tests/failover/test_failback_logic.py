"""The pure parts of ``replicator failback``: the divergent tail from the old region's
records, the archive segment that holds it, a group's translation back into the old
region, and the reversed config (which ``replicator config check`` accepts)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from replicator.config_check import check
from replicator.core.config import Config, parse_config
from replicator.core.groups.translation import Translation, translated_back
from replicator.core.segments.key import SegmentKey
from replicator.failback import (
    FailbackError,
    Tail,
    divergent_tail,
    forward_regions,
    lost_in_old_region,
    reversed_config_text,
    reversed_relay,
    tail_segment_key,
    to_toml,
)

EAST, WEST = "us-east-1", "us-west-1"


def test_the_tail_is_every_record_before_the_first_one_written_back():
    records = [(10, 1000, False), (12, 1002, False), (13, 1003, False), (15, 9000, True)]
    records.append((16, 9001, False))  # after a reversed record: not the tail's
    assert divergent_tail(10, records) == Tail(10, 3, 10, 13, 1000, 1003)


def test_an_old_region_holding_nothing_more_has_an_empty_tail_and_no_archive():
    tail = divergent_tail(7, [(7, 5, True)])
    assert tail == Tail(7)
    assert tail_segment_key(EAST, "orders", 0, tail) is None
    assert divergent_tail(7, []) == Tail(7)


def test_the_archive_segment_covers_the_tail_under_a_region_of_its_own():
    key = tail_segment_key(EAST, "orders", 2, Tail(10, 3, 11, 13, 0, 0))
    assert key == SegmentKey(f"{EAST}.divergent", "orders", 2, 0, 10, 13)
    # Records the reversed relay aborted after the tail do not change the key: a second
    # run names the same segment.
    again = divergent_tail(10, [(11, 0, False), (13, 0, False), (20, 0, True)])
    assert tail_segment_key(EAST, "orders", 2, again) == key


def test_a_group_committed_after_the_failback_point_keeps_the_reversed_translation():
    exact = Translation(120, 57, True, 130)
    assert translated_back(exact, 100, None) is exact
    # The first reversed record is at new offset 102 (100 and 101 held markers): a group
    # committed at 100 starts at it, nothing skipped: exact.
    gap = Translation(100, 40, False, 130, missing_before=2, log_start=0)
    assert translated_back(gap, 100, None) == Translation(100, 40, True, 130, log_start=0)
    # The reversed relay has not reached it yet: behind, as it is.
    behind = Translation(150, 60, False, 130)
    assert translated_back(behind, 100, None) is behind


def test_a_group_committed_before_the_failback_point_resumes_where_provenance_points():
    reversed_translation = Translation(80, 40, False, 130, missing_before=22, log_start=0)
    back = translated_back(reversed_translation, 100, 75)
    assert back == Translation(80, 75, True, 130)
    # Nothing replicated forward from there (gone from the new region): behind, as it is.
    assert translated_back(reversed_translation, 100, None) is reversed_translation


def test_the_reversed_relay_swaps_the_regions_and_the_topics():
    forward = {"group_id": "rg", "checkpoint_topic": "cp", "lag_threshold": 5, "origin": EAST}
    section = reversed_relay(forward, EAST, WEST, {"orders.west": "orders"})
    assert section["sources"] == [WEST] and section["destination"] == EAST
    assert section["origin"] == WEST
    assert section["topics"] == [{"source_topic": "orders.west", "destination_topic": "orders"}]
    assert (section["group_id"], section["checkpoint_topic"]) == ("rg", "cp")
    assert "lag_threshold" not in section and "consumer_groups" not in section


def test_the_reversed_config_keeps_references_and_passes_config_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("AWS_SECRET", "secret")
    original = f"""
[s3]
endpoint_url = "http://127.0.0.1:9000"
prefix = "data"
access_key_id = "key"
secret_access_key = "${{AWS_SECRET}}"

[regions.{EAST}]
bucket = "old-east"
kafka.bootstrap_servers = "127.0.0.1:9092"

[regions.{WEST}]
bucket = "new-west"
kafka.bootstrap_servers = "127.0.0.1:9093"

[relay]
sources = ["{EAST}"]
destination = "{WEST}"
group_id = "relay-x"
consumer_groups = ["app.*"]

[[relay.topics]]
source_topic = "orders"
destination_topic = "orders.west"
"""
    section = reversed_relay(
        tomllib.loads(original)["relay"], EAST, WEST, {"orders.west": "orders"}
    )
    text = reversed_config_text(original, section)
    raw = tomllib.loads(text)
    assert raw["s3"]["secret_access_key"] == "${AWS_SECRET}"  # a reference still, not a secret
    assert raw["relay"]["destination"] == EAST and raw["relay"]["group_id"] == "relay-x"
    path = tmp_path / "reversed.toml"
    path.write_text(text)
    result = check(path)
    assert result.ok, result.to_dict()


def test_toml_text_reads_back_as_written():
    data = {
        "a": 1,
        "b": 'x"y\\z\n',
        "c": [1, 2],
        "t": {"d": True, "e": 0.5, "odd key": "v"},
        "arr": [{"f": "g", "inner": [{"h": 1}]}, {"f": "i"}],
    }
    assert tomllib.loads(to_toml(data)) == data


def test_an_old_region_that_lost_what_was_replicated_is_refused_by_name():
    assert lost_in_old_region(50, 50, EAST) is None
    assert lost_in_old_region(0, None, EAST) is None
    problem = lost_in_old_region(40, 50, EAST)
    assert problem is not None and EAST in problem and "40" in problem and "50" in problem


def _forward_config(section: str) -> Config:
    """A forward config of regions east-a, east-b (old, with buckets) and west (new) and
    the services ``section`` names. Nothing is reached."""
    regions = "".join(
        f'[regions.{name}]\nbucket = "{name}-bucket"\nsqs_queue = "q"\n'
        f'kafka.bootstrap_servers = "127.0.0.1:{port}"\n'
        for name, port in (("east-a", 1), ("east-b", 2), ("west", 3))
    )
    return parse_config(regions + section, "forward.toml", {})


def _relay_section(sources: list[str], origin: str = "", mode: str = "failover") -> str:
    names = ", ".join(f'"{s}"' for s in sources)
    origin_line = f'origin = "{origin}"\n' if origin else ""
    return (
        f'[relay]\nmode = "{mode}"\nsources = [{names}]\ndestination = "west"\n{origin_line}'
        '[[relay.topics]]\nsource_topic = "orders"\n'
    )


def test_the_old_region_of_a_relay_is_the_upstream_its_offsets_are_named_by():
    # Preference reordered after east-a was the first upstream: the recorded origin
    # stays east-a, and provenance names east-a's offsets.
    config = _forward_config(_relay_section(["east-b", "east-a"], origin="east-a"))
    regions = forward_regions(config)
    assert (regions.old, regions.new, regions.origin) == ("east-a", "west", "east-a")
    # The operator may name the other identical upstream: its offsets are the same.
    assert forward_regions(config, "east-b").old == "east-b"


def test_several_upstreams_none_named_by_the_origin_need_the_operator_to_choose():
    # east-c, the first upstream once, was removed from the sources; its recorded name
    # stays the origin.
    config = _forward_config(_relay_section(["east-b", "east-a"], origin="east-c"))
    with pytest.raises(FailbackError) as raised:
        forward_regions(config)
    assert "east-b, east-a" in str(raised.value) and "--old-region" in str(raised.value)
    assert forward_regions(config, "east-a").old == "east-a"
    assert forward_regions(config, "east-a").origin == "east-c"
    single = _forward_config(_relay_section(["east-b"], origin="east-c", mode="single"))
    assert forward_regions(single).old == "east-b"


def test_a_chosen_old_region_that_is_no_forward_source_is_refused_by_name():
    config = _forward_config(_relay_section(["east-a", "east-b"]))
    with pytest.raises(FailbackError) as raised:
        forward_regions(config, "west")
    assert "'west'" in str(raised.value) and "relay.sources" in str(raised.value)


def test_ingress_from_several_regions_fails_back_the_one_named():
    section = (
        '[ingress]\nregion = "west"\n'
        '[[ingress.sources]]\nregion = "east-a"\ntopic = "orders"\n'
        '[[ingress.sources]]\nregion = "east-b"\ntopic = "payments"\n'
    )
    config = _forward_config(section)
    with pytest.raises(FailbackError) as raised:
        forward_regions(config)
    assert "east-a, east-b" in str(raised.value) and "--old-region" in str(raised.value)
    regions = forward_regions(config, "east-b")
    assert (regions.old, regions.new, regions.origin, regions.forward) == (
        "east-b",
        "west",
        "east-b",
        {},
    )
    with pytest.raises(FailbackError, match=r"ingress\.sources"):
        forward_regions(config, "west")
