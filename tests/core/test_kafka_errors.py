"""Kafka errors keep their code, and the writer tells fencing from other failures."""

from collections.abc import Callable

import pyarrow as pa
import pytest
from confluent_kafka import KafkaError, KafkaException

from replicator.core.kafka.checkpoints import CheckpointStore, WriteTarget
from replicator.core.kafka.errors import BrokerError, OwnershipLostError
from replicator.core.kafka.provenance import SourcePartition
from replicator.core.kafka.writer import FENCING_CODES, PartitionWriter
from tests.fixtures.ingress import segment_batch


def test_broker_error_keeps_the_kafka_code_and_retriability():
    error = BrokerError.from_kafka(
        "reading t partition 0", KafkaError(KafkaError._TRANSPORT, "down", retriable=True)
    )
    assert error.code == KafkaError._TRANSPORT
    assert error.retriable
    assert str(error) == "reading t partition 0: down"
    assert BrokerError("timed out").code is None


def raising(code: int) -> Callable[[], None]:
    def action() -> None:
        raise KafkaException(KafkaError(code, "from the broker"))

    return action


@pytest.mark.parametrize("code", sorted(FENCING_CODES))
def test_the_writer_reports_fencing_as_lost_ownership_with_its_code(code):
    kafka = {"bootstrap.servers": "127.0.0.1:1"}  # never contacted
    target = WriteTarget(SourcePartition("us-east-1", "t", 0), "t.copy", 0)
    writer = PartitionWriter(kafka, "g", target, CheckpointStore(kafka, "cp", 1), kind="ingress")
    with pytest.raises(OwnershipLostError) as lost:
        writer._call(raising(code))
    assert lost.value.code == code
    with pytest.raises(BrokerError) as other:
        writer._call(raising(KafkaError._TIMED_OUT))
    assert type(other.value) is BrokerError and other.value.code == KafkaError._TIMED_OUT


class FencedProducer:
    """A producer whose transaction the broker fenced: it hears of it from produce."""

    def begin_transaction(self) -> None:
        pass

    def produce(self, *args: object, **kwargs: object) -> None:
        raise KafkaException(KafkaError(KafkaError._FENCED, "fenced by a newer instance"))

    def poll(self, timeout: float) -> int:
        return 0


def writer_with(producer: object) -> PartitionWriter:
    """A writer whose producer is ``producer`` (its broker is never contacted)."""
    kafka = {"bootstrap.servers": "127.0.0.1:1"}
    target = WriteTarget(SourcePartition("us-east-1", "t", 0), "t.copy", 0)
    writer = PartitionWriter(kafka, "g", target, CheckpointStore(kafka, "cp", 1), kind="ingress")
    writer._producer = producer  # type: ignore[assignment]
    writer._columns = None  # records through the stand-in's produce, not the C producer
    return writer


def test_fencing_reported_by_produce_is_lost_ownership_too():
    writer = writer_with(FencedProducer())
    with pytest.raises(OwnershipLostError) as lost:
        writer.write(pa.Table.from_batches([segment_batch(0, 3)]))
    assert lost.value.code == KafkaError._FENCED


class FencedOnDeliveryProducer:
    """A producer whose records the broker refused as fenced: it hears of it from the
    delivery reports that ``poll`` and ``flush`` serve."""

    def __init__(self) -> None:
        self.callbacks: list[Callable[..., None]] = []

    def begin_transaction(self) -> None:
        pass

    def produce(  # confluent-kafka's signature: the writer passes every argument by position
        self,
        topic: str,
        value: object = None,
        key: object = None,
        partition: int = -1,
        on_delivery: Callable[..., None] | None = None,
        callback: Callable[..., None] | None = None,
        timestamp: int = 0,
        headers: object = None,
    ) -> None:
        if on_delivery is not None:
            self.callbacks.append(on_delivery)

    def poll(self, timeout: float) -> int:
        return 0

    def flush(self, timeout: float) -> int:
        error = KafkaError(KafkaError.PRODUCER_FENCED, "fenced by a newer instance")
        for callback in self.callbacks:
            callback(error, None)
        self.callbacks.clear()
        return 0


def test_fencing_reported_by_a_delivery_is_lost_ownership_too():
    writer = writer_with(FencedOnDeliveryProducer())
    writer.write(pa.Table.from_batches([segment_batch(0, 3)]))
    with pytest.raises(OwnershipLostError) as lost:
        writer.commit(3)
    assert lost.value.code == KafkaError.PRODUCER_FENCED
