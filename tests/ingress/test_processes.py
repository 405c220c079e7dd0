"""One ingress instance with several replay processes (``[ingress] processes``): the
members share the partitions through the group, a member killed with SIGKILL while it
still owns unreplayed records is restarted and the destination holds each record exactly
once; the instance's one metrics port serves every member's metrics and probes; a kill -9
of the instance takes its members with it, and a new instance finishes the replay."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

from confluent_kafka import KafkaException

from replicator.core.config import load_config
from tests.fixtures.ingress import provenance_offsets
from tests.fixtures.probes import get, probe
from tests.ingress.test_takeover import (
    PARTITIONS,
    PER_SEGMENT,
    SEGMENTS,
    assert_exactly_once,
    fill,
    log_end,
    produced,
    stop,
    wait_until,
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def with_processes(setup, count: int, port: int | None = None) -> None:
    extra = f"processes = {count}\n" + (f"metrics_port = {port}\n" if port else "")
    setup.path.write_text(setup.path.read_text().replace("processes = 1\n", extra))
    setup.config = load_config(setup.path)


def start(setup, log: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "replicator", "ingress", "--config", str(setup.path), *args],
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def replay_started(local_stack, setup) -> bool:
    """Whether the destination holds anything yet (its log ends: cheaper than reading
    it, so that the kill comes early); False before its topic exists."""
    try:
        return any(log_end(local_stack, setup.destination, p) > 0 for p in range(PARTITIONS))
    except KafkaException:
        return False


def member_pids(log: Path) -> dict[int, int]:
    """Each member's latest pid, from the instance's log."""
    found = re.findall(r"ingress process (\d+) started \(pid (\d+)\)", log.read_text())
    return {int(index): int(pid) for index, pid in found}


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat").read_text() if Path(f"/proc/{pid}/stat").exists() else ""
    return " Z " not in stat  # a zombie waits only for its parent to reap it


def samples(port: int, name: str) -> dict[tuple[str, str], float]:
    """``name``'s samples on the instance's /metrics, keyed by (process, partition)."""
    _, body = get(port, "/metrics")
    found = {}
    for line in body.decode().splitlines():
        if line.startswith(name + "{"):
            labels = dict(re.findall(r'(\w+)="([^"]*)"', line))
            found[(labels.get("process", ""), labels.get("partition", ""))] = float(
                line.split()[-1]
            )
    return found


def test_two_processes_share_an_instance_and_one_killed_mid_replay_is_restarted(
    local_stack, ingress_setup, tmp_path
):
    segments = 5 * SEGMENTS
    full = segments * PER_SEGMENT
    setup = ingress_setup()
    port = free_port()
    with_processes(setup, 2, port)
    fill(setup, segments)
    log = tmp_path / "instance.log"
    instance = start(setup, log)
    try:

        def owned_by(process: str) -> float:
            return samples(port, "replicator_ingress_owned_partitions").get((process, ""), 0)

        def records_by(process: str) -> dict[int, float]:
            counted = samples(port, "replicator_ingress_records_total")
            return {int(p): n for (who, p), n in counted.items() if who == process}

        # Both members own partitions (the group shared the events partitions between them)
        # and member 1 has replayed some of its own, not all: it has work left.
        wait_until(
            lambda: owned_by("0") > 0 and owned_by("1") > 0 and records_by("1"),
            120,
            "both processes to replay",
            [log],
        )
        victim_pid = member_pids(log)[1]
        victims_partitions = set(records_by("1"))
        os.kill(victim_pid, signal.SIGKILL)
        left = {p: len(provenance_offsets(local_stack, setup, p)) for p in victims_partitions}
        assert any(n < full for n in left.values()), left  # the victim still had work

        wait_until(
            lambda: (
                f"ingress process 1 (pid {victim_pid}) was killed by SIGKILL" in log.read_text()
            ),
            30,
            "the instance to see its process die",
            [log],
        )
        wait_until(lambda: member_pids(log)[1] != victim_pid, 60, "a restart", [log])
        total = PARTITIONS * full
        wait_until(lambda: produced(local_stack, setup) >= total, 240, "the replay", [log])
        assert samples(port, "replicator_ingress_process_restarts_total") == {("", ""): 1.0}
        wait_until(lambda: probe(port, "/readyz")[0] == 200, 60, "readiness", [log])
        status, body = probe(port, "/healthz")
        assert status == 200, body
        members = member_pids(log).values()
    finally:
        stop(instance)
    assert instance.returncode == 0, log.read_text()[-3000:]
    assert not any(alive(pid) for pid in members)
    assert_exactly_once(local_stack, setup, segments)


def test_a_kill_9_of_the_instance_takes_its_processes_and_a_new_one_finishes(
    local_stack, ingress_setup, tmp_path
):
    segments = 5 * SEGMENTS
    setup = ingress_setup()
    with_processes(setup, 2)
    fill(setup, segments)
    logs = [tmp_path / "killed.log", tmp_path / "next.log"]
    first = start(setup, logs[0])
    try:
        wait_until(
            lambda: len(member_pids(logs[0])) == 2 and replay_started(local_stack, setup),
            120,
            "the first instance to replay",
            logs,
        )
        members = list(member_pids(logs[0]).values())
        os.kill(first.pid, signal.SIGKILL)  # the parent alone, as a kill -9 of it would
        first.wait(10)
        wait_until(lambda: not any(alive(pid) for pid in members), 10, "members to die", logs)
        assert produced(local_stack, setup) < PARTITIONS * segments * PER_SEGMENT
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
    second = start(setup, logs[1], "--stop-at-end")
    try:
        assert second.wait(240) == 0, logs[1].read_text()[-3000:]
    finally:
        if second.poll() is None:
            os.killpg(second.pid, signal.SIGKILL)
    assert len(member_pids(logs[1])) == 2
    assert_exactly_once(local_stack, setup, segments)
