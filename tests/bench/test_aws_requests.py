"""The request counts a stage is priced by: what the clients sent, classed as AWS bills."""

from __future__ import annotations

import os
from pathlib import Path

from bench.aws_requests import billing_class, count, counting
from replicator.core.aws.clients import REQUEST_LOG_ENV


def test_requests_are_classed_as_aws_bills_them() -> None:
    assert billing_class("s3", "UploadPart") == "put_post_list"
    assert billing_class("s3", "ListObjectsV2") == "put_post_list"
    assert billing_class("s3", "GetObject") == "get"
    assert billing_class("s3", "HeadObject") == "get"
    assert billing_class("s3", "DeleteObjects") == "delete"
    assert billing_class("sqs", "DeleteMessageBatch") == "sqs"


def test_a_log_counts_per_operation_and_counting_restores_the_environment(tmp_path: Path) -> None:
    assert count("s3 GetObject\ns3 GetObject\nsqs ReceiveMessage\n\n") == {
        ("s3", "GetObject"): 2,
        ("sqs", "ReceiveMessage"): 1,
    }
    before = os.environ.get(REQUEST_LOG_ENV)
    with counting(tmp_path / "aws.log") as log:
        assert os.environ[REQUEST_LOG_ENV] == str(log) and log.read_text() == ""
    assert os.environ.get(REQUEST_LOG_ENV) == before
