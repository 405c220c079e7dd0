"""The local S3 and SQS endpoint (:mod:`infra.s3_endpoint`): the cached dispatch sends
every request to the service moto's own dispatch does, and asks moto once per host."""

from __future__ import annotations

import hashlib
import io
import os
from typing import Any

import pytest
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
from moto.s3.exceptions import EntityTooSmall, InvalidPart, MalformedXML
from moto.s3.models import FakeKey, FakeMultipart
from requests.structures import CaseInsensitiveDict

from infra.s3_endpoint import (
    CachedDispatch,
    complete_copying_once,
    exactly_sized_value,
    keep_objects_in_memory,
)
from infra.stack import StackSpec
from replicator.core.config import load_config
from tests.fixtures.stack import write_stack_config

MOTO_COMPLETE = FakeMultipart.complete
"""moto's own completion (this process never installs the endpoint's)."""

HOSTS = [
    None,
    "moto_api",
    "s3",
    "s3.us-east-1.amazonaws.com",
    "s3.us-west-1.amazonaws.com",
    "sqs.us-west-1.amazonaws.com",
    "sts.us-east-1.amazonaws.com",
    "example.invalid",
]


@pytest.mark.parametrize("host", HOSTS)
def test_each_host_goes_to_the_service_moto_would_choose(host):
    assert CachedDispatch(create_backend_app).get_backend_for_host(host) == (
        DomainDispatcherApplication(create_backend_app).get_backend_for_host(host)
    )


def test_moto_is_asked_once_per_host(monkeypatch):
    asked: list[str | None] = []
    original = DomainDispatcherApplication.get_backend_for_host

    def counting(self: Any, host: str | None) -> Any:
        asked.append(host)
        return original(self, host)

    monkeypatch.setattr(DomainDispatcherApplication, "get_backend_for_host", counting)
    dispatch = CachedDispatch(create_backend_app)
    for _ in range(3):
        for host in ("s3.us-east-1.amazonaws.com", "sqs.us-west-1.amazonaws.com"):
            dispatch.get_backend_for_host(host)
    assert asked == ["s3.us-east-1.amazonaws.com", "sqs.us-west-1.amazonaws.com"]


def test_the_stack_starts_the_endpoint_with_the_cached_dispatch(tmp_path):
    config = load_config(write_stack_config(tmp_path / "stack.toml"))
    spec = StackSpec.from_config(config, tmp_path / "state")
    [s3] = [service for service in spec.services() if service.name == "s3"]
    assert s3.argv[1:3] == ("-m", "infra.s3_endpoint")


@pytest.fixture
def objects_in_memory(monkeypatch):
    """The environment the endpoint's process sees, set so that it is undone after the test."""
    environ: dict[str, str] = {}
    keep_objects_in_memory(environ)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)


def test_the_endpoint_keeps_upload_parts_and_objects_in_memory(objects_in_memory):
    """moto's default moved every part and object over 5 MiB to a temporary file, copying
    it again: a third of the endpoint's CPU on the two cores the stages share."""
    part = FakeKey("1", b"x" * 16 * 2**20, account_id="123456789012", region_name="us-east-1")
    try:
        assert isinstance(part._value_buffer._file, io.BytesIO)
    finally:
        part.dispose()


def test_an_operator_choice_of_the_buffer_wins():
    environ = {"MOTO_S3_DEFAULT_KEY_BUFFER_SIZE": "1024"}
    keep_objects_in_memory(environ)
    assert environ == {"MOTO_S3_DEFAULT_KEY_BUFFER_SIZE": "1024"}


ACCOUNT_ID = "123456789012"
MIN_PART = 5 * 2**20


@pytest.fixture
def in_memory(objects_in_memory, monkeypatch):
    """Objects in memory and stored as the endpoint stores them, undone after the test."""
    monkeypatch.setattr(FakeKey, "value", exactly_sized_value)


def test_reading_an_object_hands_out_its_stored_bytes_not_a_copy(in_memory):
    """moto copied a whole object for every GET, a ranged one included: restore reads a
    segment a row group at a time, and each read copied the 200 MiB segment first."""
    key = FakeKey("k", b"a" * 2**20, account_id=ACCOUNT_ID, region_name="us-east-1")
    try:
        first = key.value
        assert first is key.value
        key.value = b"b" * 3  # type: ignore[misc]  # overwritten: the new bytes, not the old
        assert key.value == b"bbb"
        assert key.value is key.value
    finally:
        key.dispose()


def _multipart(sizes: list[int], metadata: dict[str, str] | None = None) -> FakeMultipart:
    multipart = FakeMultipart(
        "segment",
        CaseInsensitiveDict(metadata or {}),
        account_id=ACCOUNT_ID,
        region_name="us-east-1",
    )
    for number, size in enumerate(sizes, start=1):
        multipart.set_part(number, os.urandom(size))
    return multipart


def _listed(multipart: FakeMultipart) -> list[tuple[int, str]]:
    return [(number, multipart.parts[number].etag) for number in multipart.partlist]


@pytest.mark.parametrize(
    "metadata",
    [
        {},  # moto's default: a full-object CRC64NVME (a CRC32 without awscrt)
        {"x-amz-checksum-algorithm": "CRC32"},  # composite: a checksum of the parts'
        {"x-amz-checksum-algorithm": "SHA256"},
        {"x-amz-checksum-algorithm": "CRC32", "x-amz-checksum-type": "FULL_OBJECT"},
    ],
)
def test_a_completion_copying_once_returns_what_motos_returns(in_memory, metadata):
    multipart = _multipart([MIN_PART, MIN_PART, 1000], metadata)
    try:
        ours = complete_copying_once(multipart, iter(_listed(multipart)))
        motos = MOTO_COMPLETE(multipart, iter(_listed(multipart)))
        parts = [multipart.parts[number].value for number in multipart.partlist]
    finally:
        multipart.dispose()
    assert ours == motos
    value, etag, _ = ours
    part_md5s = b"".join(hashlib.md5(part).digest() for part in parts)
    assert etag == f"{hashlib.md5(part_md5s).hexdigest()}-3"
    assert value == b"".join(parts)


@pytest.mark.parametrize(
    ("sizes", "listing", "refusal"),
    [
        ([MIN_PART, 10], lambda listed: [listed[0], (2, f'"{"0" * 32}"')], InvalidPart),
        ([MIN_PART, 10], lambda listed: [listed[0], (3, listed[1][1])], InvalidPart),
        ([10, MIN_PART], lambda listed: listed, EntityTooSmall),
        ([MIN_PART], lambda listed: [], MalformedXML),
    ],
    ids=["wrong-etag", "missing-part", "small-part-not-last", "no-parts"],
)
def test_a_completion_copying_once_refuses_what_moto_refuses(in_memory, sizes, listing, refusal):
    multipart = _multipart(sizes)
    try:
        for complete in (complete_copying_once, MOTO_COMPLETE):
            with pytest.raises(refusal):
                complete(multipart, iter(listing(_listed(multipart))))
    finally:
        multipart.dispose()
