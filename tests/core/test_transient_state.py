"""A cluster's passing state (a broker that did not answer, a leader or coordinator on the
move) is told from a failure an operator must look at, by the Kafka code the error keeps
and its class, and a worker failing on one reports it as one warning line (issue 46).

The relay's first look-up of an upstream's ends goes through ``tail.watermarks`` too, so a
paused upstream reaches the worker as a BrokerError, a passing state, not as a raw client
exception logged with a traceback."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from relay.failover import UpstreamState
from relay.metrics import RelayMetrics
from relay.worker import RelayWorker
from replicator.core.config import parse_config, required
from replicator.core.errors import ConfigError, ReplicatorError
from replicator.core.filters import FilterChain
from replicator.core.kafka.errors import (
    AuthorizationError,
    BrokerError,
    CheckpointError,
    DestinationTopicError,
    KafkaAccessError,
    OwnershipLostError,
    RecordRefusedError,
    RecordTooLargeError,
    TransactionStillOpenError,
    transient_state,
)
from replicator.core.kafka.tail import watermarks
from replicator.core.kafka.testing import MemoryWriter
from replicator.core.workers import report_failure

NOT_ANSWERING = [
    KafkaError._TIMED_OUT,
    KafkaError._MSG_TIMED_OUT,
    KafkaError._ALL_BROKERS_DOWN,
    KafkaError._TRANSPORT,
    KafkaError.REQUEST_TIMED_OUT,
    KafkaError.NETWORK_EXCEPTION,
]
MOVING = [
    KafkaError.LEADER_NOT_AVAILABLE,
    KafkaError.NOT_LEADER_FOR_PARTITION,
    KafkaError.COORDINATOR_NOT_AVAILABLE,
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
    KafkaError.NOT_COORDINATOR,
    KafkaError._WAIT_COORD,
]
ACCESS_REFUSED = [
    KafkaError.TOPIC_AUTHORIZATION_FAILED,
    KafkaError.GROUP_AUTHORIZATION_FAILED,
    KafkaError.CLUSTER_AUTHORIZATION_FAILED,
    KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    KafkaError._AUTHENTICATION,
    KafkaError.SASL_AUTHENTICATION_FAILED,
    KafkaError._SSL,
]
LOOKED_AT = [
    KafkaError._UNKNOWN_PARTITION,  # but from a look-up: below
    KafkaError.UNKNOWN_TOPIC_OR_PART,
    KafkaError._UNKNOWN_TOPIC,
    KafkaError._FENCED,
    KafkaError.PRODUCER_FENCED,
    KafkaError.INVALID_PRODUCER_EPOCH,
    KafkaError.INVALID_RECORD,
    KafkaError.MSG_SIZE_TOO_LARGE,
    KafkaError._STATE,
    KafkaError._FATAL,
    KafkaError._PURGE_QUEUE,
    KafkaError._RESOLVE,
    KafkaError.OFFSET_OUT_OF_RANGE,
    KafkaError.NOT_ENOUGH_REPLICAS,
]


def name(code: int) -> str:
    return KafkaError(code).name()


def failed(code: int, *, retriable: bool = False) -> BrokerError:
    return BrokerError.from_kafka("producing to t", KafkaError(code, "x", retriable=retriable))


@pytest.mark.parametrize("code", NOT_ANSWERING, ids=name)
def test_a_broker_that_did_not_answer_is_a_passing_state(code):
    assert transient_state(failed(code)) == "a broker did not answer"


@pytest.mark.parametrize("code", MOVING, ids=name)
def test_a_leader_or_coordinator_on_the_move_is_a_passing_state(code):
    state = transient_state(failed(code))
    assert state in ("a partition leader was moving", "a coordinator was moving"), state


def test_a_code_the_client_flags_retriable_is_a_passing_state():
    error = failed(KafkaError.NOT_ENOUGH_REPLICAS, retriable=True)
    assert transient_state(error) == "the cluster was busy (a retriable error)"
    assert transient_state(failed(KafkaError.NOT_ENOUGH_REPLICAS)) is None


def test_a_transaction_still_open_is_a_passing_state():
    error = TransactionStillOpenError("t partition 0: a transaction has stayed open for 70 s")
    assert transient_state(error) == "a transaction was still open"


@pytest.mark.parametrize("code", LOOKED_AT, ids=name)
def test_other_codes_are_to_be_looked_at(code):
    assert transient_state(failed(code)) is None


@pytest.mark.parametrize("code", ACCESS_REFUSED, ids=name)
def test_a_refused_access_is_never_passing_even_flagged_retriable(code):
    assert transient_state(failed(code)) is None
    assert transient_state(failed(code, retriable=True)) is None


@pytest.mark.parametrize(
    "kind",
    [
        OwnershipLostError,
        RecordRefusedError,
        RecordTooLargeError,
        AuthorizationError,
        KafkaAccessError,
        DestinationTopicError,
    ],
)
def test_errors_about_the_replicator_are_never_passing_whatever_their_code(kind):
    """Fenced, a record refused, an ACL or a credential missing, a topic that cannot grow:
    each halts, stops the service or re-opens a writer on purpose."""
    for code in (KafkaError._TIMED_OUT, KafkaError.NOT_COORDINATOR):
        assert transient_state(kind("x", code=code, retriable=True)) is None


@pytest.mark.parametrize(
    "error",
    [
        BrokerError("timed out reading t partition 0"),  # a wait of our own: no code
        CheckpointError("cp partition 1 offset 7: not a checkpoint"),
        ReplicatorError("x"),
        ConfigError("c.toml", [("relay", "missing")]),
        KafkaException(KafkaError(KafkaError._TIMED_OUT)),  # not ours: a bug to fix
        ValueError("x"),
    ],
    ids=lambda e: type(e).__name__,
)
def test_anything_else_is_to_be_looked_at(error):
    assert transient_state(error) is None


class Unanswered:
    """A consumer whose watermark look-ups fail with ``code``, as the client's do."""

    def __init__(self, code: int) -> None:
        self.code = code

    def get_watermark_offsets(self, tp: Any, timeout: float) -> tuple[int, int]:
        raise KafkaException(KafkaError(self.code, "Failed to get watermark offsets: x"))

    def close(self) -> None:
        pass


