"""boto3 clients for one region's bucket and queue, and translation of their failures into
:class:`StorageError` with the bucket and key named.

Clients are created where they are used, once per process: boto3 clients are not
picklable and not meant to be shared across processes.

``REPLICATOR_AWS_REQUEST_LOG=<file>`` makes every client of every process that inherits it
(Spark's Python workers included) append one line per HTTP request it sends, retries
included: ``<service> <operation>``. ``make bench`` prices a stage with it; unset, it
costs an environment look-up per request.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, cast

import boto3
from botocore.config import Config as BotoConfig
from botocore.exceptions import BotoCoreError, ClientError

from replicator.core.aws.errors import ObjectNotFoundError, StorageError
from replicator.core.config import Config

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_sqs import SQSClient


_BOTO_CONFIG = BotoConfig(
    retries={"max_attempts": 8, "mode": "standard"},
    connect_timeout=5,
    read_timeout=60,
    # Plain addressing so that S3-compatible endpoints and the local stack work alike.
    s3={"addressing_style": "path"},
    # One client serves every thread of a process: ingress's workers list and read at
    # once (at 512 partitions a pool of 10, botocore's default, discarded connections
    # and logged it for each).
    max_pool_connections=64,
    # Every upload carries its own Content-MD5, which S3 checks (and the request's
    # signature covers): botocore's default added a CRC32 of each body as well, computed
    # by the client and checked again by the endpoint, for nothing the MD5 does not
    # already guard (11 ms of the client's CPU a 16 MiB part, a third of the call's).
    request_checksum_calculation="when_required",
)


_SQS_CONFIG = _BOTO_CONFIG.merge(
    BotoConfig(retries={"max_attempts": 3, "mode": "standard"}, read_timeout=25)
)
"""Receives long-poll for at most a few seconds: a reply slower than 25 s is a lost
connection. Fewer, shorter attempts keep one turn of the SQS reader's loop (which the
liveness probe watches) under a minute and a half."""


def _session_kwargs(config: Config, region: str, boto: BotoConfig = _BOTO_CONFIG) -> dict[str, Any]:
    s3 = config.s3
    kwargs: dict[str, Any] = {
        "region_name": config.region(region).aws_region or region,
        "config": boto,
    }
    if s3.endpoint_url:
        kwargs["endpoint_url"] = s3.endpoint_url
    if s3.access_key_id and s3.secret_access_key:
        kwargs["aws_access_key_id"] = s3.access_key_id
        kwargs["aws_secret_access_key"] = s3.secret_access_key.get_secret_value()
    return kwargs


REQUEST_LOG_ENV = "REPLICATOR_AWS_REQUEST_LOG"

_clients: dict[tuple[Any, ...], Any] = {}
_clients_lock = threading.Lock()


def _client(service: str, config: Config, region: str, boto: BotoConfig = _BOTO_CONFIG) -> Any:
    """One client per process, service and settings.

    Creating a boto3 client costs ~0.15 s (it loads and parses the service model), which
    every Spark task paid once per segment batch. Low-level clients are thread-safe, so a
    process shares one; the process id is part of the key because a forked child (Spark
    forks its Python workers) must not use its parent's connection pool.
    """
    kwargs = _session_kwargs(config, region, boto)
    key = (os.getpid(), service, *sorted((k, repr(v)) for k, v in kwargs.items()))
    with _clients_lock:
        client = _clients.get(key)
        if client is None:
            client = boto3.session.Session().client(service, **kwargs)  # type: ignore[call-overload]
            _log_requests(client, service)
            _clients[key] = client
        return client


def _log_requests(client: Any, service: str) -> None:
    """Append each request ``client`` sends to the request log while one is set (looked
    up per request: a client made before the log was set counts too)."""

    def record(operation_name: str = "", **_: Any) -> None:
        path = os.environ.get(REQUEST_LOG_ENV)
        if not path:  # unset since the client was made
            return
        descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(descriptor, f"{service} {operation_name}\n".encode())  # one atomic line
        finally:
            os.close(descriptor)

    client.meta.events.register(f"request-created.{service}", record)


def s3_client(config: Config, region: str) -> S3Client:
    """A client for ``region``'s bucket (shared within the process)."""
    return cast("S3Client", _client("s3", config, region))


def sqs_client(config: Config, region: str) -> SQSClient:
    """A client for ``region``'s notification queue (shared within the process)."""
    return cast("SQSClient", _client("sqs", config, region, _SQS_CONFIG))


_NOT_FOUND = {"NoSuchKey", "NoSuchBucket", "404", "NotFound", "NoSuchUpload"}


@contextmanager
def s3_errors(operation: str, bucket: str, key: str | None = None) -> Iterator[None]:
    """Re-raise botocore failures as :class:`StorageError` naming the operation and object."""
    try:
        yield
    except ClientError as exc:
        error = exc.response.get("Error", {})
        code = str(error.get("Code", "unknown"))
        message = str(error.get("Message") or code)
        if code in _NOT_FOUND:
            what = "bucket does not exist" if code == "NoSuchBucket" else "not found"
            raise ObjectNotFoundError(operation, bucket, key, f"{what} ({code})") from exc
        raise StorageError(operation, bucket, key, f"{code}: {message}") from exc
    except BotoCoreError as exc:
        raise StorageError(operation, bucket, key, str(exc)) from exc


_PROBE_CONFIG = _BOTO_CONFIG.merge(
    BotoConfig(retries={"max_attempts": 1, "mode": "standard"}, connect_timeout=3, read_timeout=5)
)
"""One attempt, a few seconds: ``replicator config check --connect`` reports what does
not answer instead of retrying it."""


_LOOKUP_CONFIG = _BOTO_CONFIG.merge(
    BotoConfig(retries={"max_attempts": 3, "mode": "standard"}, connect_timeout=3, read_timeout=10)
)
"""Three attempts: ``status`` and ``failover`` report a bucket that does not answer within
a few seconds as unreachable, where a service's eight attempts wait out most of a minute
(measured against a closed port: about 9 s a listing)."""


def lookup_s3_client(config: Config, region: str) -> S3Client:
    """A client for ``region``'s bucket that gives up after a few seconds (read-only
    reports that must answer in an outage)."""
    return cast("S3Client", _client("s3", config, region, _LOOKUP_CONFIG))


def probe_clients(config: Config, region: str) -> tuple[S3Client, SQSClient]:
    """S3 and SQS clients of ``region`` that try once (reachability checks)."""
    return (
        cast("S3Client", _client("s3", config, region, _PROBE_CONFIG)),
        cast("SQSClient", _client("sqs", config, region, _PROBE_CONFIG)),
    )
