"""Count, bytes and age each close level-0 segments as configured."""

from __future__ import annotations

import logging
import threading
import time

import pyarrow.compute as pc
from confluent_kafka import Producer

from egress.job import EgressJob
from tests.fixtures.egress import create_topic
from tests.fixtures.independent import assert_tiles, s3_segments, watermarks
from tests.fixtures.stack import SOURCE

AGE_SECONDS = 2
TRIGGER_SECONDS = 0.25
"""The tests' egress trigger interval (tests/fixtures/egress.py)."""


class _FirstBatch(logging.Handler):
    """Sets ``ended`` when the job logs its first completed batch."""

    def __init__(self) -> None:
        super().__init__()
        self.ended = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if str(record.msg).startswith("batch "):
            self.ended.set()


def _segments(local_stack, config, topic):
    return s3_segments(local_stack.s3(), config.bucket(SOURCE), "data", SOURCE, topic)


def test_count_closes_segments_of_exactly_max_messages_offsets(
    local_stack, egress_config, unique, spark
):
    topic = unique("count")
    create_topic(local_stack, topic, 1)
    producer = Producer({"bootstrap.servers": local_stack.bootstrap(SOURCE)})
    for i in range(350):
        producer.produce(topic, value=b"%d" % i, partition=0)
    producer.flush(30)
    config, _ = egress_config({topic: {"max_segment_messages": 100}})
    EgressJob(config, stop_at_end=True, spark=spark, handle_signals=False).run()
    ranges = [(s.start, s.end) for s in _segments(local_stack, config, topic)[0]]
    assert ranges == [(0, 99), (100, 199), (200, 299), (300, 349)]


def test_bytes_close_a_segment_with_the_record_that_reaches_max_bytes(
    local_stack, egress_config, unique, spark
):
    topic = unique("bytes")
    create_topic(local_stack, topic, 1)
    producer = Producer({"bootstrap.servers": local_stack.bootstrap(SOURCE)})
    for i in range(100):
        producer.produce(topic, key=b"%04d" % i, value=b"x" * 996, partition=0)  # 1000 bytes
    producer.flush(30)
    config, _ = egress_config({topic: {"max_segment_bytes": "10KiB"}})
    EgressJob(config, stop_at_end=True, spark=spark, handle_signals=False).run()
    segments = _segments(local_stack, config, topic)[0]
    assert_tiles(segments, 0, 99)
    # 1000-byte records against 10,240: the 11th record reaches the limit.
    assert [s.table.num_rows for s in segments[:-1]] == [11] * (len(segments) - 1)
    assert len(segments) == 10


def test_age_closes_a_trickle_while_an_idle_partition_writes_nothing(
    local_stack, egress_config, unique, spark, caplog
):
    topic = unique("age")
    create_topic(local_stack, topic, 2)
    config, _ = egress_config({topic: {"max_segment_age": f"{AGE_SECONDS}s"}})
    assert config.egress.trigger_interval == TRIGGER_SECONDS
    # The job runs in the main thread (as the CLI does: Spark's active session is
    # thread-local); a background thread trickles 4 records per second into partition 0.
    # The trickle starts once the first batch has ended: a record produced earlier waits
    # for the job's start-up, which no batch duration bounds.
    job = EgressJob(config, stop_at_end=False, spark=spark, handle_signals=False)
    produced: list[int] = []
    first_batch = _FirstBatch()
    logging.getLogger("egress.job").addHandler(first_batch)

    def trickle() -> None:
        producer = Producer({"bootstrap.servers": local_stack.bootstrap(SOURCE)})
        if not first_batch.ended.wait(120):
            job.request_stop()
            return
        started = time.monotonic()
        try:
            while time.monotonic() - started < 60:
                producer.produce(topic, value=b"%d" % len(produced), partition=0)
                producer.flush(10)
                produced.append(1)
                time.sleep(0.25)
                closed = _segments(local_stack, config, topic).get(0, [])
                if len(closed) >= 3 and len(produced) >= 40:
                    break
        finally:
            job.request_stop()

    producer_thread = threading.Thread(target=trickle)
    producer_thread.start()
    try:
        job.run()
    finally:
        logging.getLogger("egress.job").removeHandler(first_batch)
    producer_thread.join(60)
    assert first_batch.ended.is_set(), "the job completed no batch in 120 s"
    segments = _segments(local_stack, config, topic)
    assert 1 not in segments, "an idle partition must write nothing"
    closed = segments[0]
    assert len(closed) >= 3, "age should close several segments during the trickle"
    _, high = watermarks(local_stack.bootstrap(SOURCE), topic, 0)
    assert_tiles(closed, 0, closed[-1].end)
    assert closed[-1].end <= high - 1
    # A segment closes at the first planning once max_segment_age has passed since its
    # first record was seen. A record is seen at the planning after it was produced,
    # and plannings come a trigger interval apart or, when a batch takes longer, at its
    # end: so a segment's records span at most the age and twice the longest such wait
    # (a loaded machine's batches took 3.7 s here; half a second more for the clocks).
    longest_batch = max(
        r.args[2] for r in caplog.records if r.name == "egress.job" and r.msg.startswith("batch ")
    )
    most_span_ms = 1000 * (AGE_SECONDS + 2 * (longest_batch + TRIGGER_SECONDS) + 0.5)
    spans = [
        pc.max(s.table["timestamp"]).value - pc.min(s.table["timestamp"]).value for s in closed
    ]
    assert all(span <= most_span_ms for span in spans), (spans, most_span_ms, longest_batch)
