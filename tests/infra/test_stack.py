import json
import socket
import string
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import unquote_plus

import pytest

from infra.broker import new_cluster_id
from infra.errors import StackError
from infra.stack import Stack, StackSpec, _process_start_time
from replicator.core.config import load_config
from tests.fixtures.stack import DESTINATION, SOURCE, write_stack_config

ROOT = Path(__file__).resolve().parents[2]


def wait_for(predicate, timeout=15.0, interval=0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = predicate()
        if result:
            return result
        time.sleep(interval)
    raise AssertionError(f"condition not met within {timeout}s")


def test_object_put_in_the_source_bucket_is_replicated_and_announced(local_stack, unique):
    s3, sqs = local_stack.s3(), local_stack.sqs()
    source = local_stack.config.bucket(SOURCE)
    destination = local_stack.config.bucket(DESTINATION)
    key = f"data/{SOURCE}/{unique('topic')}/0/0/a key+with spaces"
    s3.put_object(Bucket=source, Key=key, Body=b"payload")

    def replicated():
        try:
            return s3.get_object(Bucket=destination, Key=key)["Body"].read()
        except s3.exceptions.NoSuchKey:
            return None

    assert wait_for(replicated) == b"payload"

    queue = sqs.get_queue_url(QueueName=local_stack.config.region(DESTINATION).sqs_queue)[
        "QueueUrl"
    ]

    def announced():
        messages = sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10, WaitTimeSeconds=1)
        for message in messages.get("Messages", []):
            body = json.loads(message["Body"])
            for record in body.get("Records", []):
                if unquote_plus(record["s3"]["object"]["key"]) == key:
                    return record
        return None

    record = wait_for(announced)
    assert record["eventName"].startswith("ObjectCreated:")
    assert record["s3"]["bucket"]["name"] == destination


def test_queue_has_a_dead_letter_redrive_policy(local_stack):
    sqs = local_stack.sqs()
    queue = sqs.get_queue_url(QueueName=local_stack.config.region(DESTINATION).sqs_queue)[
        "QueueUrl"
    ]
    attributes = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["RedrivePolicy"])
    policy = json.loads(attributes["Attributes"]["RedrivePolicy"])
    assert policy["deadLetterTargetArn"].endswith("-events-dlq")
    assert int(policy["maxReceiveCount"]) >= 1


def test_buckets_abort_incomplete_multipart_uploads(local_stack):
    for region in (SOURCE, DESTINATION):
        rules = local_stack.s3().get_bucket_lifecycle_configuration(
            Bucket=local_stack.config.bucket(region)
        )["Rules"]
        assert any("AbortIncompleteMultipartUpload" in rule for rule in rules)


def test_up_is_idempotent_and_keeps_running_processes(local_stack):
    before = {s.service.name: s.pid for s in local_stack.stack.status()}
    after = {s.service.name: s.pid for s in local_stack.stack.up()}
    assert before == after
    assert all(s.running for s in local_stack.stack.status())


def _replicator(*args, cwd):
    return subprocess.run(
        [sys.executable, "-m", "replicator", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_cli_stack_up_then_down_leaves_no_process_behind(tmp_path, unique):
    config = write_stack_config(tmp_path / "stack.toml", token=unique("s").split("-")[1])
    state = tmp_path / "state"
    up = _replicator(
        "stack", "up", "--config", str(config), "--state-dir", str(state), cwd=tmp_path
    )
    assert up.returncode == 0, up.stderr
    assert "local stack is up" in up.stdout
    recorded = {p.stem: json.loads(p.read_text()) for p in state.glob("*.pid")}
    assert set(recorded) == {"s3", f"kafka-{SOURCE}", f"kafka-{DESTINATION}", "replication"}
    assert all(_process_start_time(r["pid"]) == r["start_time"] for r in recorded.values())

    status = _replicator(
        "stack", "status", "--config", str(config), "--state-dir", str(state), cwd=tmp_path
    )
    assert status.returncode == 0 and status.stdout.count("running") == 4

    down = _replicator(
        "stack", "down", "--config", str(config), "--state-dir", str(state), cwd=tmp_path
    )
    assert down.returncode == 0, down.stderr
    assert all(_process_start_time(r["pid"]) is None for r in recorded.values())
    assert not list(state.glob("*.pid"))
    spec = StackSpec.from_config(load_config(config), state)
    for service in spec.services():
        if service.port:
            with pytest.raises(OSError):
                socket.create_connection((service.host, service.port), timeout=0.5).close()

    status = _replicator(
        "stack", "status", "--config", str(config), "--state-dir", str(state), cwd=tmp_path
    )
    assert status.returncode == 3 and "stopped" in status.stdout


def test_port_taken_by_a_foreign_process_is_refused(tmp_path):
    config_path = write_stack_config(tmp_path / "stack.toml", token="foreign")
    spec = StackSpec.from_config(load_config(config_path), tmp_path / "state")
    host, port = spec.brokers[SOURCE]
    with socket.socket() as squatter:
        squatter.bind((host, port))
        squatter.listen()
        stack = Stack(spec)
        try:
            with pytest.raises(StackError, match=f"{host}:{port} is already in use"):
                stack.up(timeout=30)
        finally:
            stack.down()


def test_bad_config_gives_one_line_without_traceback(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('[regions.a]\nbucket = "abc"\nkafka.bootstrap_servers = "x:1"\ncolour = 1\n')
    result = _replicator("stack", "up", "--config", str(bad), cwd=tmp_path)
    assert result.returncode == 2
    assert (
        result.stderr.strip() == f"replicator: config error: {bad}: regions.a.colour: unknown key"
    )


def test_non_loopback_brokers_are_refused(tmp_path):
    path = write_stack_config(tmp_path / "stack.toml")
    path.write_text(
        path.read_text().replace(
            'kafka.bootstrap_servers = "127.0.0.1:', 'kafka.bootstrap_servers = "10.1.2.3:', 1
        )
    )
    config = load_config(path)
    with pytest.raises(StackError, match="only on loopback addresses"):
        StackSpec.from_config(config, tmp_path)


def test_cluster_ids_look_like_kafkas_and_never_start_with_a_dash():
    ids = {new_cluster_id() for _ in range(2000)}
    assert len(ids) == 2000
    assert all(len(i) == 22 and not i.startswith("-") for i in ids)
    assert all(set(i) <= set(string.ascii_letters + string.digits + "-_") for i in ids)
