"""Hostile or broken records on the segment-events topic are skipped, counted and logged;
the instance goes on (no services: the service is built but never run)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from ingress.segment_events import SegmentEvent
from ingress.service import IngressService
from tests.fixtures.worker import config

POISON = [
    None,  # a tombstone
    b"[1, 2]",
    b'"a string"',
    b"not json",
    b'{"kind": "created", "key": 5, "size": 1, "event_time": ""}',
    b'{"kind": "created", "key": "data/x", "size": "big", "event_time": ""}',
    b'{"kind": "created", "key": "data/x", "size": 1, "event_time": 7}',
    b'{"kind": ["created"], "key": "data/x"}',
    b'{"kind": "created"}',
    b"\xff\xfe",
    b"[" * 100_000 + b"]" * 100_000,  # deep nesting
]


@pytest.mark.parametrize("raw", POISON)
def test_an_event_that_is_not_an_event_is_a_value_error(raw):
    with pytest.raises(ValueError):
        SegmentEvent.from_json(raw)


@dataclass
class Message:
    raw: bytes | None

    def error(self) -> None:
        return None

    def value(self) -> bytes | None:
        return self.raw

    def partition(self) -> int:
        return 3

    def offset(self) -> int:
        return 41


def test_the_service_skips_and_counts_poison_events_and_goes_on():
    service = IngressService(config("fail"), handle_signals=False)
    for raw in POISON:
        service._dispatch(Message(raw))
    invalid = service.metrics.events_invalid.labels("us-west-1")._value.get()
    assert invalid == len(POISON)
