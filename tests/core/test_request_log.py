"""The AWS request log a benchmark prices a stage by holds every request the product's
clients sent, as the endpoint received them."""

from __future__ import annotations

from pathlib import Path

import pytest
from botocore.exceptions import ClientError

from bench.aws_requests import count
from replicator.core.aws.clients import REQUEST_LOG_ENV, s3_client
from replicator.core.segments.key import SegmentKey
from replicator.core.segments.store import SegmentStore
from tests.fixtures.stack import SOURCE


def test_every_request_of_the_products_clients_is_logged(
    local_stack, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    log = tmp_path / "aws.log"
    monkeypatch.setenv(REQUEST_LOG_ENV, str(log))
    store = SegmentStore.for_region(local_stack.config, SOURCE)
    key = SegmentKey(SOURCE, "logged.topic", 0, 0, 0, 9)
    store.put_json(f"data/{SOURCE}/logged.topic/_probe.json", {"n": 1})
    assert store.list_segments(SOURCE, "logged.topic", 0) == []
    with pytest.raises(ClientError):  # a request that fails is sent, and counted, too
        s3_client(local_stack.config, SOURCE).get_object(
            Bucket=store.bucket, Key=key.to_s3_key("data")
        )
    counted = count(log.read_text())
    assert counted[("s3", "PutObject")] == 1
    assert counted[("s3", "ListObjectsV2")] >= 1
    assert counted[("s3", "GetObject")] == 1
    monkeypatch.delenv(REQUEST_LOG_ENV)
    before = log.read_text()
    store.put_json(f"data/{SOURCE}/logged.topic/_probe.json", {"n": 2})
    assert log.read_text() == before  # unset: nothing logged
