"""librdkafka's lines through Python logging: repeats of the same failure are let through
once per interval with a count, whichever client reports them."""

from __future__ import annotations

import logging

from confluent_kafka import Producer

from infra.ports import free_port
from replicator.core.config import KafkaConfig
from replicator.core.kafka.client_logs import CLIENT_LOGGER, RepeatFilter, repeat_kind
from replicator.core.kafka.clients import client_config

REFUSED = (
    "FAIL [rdkafka#producer-{n}] [thrd:127.0.0.1:1/bootstrap]: 127.0.0.1:1/bootstrap: "
    "Connect to ipv4#127.0.0.1:1 failed: Connection refused (after {ms}ms in state CONNECT)"
)


def record(message: str) -> logging.LogRecord:
    return logging.LogRecord(CLIENT_LOGGER, logging.ERROR, "", 0, message, (), None)


def test_the_kind_of_a_line_leaves_out_the_client_and_timings():
    assert repeat_kind(REFUSED.format(n=1, ms=0)) == repeat_kind(REFUSED.format(n=7, ms=12))
    assert "Connection refused" in repeat_kind(REFUSED.format(n=1, ms=0))
    other = REFUSED.format(n=1, ms=0).replace("127.0.0.1:1", "127.0.0.1:2")
    assert repeat_kind(other) != repeat_kind(REFUSED.format(n=1, ms=0))


def test_repeats_are_let_through_once_per_interval_with_a_count():
    now = [0.0]
    repeats = RepeatFilter(60.0, clock=lambda: now[0])
    passed = []
    for second in range(0, 130):
        now[0] = float(second)
        for n in (1, 2):  # two clients failing alike
            line = record(REFUSED.format(n=n, ms=second))
            if repeats.filter(line):
                passed.append((second, line.getMessage()))
    assert [s for s, _ in passed] == [0, 60, 120]
    assert "and 119 more like it in 60 s" in passed[1][1]
    assert "and 119 more like it" in passed[2][1]
    assert "more like it" not in passed[0][1]


def test_a_client_logs_through_python_logging(caplog):
    # A port nothing listens on, and no other test's: the filter remembers kinds.
    nowhere = f"127.0.0.1:{free_port()}"
    producer = Producer(client_config(KafkaConfig(bootstrap_servers=nowhere)))
    with caplog.at_level(logging.INFO, logger=CLIENT_LOGGER):
        producer.poll(1.5)
    refused = [r for r in caplog.records if r.name == CLIENT_LOGGER]
    assert refused, "no librdkafka line reached Python logging"
    assert len(refused) == 1, [r.getMessage() for r in refused]  # the repeats were held
    assert "Connection refused" in refused[0].getMessage()
