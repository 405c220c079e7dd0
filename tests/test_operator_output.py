"""What an operator sees with nothing reachable: in ``--log-format json`` every line a
service writes is one JSON object (librdkafka's lines included, through Python logging,
and Spark's JVM log for egress), and ``status`` (its relay rows too) and ``failover`` say what
they could not reach instead of stopping at the first error.

The config is ``config.example.toml`` with every endpoint moved to a port nothing
listens on: a stack that is down."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from infra.ports import free_port
from tests.fixtures.logs import json_lines

EXAMPLE = Path(__file__).resolve().parent.parent / "config.example.toml"


@pytest.fixture
def down(tmp_path: Path) -> Path:
    """``config.example.toml`` pointing at nothing, its state under ``tmp_path``."""
    ports: dict[str, int] = {}

    def nowhere(match: re.Match[str]) -> str:
        return f"127.0.0.1:{ports.setdefault(match.group(0), free_port())}"

    text = re.sub(r"127\.0\.0\.1:\d+", nowhere, EXAMPLE.read_text())
    text = text.replace('".replicator/', f'"{tmp_path}/')
    path = tmp_path / "down.toml"
    path.write_text(text)
    return path


def run(*args: str, seconds: float | None = None) -> subprocess.CompletedProcess[str]:
    """``replicator --log-format json ARGS``; a service still running after ``seconds`` is
    stopped with SIGTERM (then killed if it does not stop within 60 s)."""
    command = [sys.executable, "-m", "replicator", "--log-format", "json", *args]
    env = {**os.environ, "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test"}
    if seconds is None:
        return subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    try:
        out, err = process.communicate(timeout=seconds)  # it may end by itself
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGTERM)
        try:
            out, err = process.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            out, err = process.communicate()
    return subprocess.CompletedProcess(command, process.returncode, out, err)


def test_ingress_against_a_stopped_broker_writes_only_json(down: Path):
    result = run("ingress", "--config", str(down), seconds=10)
    lines = json_lines(result.stderr)
    assert lines, "ingress wrote nothing"
    print("\n".join(json.dumps(line) for line in lines[:8]))


def test_egress_against_a_stopped_broker_writes_only_json(down: Path):
    # It gives up after 30 s without the broker; its last word is a JSON line too.
    # (Spark's JVM log in JSON: tests/egress/test_streaming.py, with the broker up.)
    result = run("egress", "--config", str(down), seconds=60)
    lines = json_lines(result.stderr)
    assert result.returncode == 1
    assert "cannot reach Kafka of region us-east-1" in str(lines[-1]["message"]), lines[-1]
    print("\n".join(json.dumps(line) for line in lines[:8]))


def test_status_with_the_stack_down_fills_a_row_per_topic(down: Path):
    result = run("status", "--config", str(down))
    assert result.returncode == 0, result.stderr[-2000:]
    json_lines(result.stderr)
    # The partitions' table, then the relay's ([relay] in the example): each a header
    # and its rows.
    partitions, relayed = (table.splitlines() for table in result.stdout.strip().split("\n\n"))
    rows = partitions[1:] + relayed[1:]
    assert partitions[1:] and relayed[1:], result.stdout
    assert all("unreachable: Kafka of us-east-1" in row for row in rows), result.stdout
    assert any("unreachable: bucket" in row for row in rows), result.stdout
    assert relayed[0].startswith("relayed"), result.stdout
    assert all("unreachable: Kafka of us-east-1, east-b" in row for row in relayed[1:])
    print(result.stdout)


def test_failover_with_the_stack_down_reports_what_it_could_not_reach(down: Path):
    result = run("failover", "--config", str(down))
    assert result.returncode == 1
    json_lines(result.stderr)
    assert "NOT REACHED" in result.stdout, result.stdout
    assert "bucket replicator-us-west-1" in result.stdout
    assert "Kafka of us-west-1" in result.stdout
    print(result.stdout)
