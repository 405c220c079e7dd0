"""The multipart writer's parts in flight: bounded, numbered in order, failures surfaced,
and an abort that comes after every part on its way. A recording client stands in for S3
here to hold parts back at will; tests/core/test_segment_store.py checks the same writer
against the local S3 (the object's bytes and the ETag S3 computes)."""

from __future__ import annotations

import hashlib
import io
import threading
from typing import Any

import pytest
from botocore.exceptions import ClientError
from hypothesis import given, settings
from hypothesis import strategies as st

from replicator.core.aws.errors import StorageError
from replicator.core.aws.s3_streams import S3MultipartWriter, upload_stream

PART = 1024
WAIT = 10.0


class RecordingS3:
    """Records the calls; ``upload_part`` waits until the test releases its part."""

    def __init__(self, fail_part: int | None = None) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.lock = threading.Lock()
        self.sending = 0
        self.most_at_once = 0
        self.release: dict[int, threading.Event] = {}
        self.arrived: dict[int, threading.Event] = {}
        self.fail_part = fail_part
        self.bodies: dict[int, bytes] = {}

    def part_gate(self, number: int) -> threading.Event:
        with self.lock:
            return self.release.setdefault(number, threading.Event())

    def arrival(self, number: int) -> threading.Event:
        with self.lock:
            return self.arrived.setdefault(number, threading.Event())

    def create_multipart_upload(self, **kwargs: Any) -> dict[str, str]:
        self.calls.append(("create", kwargs["Key"]))
        return {"UploadId": "u1"}

    def upload_part(self, **kwargs: Any) -> dict[str, str]:
        number = kwargs["PartNumber"]
        with self.lock:
            self.sending += 1
            self.most_at_once = max(self.most_at_once, self.sending)
        self.arrival(number).set()
        try:
            assert self.part_gate(number).wait(WAIT), f"part {number} never released"
            if number == self.fail_part:
                raise ClientError(
                    {
                        "Error": {
                            "Code": "RequestTimeout",
                            "Message": f"part {number} lost on its way",
                        }
                    },
                    "UploadPart",
                )
            self.bodies[number] = kwargs["Body"]
            with self.lock:
                self.calls.append(("part", number))
            return {"ETag": f'"{hashlib.md5(kwargs["Body"]).hexdigest()}"'}
        finally:
            with self.lock:
                self.sending -= 1

    def complete_multipart_upload(self, **kwargs: Any) -> dict[str, str]:
        self.calls.append(
            ("complete", [p["PartNumber"] for p in kwargs["MultipartUpload"]["Parts"]])
        )
        return {}

    def abort_multipart_upload(self, **kwargs: Any) -> dict[str, str]:
        self.calls.append(("abort", kwargs["UploadId"]))
        return {}


def writer_of(client: RecordingS3, in_flight: int = 2) -> S3MultipartWriter:
    return S3MultipartWriter(client, "b", "k", PART, {}, parts_in_flight=in_flight)  # type: ignore[arg-type]


def body(parts: float) -> bytes:
    return bytes(i % 251 for i in range(int(parts * PART)))


def test_parts_go_out_at_most_in_flight_at_once_and_complete_in_order():
    client = RecordingS3()
    writer = writer_of(client, in_flight=2)
    data = body(5.5)
    filling = threading.Thread(target=writer.write, args=(data,))
    filling.start()
    assert client.arrival(1).wait(WAIT) and client.arrival(2).wait(WAIT)
    filling.join(0.3)
    assert filling.is_alive()  # a third part waits for a free place, not a third thread
    assert not client.arrival(3).is_set()
    for number in (2, 1, 3, 4, 5, 6):  # the parts may end in any order
        client.part_gate(number).set()
    filling.join(WAIT)
    uploaded = writer.complete()
    assert client.most_at_once == 2
    assert client.calls[-1] == ("complete", [1, 2, 3, 4, 5, 6])
    assert b"".join(client.bodies[n] for n in range(1, 7)) == data
    digests = b"".join(hashlib.md5(client.bodies[n]).digest() for n in range(1, 7))
    assert uploaded.md5_etag == f"{hashlib.md5(digests).hexdigest()}-6"
    assert uploaded.size == len(data)


def test_a_failed_part_fails_the_upload_and_the_abort_comes_after_the_parts_on_their_way():
    client = RecordingS3(fail_part=1)
    writer = writer_of(client, in_flight=2)
    client.part_gate(1).set()
    filling = threading.Thread(target=writer.write, args=(body(2),))
    filling.start()
    assert client.arrival(2).wait(WAIT)
    filling.join(WAIT)
    with pytest.raises(StorageError, match="lost on its way"):
        writer.complete()  # the oldest part failed: complete waits for it first
    releaser = threading.Timer(0.3, client.part_gate(2).set)
    releaser.start()
    writer.abort()  # waits for part 2, still on its way, before aborting
    assert [c for c in client.calls if c[0] in ("part", "abort", "complete")] == [
        ("part", 2),
        ("abort", "u1"),
    ]


