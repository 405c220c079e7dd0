"""Freezing a process (SIGSTOP) and knowing it is frozen.

``kill(pid, SIGSTOP)`` returns once the signal is queued, not once the process has
stopped. One of its threads must take the signal up first and then stop the others; on a
starved machine that thread waits its turn for a CPU while the process's other threads
run on. A broker "paused" that way answered a request made right after ``kill`` returned
(a test expecting no answer saw one). So a test or drill that counts on a frozen process
(a broker that does not answer, an instance whose ends are counted while it cannot
write) freezes it with :func:`freeze`: the signal, then a wait until every thread of the
process is stopped. :func:`thaw` (SIGCONT) needs no wait: nothing counts on the moment
a process runs again.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from infra.errors import StackError

FREEZE_TIMEOUT = 30.0
"""Seconds a frozen process's threads may take to stop (a starved machine's worst)."""

_NOT_RUNNING = frozenset("TtZX")  # stopped, stopped by a tracer, exited, dead


def thread_states(pid: int) -> dict[int, str]:
    """The state letter /proc gives each thread of ``pid`` (empty once it is gone)."""
    states = {}
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:
        return {}
    for task in tasks:
        try:
            stat = Path(f"/proc/{pid}/task/{task}/stat").read_text()
        except FileNotFoundError:  # the thread ended meanwhile
            continue
        states[int(task)] = stat.rsplit(") ", 1)[1][0]
    return states


def frozen(pid: int) -> bool:
    """No thread of ``pid`` can run: each is stopped (or the process is gone)."""
    return all(state in _NOT_RUNNING for state in thread_states(pid).values())


def group_members(pgid: int) -> list[int]:
    """The processes of process group ``pgid``."""
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if os.getpgid(int(entry)) == pgid:
                members.append(int(entry))
        except ProcessLookupError:
            continue
    return members


def freeze(pid: int, timeout: float = FREEZE_TIMEOUT) -> None:
    """SIGSTOP ``pid``; return once every thread of it is stopped. A process not stopped
    within ``timeout`` is sent SIGCONT and a StackError raised: never left half frozen."""
    os.kill(pid, signal.SIGSTOP)
    try:
        _await_frozen([pid], f"process {pid}", timeout)
    except StackError:
        os.kill(pid, signal.SIGCONT)
        raise


def freeze_group(pgid: int, timeout: float = FREEZE_TIMEOUT) -> None:
    """SIGSTOP process group ``pgid``; return once every thread of its processes is
    stopped (SIGCONT and a StackError after ``timeout``, as :func:`freeze`)."""
    os.killpg(pgid, signal.SIGSTOP)
    try:
        _await_frozen(group_members(pgid), f"process group {pgid}", timeout)
    except StackError:
        os.killpg(pgid, signal.SIGCONT)
        raise


def thaw(pid: int) -> None:
    """SIGCONT ``pid``."""
    os.kill(pid, signal.SIGCONT)


def _await_frozen(pids: list[int], what: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not all(frozen(pid) for pid in pids):
        if time.monotonic() >= deadline:
            running = {pid: thread_states(pid) for pid in pids if not frozen(pid)}
            raise StackError(
                f"{what} was sent SIGSTOP but has threads still running after {timeout:.0f} s: "
                f"{running}"
            )
        time.sleep(0.005)
