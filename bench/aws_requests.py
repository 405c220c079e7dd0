"""S3 and SQS requests a stage sent, counted from the request log every client of the
stage's processes appends to (``REPLICATOR_AWS_REQUEST_LOG``, see
:mod:`replicator.core.aws.clients`), grouped by how AWS bills them and scaled to a million
records, so that an operator can price a deployment.

Billing classes (S3 Standard): PUT, COPY, POST and LIST requests are one price, GET and
every other request (HEAD included) a tenth of it or less, DELETE and abort are free. SQS
bills every request alike. The prices are list prices of us-east-1 at the time of writing,
kept apart from the counts: check them against your region's.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from replicator.core.aws.clients import REQUEST_LOG_ENV

USD_PER_1000 = {"put_post_list": 0.005, "get": 0.0004, "delete": 0.0, "sqs": 0.0004}
"""List prices per 1,000 requests (S3 Standard and SQS standard queues, us-east-1)."""

_PUT_POST_LIST = frozenset(
    {
        "PutObject",
        "CopyObject",
        "CreateMultipartUpload",
        "UploadPart",
        "UploadPartCopy",
        "CompleteMultipartUpload",
        "ListObjects",
        "ListObjectsV2",
        "ListMultipartUploads",
        "ListParts",
        "ListBuckets",
        "CreateBucket",
        "PutBucketNotificationConfiguration",
        "PutBucketLifecycleConfiguration",
    }
)
_FREE = frozenset({"DeleteObject", "DeleteObjects", "AbortMultipartUpload"})


def billing_class(service: str, operation: str) -> str:
    """``put_post_list``, ``get``, ``delete`` or ``sqs``."""
    if service == "sqs":
        return "sqs"
    if operation in _PUT_POST_LIST:
        return "put_post_list"
    if operation in _FREE:
        return "delete"
    return "get"


def count(log_text: str) -> Counter[tuple[str, str]]:
    """(service, operation) → requests, from a request log's lines."""
    found: Counter[tuple[str, str]] = Counter()
    for line in log_text.splitlines():
        service, _, operation = line.partition(" ")
        if operation:
            found[(service, operation)] += 1
    return found


def priced(requests: Counter[tuple[str, str]], records: int) -> dict[str, object]:
    """Requests per billing class, the same per million records, the cost of a million
    records at :data:`USD_PER_1000`, and the operations counted."""
    by_class: Counter[str] = Counter()
    for (service, operation), n in requests.items():
        by_class[billing_class(service, operation)] += n
    scale = 1_000_000 / records if records else 0.0
    per_million = {c: by_class.get(c, 0) * scale for c in USD_PER_1000}
    usd = sum(per_million[c] / 1000 * USD_PER_1000[c] for c in USD_PER_1000)
    return {
        "requests": {c: by_class.get(c, 0) for c in USD_PER_1000},
        "per_million_records": per_million,
        "usd_per_million_records": usd,
        "operations": {f"{s} {o}": n for (s, o), n in sorted(requests.items())},
    }


@contextmanager
def counting(log: Path) -> Iterator[Path]:
    """While the block runs, processes started from this one log their AWS requests to
    ``log`` (emptied first)."""
    log.write_text("")
    previous = os.environ.get(REQUEST_LOG_ENV)
    os.environ[REQUEST_LOG_ENV] = str(log)
    try:
        yield log
    finally:
        if previous is None:
            del os.environ[REQUEST_LOG_ENV]
        else:
            os.environ[REQUEST_LOG_ENV] = previous
