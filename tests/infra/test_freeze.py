"""A process frozen with :func:`infra.freeze.freeze` has stopped when the call returns.

``kill(pid, SIGSTOP)`` alone returns while the process's threads may still run: a broker
"paused" that way answered a watermark look-up made right after (CI failed
``test_ends_asked_of_a_paused_broker_fail_as_a_broker_error`` with DID NOT RAISE). The
child here spins on three threads and shares one CPU with this test, so a thread that
has not yet taken the signal up is still running when ``kill`` returns, almost every
time; each of twenty freezes must find every thread stopped."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from infra.freeze import freeze, freeze_group, frozen, thaw, thread_states

SPINNER = """
import threading
def spin():
    while True:
        pass
for _ in range(3):
    threading.Thread(target=spin, daemon=True).start()
print("spinning", flush=True)
threading.Event().wait()
"""
ROUNDS = 20


@pytest.fixture
def spinner() -> Iterator[subprocess.Popen[bytes]]:
    """A process of its own group spinning on three threads, on this test's CPU."""
    child = subprocess.Popen(
        [sys.executable, "-c", SPINNER], stdout=subprocess.PIPE, start_new_session=True
    )
    assert child.stdout is not None
    assert child.stdout.readline() == b"spinning\n"
    before = os.sched_getaffinity(0)
    one_cpu = {min(before)}
    os.sched_setaffinity(0, one_cpu)
    for thread in thread_states(child.pid):
        os.sched_setaffinity(thread, one_cpu)
    try:
        yield child
    finally:
        os.sched_setaffinity(0, before)
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()


def test_every_thread_is_stopped_when_freeze_returns(spinner: subprocess.Popen[bytes]) -> None:
    running_after_freeze = []
    for round_ in range(ROUNDS):
        freeze(spinner.pid)
        states = thread_states(spinner.pid)
        if not frozen(spinner.pid):
            running_after_freeze.append((round_, states))
        assert len(states) == 4, states  # the main thread and the three spinning
        thaw(spinner.pid)
        _await_running(spinner.pid)
    assert running_after_freeze == []


def test_every_thread_of_a_group_is_stopped_when_freeze_group_returns(
    spinner: subprocess.Popen[bytes],
) -> None:
    for _ in range(ROUNDS):
        freeze_group(spinner.pid)
        assert frozen(spinner.pid), thread_states(spinner.pid)
        os.killpg(spinner.pid, signal.SIGCONT)
        _await_running(spinner.pid)


def test_a_process_gone_counts_as_frozen() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert thread_states(child.pid) == {}
    assert frozen(child.pid)


def _await_running(pid: int) -> None:
    """Until a thread of ``pid`` runs again: the next freeze starts from a running one."""
    deadline = time.monotonic() + 10
    while frozen(pid):
        assert time.monotonic() < deadline, thread_states(pid)
        time.sleep(0.001)