def test_an_unknown_partition_is_passing_only_when_a_look_up_of_its_ends_says_it():
    """A paused broker makes a look-up of a partition's ends fail with
    ``_UNKNOWN_PARTITION`` (the client has no metadata of it yet); a record produced to a
    partition the client's metadata lacks fails with the same code for good."""
    tp = TopicPartition("t", 0)
    with pytest.raises(BrokerError) as looked_up:
        watermarks(Unanswered(KafkaError._UNKNOWN_PARTITION), tp, "the log end")  # type: ignore[arg-type]
    assert looked_up.value.code == KafkaError._UNKNOWN_PARTITION
    assert transient_state(looked_up.value) == "a broker did not answer"
    with pytest.raises(BrokerError) as produced:
        raise failed(KafkaError._UNKNOWN_PARTITION)
    assert transient_state(produced.value) is None
    assert transient_state(failed(KafkaError._UNKNOWN_PARTITION)) is None  # never raised


def test_a_passing_failure_is_one_warning_saying_it_will_be_retried(caplog):
    log = logging.getLogger("tests.worker")
    caplog.set_level(logging.INFO)
    report_failure(log, "ingress-t-0", failed(KafkaError._TIMED_OUT), traceback=True)
    [line] = caplog.records
    assert line.levelno == logging.WARNING and not line.exc_info
    assert line.getMessage() == (
        "ingress-t-0 failed while a broker did not answer; it will be retried: producing to t: x"
    )


def test_other_failures_stay_errors_with_the_traceback_the_worker_asks_for(caplog):
    log = logging.getLogger("tests.worker")
    refused = failed(KafkaError.TOPIC_AUTHORIZATION_FAILED)
    for error, traceback in ((refused, False), (ValueError("bug"), True)):
        caplog.clear()
        try:
            raise error
        except Exception as exc:
            report_failure(log, "ingress-t-0", exc, traceback=traceback)
        [line] = caplog.records
        assert line.levelno == logging.ERROR
        assert line.getMessage() == f"ingress-t-0 failed: {error}"
        assert bool(line.exc_info) is traceback


RELAY = """
[regions.us-east-1]
kafka.bootstrap_servers = "127.0.0.1:1"
[regions.west]
kafka.bootstrap_servers = "127.0.0.1:1"
[relay]
sources = ["us-east-1"]
destination = "west"
[[relay.topics]]
source_topic = "orders"
"""


def test_a_relay_worker_whose_upstream_does_not_answer_its_first_look_up_warns_once(
    monkeypatch, caplog
):
    """Nothing relayed yet: the worker asks the upstream where the partition starts. A
    paused upstream fails that look-up with the client's code; the worker fails (its pool
    restarts it) with one warning line, no traceback."""
    config = parse_config(RELAY, "relay.toml", {})
    worker = RelayWorker(
        config,
        required(config, "relay").topics[0],
        0,
        RelayMetrics(),
        lambda: {"us-east-1": UpstreamState(True)},
        open_writer=lambda _target: MemoryWriter(),
        filters=FilterChain([]),
    )
    unanswered = Unanswered(KafkaError._ALL_BROKERS_DOWN)
    monkeypatch.setattr(worker, "_lookup_consumer", lambda upstream: unanswered)
    worker.run()  # in this thread: it ends at the failure
    assert worker.status.state == "failed", worker.status
    assert isinstance(worker.failure, BrokerError), worker.failure
    assert worker.failure.code == KafkaError._ALL_BROKERS_DOWN
    [line] = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert line.levelno == logging.WARNING and not line.exc_info, line.getMessage()
    assert line.getMessage() == (
        "relay-orders-0 failed while a broker did not answer; it will be retried: asking "
        "upstream us-east-1 for the log start and end of orders partition 0: Failed to get "
        "watermark offsets: x"
    )
