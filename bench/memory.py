"""Peak resident memory of processes, sampled from /proc while a benchmark runs.

Processes come and go (Spark forks Python workers per task), so a background thread scans
/proc every ``interval`` seconds and keeps, per matching process, the largest ``VmHWM``
(the kernel's own peak-RSS mark) it saw. A process that lives shorter than one interval
can be missed; Spark's workers are reused across tasks and ingress lives for the run.

Only the benchmark's own descendants are matched: on a machine where other work runs
(another benchmark, a test suite with a Spark of its own) a process that merely looks like
the measured stage would otherwise be counted as the stage's, and reading every process's
command line five times a second cost the benchmark's process CPU that the measured stage
shares (a py-spy profile of an egress run had 43 % of the benchmark process's
samples in this scan).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

PROC = Path("/proc")


def _read(pid: int, name: str) -> str | None:
    try:
        return (PROC / str(pid) / name).read_text(errors="replace")
    except OSError:
        return None


CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float | None:
    """User and system CPU seconds of process ``pid`` so far (None once it is gone)."""
    try:
        with open(f"{PROC}/{pid}/stat", "rb") as stat:
            # "pid (comm) state ...": comm may hold spaces and parentheses.
            fields = stat.read().rsplit(b")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def peak_rss_bytes(pid: int) -> int | None:
    """The process's peak RSS so far (VmHWM), or None once it is gone."""
    status = _read(pid, "status")
    if status is None:
        return None
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return None


def parents() -> dict[int, int]:
    """Each live process's parent: pid -> ppid, from /proc (one small read per process;
    a process gone while read is left out)."""
    found = {}
    for name in os.listdir(PROC):
        if not name.isdigit():
            continue
        try:
            with open(f"{PROC}/{name}/stat", "rb") as stat:
                # "pid (comm) state ppid ...": comm may hold spaces and parentheses.
                found[int(name)] = int(stat.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
    return found


def descendants(root: int, parent_of: dict[int, int]) -> list[int]:
    """Every process below ``root`` (not ``root`` itself) in ``parent_of``. Pure."""
    children: dict[int, list[int]] = {}
    for pid, parent in parent_of.items():
        children.setdefault(parent, []).append(pid)
    found, pending = [], list(children.get(root, []))
    while pending:
        pid = pending.pop()
        found.append(pid)
        pending.extend(children.get(pid, []))
    return found


def command_line(pid: int) -> str:
    raw = _read(pid, "cmdline") or ""
    return raw.replace("\0", " ").strip()


def spark_python_process(command: str) -> bool:
    """Spark's Python processes (daemon, forked workers, planner processes), not the JVM
    whose class path also names pyspark."""
    program = command.split(" ", 1)[0]
    return "python" in Path(program).name and "pyspark" in command


class PeakRss:
    """Samples every process whose command line satisfies ``match``."""

    def __init__(self, match: Callable[[str], bool], interval: float = 0.2) -> None:
        self.match = match
        self.interval = interval
        self.peaks: dict[int, tuple[int, str]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="peak-rss", daemon=True)

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def sample(self) -> None:
        for pid in descendants(os.getpid(), parents()):
            command = command_line(pid)
            if not command or not self.match(command):
                continue
            peak = peak_rss_bytes(pid)
            if peak is not None and peak > self.peaks.get(pid, (0, ""))[0]:
                self.peaks[pid] = (peak, command)

    def largest(self) -> tuple[int, str]:
        """(peak bytes, command line) of the largest process seen; (0, "") if none."""
        return max(self.peaks.values(), default=(0, ""))
