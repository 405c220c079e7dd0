"""Log ends asked by egress's long-lived catalog while its source broker is paused or
killed, and after.

A broker frozen (SIGSTOP) past its session with the controller is fenced when it wakes,
and its partitions' leader epochs rise; so they do when it restarts. The catalog's admin
client kept the epochs it had cached and sent them with every ListOffsets: the broker
answered FENCED_LEADER_EPOCH ("Leader epoch is older than broker epoch") each time, for
the whole 30 s the look-up asks again, the planning trigger failed and egress stopped
(seen in a chaos run pausing the source broker). Before the fix this test failed in both
cases with ``BrokerError: cannot read offsets of paused-… partition 0 in region us-east-1:
Broker: Leader epoch is older than broker epoch``. A refused look-up is now asked again
through a new client (:mod:`replicator.core.kafka.shared_admin`)."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time

import pytest
from confluent_kafka import Producer

from egress.catalog import SourceCatalog
from replicator.core.kafka.errors import BrokerError
from tests.fixtures.egress import round_robin_topic
from tests.fixtures.stack import SOURCE


def pause(local_stack, seconds: float) -> None:
    with local_stack.paused(f"kafka-{SOURCE}"):
        time.sleep(seconds)


def kill(local_stack, seconds: float) -> None:
    pid = local_stack.pid(f"kafka-{SOURCE}")
    os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)
    time.sleep(seconds)
    local_stack.stack.up()


@pytest.mark.parametrize("fault,seconds", [(pause, 11), (kill, 5)], ids=["paused", "killed"])
def test_log_ends_are_read_again_after_the_source_broker_was_stopped(
    local_stack, egress_config, unique, fault, seconds
):
    topic = unique("paused")
    round_robin_topic(local_stack, topic, 2, 10)
    config, _ = egress_config({topic: {}})
    catalog = SourceCatalog(config)
    tps = [(topic, 0), (topic, 1)]
    assert catalog.watermarks(tps) == {(topic, 0): (0, 5), (topic, 1): (0, 5)}
    stop = threading.Event()

    def ask() -> None:
        """Egress plans all along: its client is mid-request when the broker stops."""
        while not stop.is_set():
            with contextlib.suppress(BrokerError):  # the broker is away
                catalog.watermarks(tps)
            time.sleep(0.5)

    asker = threading.Thread(target=ask, daemon=True)
    asker.start()
    fault(local_stack, seconds)
    time.sleep(3)
    stop.set()
    asker.join()

    producer = Producer({"bootstrap.servers": local_stack.bootstrap(SOURCE)})
    for i in range(4):
        producer.produce(topic, value=b"w%d" % i, partition=0)
    producer.flush(60)
    assert catalog.watermarks(tps) == {(topic, 0): (0, 9), (topic, 1): (0, 5)}
