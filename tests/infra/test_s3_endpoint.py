"""The local S3 and SQS endpoint (:mod:`infra.s3_endpoint`): the cached dispatch sends
every request to the service moto's own dispatch does, and asks moto once per host."""

from __future__ import annotations

import io
from typing import Any

import pytest
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
from moto.s3.models import FakeKey

from infra.s3_endpoint import CachedDispatch, keep_objects_in_memory
from infra.stack import StackSpec
from replicator.core.config import load_config
from tests.fixtures.stack import write_stack_config

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


def test_the_endpoint_keeps_upload_parts_and_objects_in_memory(monkeypatch):
    """moto's default moved every part and object over 5 MiB to a temporary file, copying
    it again: a third of the endpoint's CPU on the two cores the stages share."""
    variable = "MOTO_S3_DEFAULT_KEY_BUFFER_SIZE"
    environ: dict[str, str] = {}
    keep_objects_in_memory(environ)
    # What the endpoint's process sees, set so that it is undone after the test.
    monkeypatch.setenv(variable, environ[variable])
    part = FakeKey("1", b"x" * 16 * 2**20, account_id="123456789012", region_name="us-east-1")
    try:
        assert isinstance(part._value_buffer._file, io.BytesIO)
    finally:
        part.dispose()


def test_an_operator_choice_of_the_buffer_wins():
    environ = {"MOTO_S3_DEFAULT_KEY_BUFFER_SIZE": "1024"}
    keep_objects_in_memory(environ)
    assert environ == {"MOTO_S3_DEFAULT_KEY_BUFFER_SIZE": "1024"}
