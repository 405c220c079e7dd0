"""One ingress instance with several replay processes (``[ingress] processes``): the
members share the partitions through the group, a member killed with SIGKILL while it
still owns unreplayed records is restarted and the destination holds each record exactly
once; the instance's one metrics port serves every member's metrics and probes; a kill -9
of the instance takes its members with it, and a new instance finishes the replay."""

from __future__ import annotations

import os
import signal

from tests.fixtures.ingress import provenance_offsets
from tests.fixtures.probes import probe
from tests.fixtures.takeover import (
    PARTITIONS,
    PER_SEGMENT,
    SEGMENTS,
    alive,
    assert_exactly_once,
    fill,
    free_port,
    member_pids,
    produced,
    replay_started,
    samples,
    start,
    stop,
    wait_until,
    with_processes,
)


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