def test_a_failed_part_fails_the_next_write_once_the_places_are_taken():
    client = RecordingS3(fail_part=1)
    for number in (1, 2):
        client.part_gate(number).set()
    writer = writer_of(client, in_flight=1)
    with pytest.raises(StorageError, match="part 1 lost"):
        writer.write(body(2))
    writer.abort()
    assert ("complete", [1, 2]) not in client.calls and client.calls[-1] == ("abort", "u1")


def test_a_stream_smaller_than_a_part_is_one_put_without_threads():
    class OnePut(RecordingS3):
        def put_object(self, **kwargs: Any) -> dict[str, str]:
            self.calls.append(("put", len(kwargs["Body"])))
            return {}

    client = OnePut()
    writer = writer_of(client)
    writer.write(body(0.5))
    uploaded = writer.complete()
    assert client.calls == [("put", PART // 2)]
    assert uploaded.md5_etag == hashlib.md5(body(0.5)).hexdigest()


class OpenGates(RecordingS3):
    """Every part goes through at once; a single PUT is kept as part 1."""

    def part_gate(self, number: int) -> threading.Event:
        gate = super().part_gate(number)
        gate.set()
        return gate

    def put_object(self, **kwargs: Any) -> dict[str, str]:
        self.bodies[1] = kwargs["Body"]
        return {}


@settings(max_examples=200, deadline=None)
@given(
    writes=st.lists(
        st.tuples(
            st.one_of(st.sampled_from([PART, 2 * PART]), st.integers(0, 3 * PART + 7)),
            st.sampled_from(["bytes", "bytearray", "view"]),
        ),
        max_size=12,
    )
)
def test_the_parts_hold_the_bytes_written_in_order_whatever_the_writes(
    writes: list[tuple[int, str]],
) -> None:
    """Writes of any size and buffer type, at or off a part's boundary: every part but the
    last is a whole part, and the parts joined are the bytes written."""
    client = OpenGates()
    writer = writer_of(client)
    written = bytearray()
    for number, (size, kind) in enumerate(writes):
        data = bytes((number * 7 + i) % 256 for i in range(size))
        written += data
        as_written = {"bytes": data, "bytearray": bytearray(data), "view": memoryview(data)}
        writer.write(as_written[kind])
    uploaded = writer.complete()
    parts = [client.bodies[n] for n in sorted(client.bodies)]
    assert b"".join(parts) == written
    assert all(len(part) == PART for part in parts[:-1])
    assert uploaded.size == len(written)


def test_a_whole_part_of_bytes_is_sent_as_it_is_and_a_mutable_buffer_is_copied():
    """No copy of an immutable part written at a boundary (a spooled segment read back a
    part at a time); a bytearray changed after the write does not change what is sent."""
    client = OpenGates()
    writer = writer_of(client)
    first = body(1)
    writer.write(first)
    second = bytearray(body(1))
    writer.write(second)
    second[:] = bytes(PART)  # the caller reuses its buffer
    uploaded = writer.complete()
    assert client.bodies[1] is first
    assert client.bodies[2] == body(1)
    assert uploaded.size == 2 * PART
    digests = hashlib.md5(body(1)).digest() * 2
    assert uploaded.md5_etag == f"{hashlib.md5(digests).hexdigest()}-2"


class FailingRead(io.BytesIO):
    """A spool whose second read fails (a disk error while the segment is read back)."""

    reads = 0

    def read(self, size: int | None = -1) -> bytes:
        self.reads += 1
        if self.reads == 2:
            raise OSError("read error on the spool")
        return super().read(size)


def test_uploading_a_stream_sends_it_part_by_part_and_completes():
    client = OpenGates()
    data = body(2.5)
    uploaded = upload_stream(io.BytesIO(data), writer_of(client))
    assert [len(client.bodies[n]) for n in (1, 2, 3)] == [PART, PART, PART // 2]
    assert b"".join(client.bodies[n] for n in (1, 2, 3)) == data
    assert client.calls[-1] == ("complete", [1, 2, 3]) and uploaded.size == len(data)


@pytest.mark.parametrize("failing", ["read", "part"])
def test_an_upload_of_a_stream_that_fails_is_aborted_and_the_failure_raised(failing: str):
    client = OpenGates(fail_part=1 if failing == "part" else None)
    stream = FailingRead(body(3)) if failing == "read" else io.BytesIO(body(3))
    raised = OSError if failing == "read" else StorageError
    with pytest.raises(raised):
        upload_stream(stream, writer_of(client, in_flight=1))
    assert client.calls[-1] == ("abort", "u1")
    assert not [c for c in client.calls if c[0] == "complete"]
