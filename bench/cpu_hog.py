"""A CPU hog: one process spinning on one core, to measure latency on a busy machine.

The latency benchmarks run once more inside :func:`cpu_hog`. The hog is bounded three
ways so that it never outlives the benchmark: the context manager stops it on the way
out (normally or on an exception), the process asks the kernel to kill it when its parent
dies (Linux's parent-death signal), and it stops spinning by itself after
``at_most_seconds`` whatever happens. It pins itself to one core where the platform lets
it (``os.sched_setaffinity``), so that the benchmark's processes keep the other cores.

Usage (the process itself): python -m bench.cpu_hog --seconds S [--cpu N] [--parent PID]
"""

from __future__ import annotations

import argparse
import ctypes
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

READY = "spinning"
"""The line the hog prints once it spins: ``spinning on cpu N`` (``any`` when unpinned)."""
PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class Hog:
    pid: int
    cpu: int | None
    """The core it is pinned to; None where pinning was not possible."""


def hog_cpu(allowed: set[int]) -> int | None:
    """The core the hog takes: the highest one this process may run on. Pure."""
    return max(allowed) if allowed else None


@contextmanager
def cpu_hog(at_most_seconds: float, start_timeout: float = 30.0) -> Iterator[Hog]:
    """Start the hog, wait until it spins, yield it; stop it and reap it on the way out."""
    cpu = hog_cpu(set(os.sched_getaffinity(0))) if hasattr(os, "sched_getaffinity") else None
    command = [sys.executable, "-m", "bench.cpu_hog", "--seconds", str(at_most_seconds)]
    command += ["--parent", str(os.getpid())]
    if cpu is not None:
        command += ["--cpu", str(cpu)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        ready, _, _ = select.select([process.stdout], [], [], start_timeout)
        line = process.stdout.readline().strip() if ready else ""
        if not line.startswith(READY):
            raise RuntimeError(f"the CPU hog did not start within {start_timeout:g} s: {line!r}")
        pinned = line.rsplit(" ", 1)[-1]
        yield Hog(process.pid, None if pinned == "any" else int(pinned))
    finally:
        stop(process)


def stop(process: subprocess.Popen[str], grace: float = 5.0) -> int:
    """Terminate ``process``, kill it if it has not ended after ``grace`` seconds, and
    reap it (no zombie, no orphan); returns its exit status."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(grace)
        except subprocess.TimeoutExpired:
            process.kill()
    code = process.wait()
    if process.stdout is not None:
        process.stdout.close()
    return code


def _die_with_parent(parent: int | None) -> bool:
    """Ask Linux to send SIGTERM when the parent dies (elsewhere the time bound holds);
    False if ``parent`` has already gone (the request came too late to see it)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        pass
    return parent is None or os.getppid() == parent


def spin(seconds: float, cpu: int | None, parent: int | None = None) -> None:
    """Busy-loop for ``seconds`` at most, on core ``cpu`` where possible, while
    ``parent`` lives (where the platform tells)."""
    if not _die_with_parent(parent):
        return
    pinned = "any"
    if cpu is not None and hasattr(os, "sched_setaffinity"):
        try:
            os.sched_setaffinity(0, {cpu})
            pinned = str(cpu)
        except OSError:
            pass
    print(f"{READY} on cpu {pinned}", flush=True)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for _ in range(100_000):
            pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, required=True)
    parser.add_argument("--cpu", type=int)
    parser.add_argument("--parent", type=int, help="stop at once if this is not the parent")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    spin(args.seconds, args.cpu, args.parent)


if __name__ == "__main__":
    main()
