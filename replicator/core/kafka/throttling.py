"""Time the destination's brokers held the writers back: Kafka client quotas, seen from
the client.

Why: the project bounds what ingress, the relay and restore write into a live cluster with
the broker's own quotas (``producer_byte_rate`` on each service's user, see
docs/operations/throttling.md), not a limiter of its own. A broker over a client's quota answers its
produce requests with a throttle time and mutes the connection for that long (KIP-219);
librdkafka reports each throttle time through ``throttle_cb``, served by the producer's
``poll`` and ``flush``. Every exactly-once writer (:mod:`replicator.core.kafka.writer`)
adds what it is told here, by the kind of service it writes for, so each service's
metrics read one figure for the whole process (``replicator_<service>_throttled_seconds``)
without the services handing callbacks around; and the writer records in each checkpoint
how long the brokers throttled its last transaction with records, which ``replicator
status`` reads.

A sum of throttle times is the time the brokers kept a writer from sending: over a
minute, several writers throttled at once may add up to more than a minute.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector


class ThrottleTally:
    """Seconds of broker throttling per writer kind, in this process (thread-safe: a
    callback runs on the thread that polls its producer)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seconds: dict[str, float] = {}

    def add(self, kind: str, seconds: float) -> None:
        if seconds <= 0:
            return
        with self._lock:
            self._seconds[kind] = self._seconds.get(kind, 0.0) + seconds

    def seconds(self, kind: str) -> float:
        with self._lock:
            return self._seconds.get(kind, 0.0)


THROTTLED = ThrottleTally()
"""The process's tally: every writer adds to it."""


def throttle_seconds(event: Any) -> float:
    """The throttle time of librdkafka's ``ThrottleEvent`` in seconds (0 when the broker
    stopped throttling). Pure."""
    seconds = getattr(event, "throttle_time", 0.0)
    return float(seconds) if seconds and seconds > 0 else 0.0


class ThrottleCollector(Collector):
    """Exposes the tally of one writer kind as ``replicator_<kind>_throttled_seconds``
    (a counter: ``_total`` on the wire), read at each scrape."""

    def __init__(self, kind: str, tally: ThrottleTally = THROTTLED) -> None:
        self.kind = kind
        self.tally = tally

    def collect(self) -> Iterator[CounterMetricFamily]:
        family = CounterMetricFamily(
            f"replicator_{self.kind}_throttled_seconds",
            "Seconds the destination's brokers throttled this process's writers (a client "
            "quota such as producer_byte_rate on the service's user), summed over writers",
        )
        family.add_metric([], self.tally.seconds(self.kind))
        yield family
