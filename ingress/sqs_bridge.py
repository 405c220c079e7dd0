"""S3 notifications from SQS onto the segment-events topic.

An SQS message is deleted only after Kafka acknowledged every event it holds. A message
that is not an S3 notification is left alone: SQS redelivers it and, after the queue's
``maxReceiveCount``, moves it to the dead-letter queue — never silently away.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError
from confluent_kafka import Producer

from ingress.metrics import IngressMetrics
from ingress.segment_events import parse_notification, partition_key
from ingress.sources import ConfiguredSources
from replicator.core.aws.clients import sqs_client
from replicator.core.config import Config, required
from replicator.core.faults import SQS_AFTER_ACK_BEFORE_DELETE, crash_point
from replicator.core.health import Heartbeat
from replicator.core.kafka.placement import slot_of

log = logging.getLogger(__name__)

MAX_BACKOFF = 30.0


class SqsBridge(threading.Thread):
    def __init__(self, config: Config, kafka: dict[str, Any], metrics: IngressMetrics) -> None:
        super().__init__(name="ingress-sqs", daemon=True)
        self.config = config
        self.ingress = required(config, "ingress")
        self.region = self.ingress.region
        self.metrics = metrics
        self._sources = ConfiguredSources(self.ingress)
        self._producer = Producer(
            {**kafka, "acks": "all", "enable.idempotence": True, "linger.ms": 5}
        )
        self._sqs = sqs_client(config, self.region)
        self._queue_url: str | None = None
        self._stopping = threading.Event()
        self.healthy = threading.Event()
        self.failure: BaseException | None = None
        """What ended the thread, if not a stop request (its supervisor starts another)."""
        self.heartbeat = Heartbeat("sqs-reader", self.ingress.stall_timeout)
        """Beats every turn of the loop: a receive (long poll of 1 s), a flush (at most
        30 s) or a back-off (at most 30 s) apart."""

    def stop(self) -> None:
        self._stopping.set()

    def run(self) -> None:
        try:
            self._pump()
        except Exception as exc:  # reported; the service starts a new reader
            self.failure = exc
            log.exception("the SQS notification reader died")
        finally:
            self._producer.flush(10)

    def _pump(self) -> None:
        backoff = 1.0
        while not self._stopping.is_set():
            self.heartbeat.beat()
            try:
                self.pump_once()
                backoff = 1.0
            except (BotoCoreError, ClientError) as exc:
                self.healthy.clear()
                log.warning(
                    "SQS queue %s unreachable, retrying in %.0fs: %s",
                    self.config.region(self.region).sqs_queue,
                    backoff,
                    exc,
                )
                self._stopping.wait(backoff)
                backoff = min(MAX_BACKOFF, backoff * 2)
            except BufferError as exc:
                log.warning("segment-events producer queue full: %s", exc)
                self._stopping.wait(backoff)

    def _url(self) -> str:
        if self._queue_url is None:
            name = self.config.region(self.region).sqs_queue
            assert name is not None
            self._queue_url = self._sqs.get_queue_url(QueueName=name)["QueueUrl"]
        return self._queue_url

    def pump_once(self, wait_seconds: int = 1) -> int:
        """Move one receive's worth of messages; returns how many were deleted."""
        url = self._url()
        response = self._sqs.receive_message(
            QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=wait_seconds
        )
        self.healthy.set()
        messages = response.get("Messages", [])
        if not messages:
            return 0
        self.metrics.sqs_received.labels(self.region).inc(len(messages))
        failures: list[str] = []
        done: list[Any] = []
        for message in messages:
            try:
                parsed = parse_notification(
                    message.get("Body", ""), self.config.s3.prefix, self._sources
                )
            except ValueError as exc:
                self.metrics.sqs_invalid.labels(self.region).inc()
                log.warning(
                    "SQS message %s is not an S3 notification (%s); leaving it for "
                    "the dead-letter queue",
                    message.get("MessageId"),
                    exc,
                )
                continue
            for source, event in parsed.events:
                self._producer.produce(
                    self.ingress.segment_events_topic,
                    key=partition_key(source).encode(),
                    value=event.to_json(),
                    partition=slot_of(source, self.ingress.segment_events_partitions),
                    on_delivery=lambda err, _msg: failures.append(str(err)) if err else None,
                )
            done.append({"Id": message["MessageId"], "ReceiptHandle": message["ReceiptHandle"]})
        remaining = self._producer.flush(30)
        if remaining or failures:
            log.warning(
                "segment events not acknowledged (%s); SQS will redeliver",
                failures[:1] or f"{remaining} pending",
            )
            return 0
        if done:
            crash_point(SQS_AFTER_ACK_BEFORE_DELETE)
            self._sqs.delete_message_batch(QueueUrl=url, Entries=done)
        return len(done)
