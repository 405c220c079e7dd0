"""The CPU hog of the latency benchmarks' loaded pass: it spins (pinned to one core where
the platform allows), and it never outlives the benchmark: stopped on the way out, on an
exception too, and bounded in time by itself."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench.cpu_hog import READY, cpu_hog, hog_cpu, stop


def cpu_seconds(pid: int) -> float:
    """User and system CPU time of ``pid`` so far, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def gone(pid: int) -> bool:
    """No such process (reaped: not even a zombie)."""
    return not Path(f"/proc/{pid}").exists()


def test_the_hog_takes_the_highest_allowed_core():
    assert hog_cpu({0, 1, 3}) == 3
    assert hog_cpu(set()) is None


def test_the_hog_spins_pinned_and_is_reaped_on_the_way_out():
    with cpu_hog(60) as hog:
        assert Path(f"/proc/{hog.pid}").exists()
        if hog.cpu is not None:
            assert os.sched_getaffinity(hog.pid) == {hog.cpu}
            assert hog.cpu == max(os.sched_getaffinity(0))
        # It keeps taking CPU: a sleeping process would not reach 0.5 s of it. (How fast
        # it gets there depends on what else the machine runs.)
        before = cpu_seconds(hog.pid)
        deadline = time.monotonic() + 60
        while cpu_seconds(hog.pid) - before < 0.5:
            assert time.monotonic() < deadline, "the hog does not spin"
            time.sleep(0.1)
    assert gone(hog.pid)


def test_the_hog_is_stopped_when_the_block_fails():
    with pytest.raises(RuntimeError, match="benchmark failed"), cpu_hog(60) as hog:
        raise RuntimeError("benchmark failed")
    assert gone(hog.pid)


def test_the_hog_stops_by_itself_at_its_bound():
    process = subprocess.Popen(
        [sys.executable, "-m", "bench.cpu_hog", "--seconds", "0.5"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    assert process.stdout.readline().startswith(READY)
    assert process.wait(timeout=30) == 0
    process.stdout.close()


def test_a_hog_that_ignores_terminate_is_killed():
    process = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
            "print('x', flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    process.stdout.readline()
    started = time.monotonic()
    assert stop(process, grace=0.5) == -9
    assert time.monotonic() - started < 10
    assert gone(process.pid)


def test_the_hog_dies_with_its_parent(tmp_path: Path):
    # A parent that starts the hog and is killed before it can stop it.
    script = (
        "import sys, time\n"
        "from bench.cpu_hog import cpu_hog\n"
        "with cpu_hog(120) as hog:\n"
        "    print(hog.pid, flush=True)\n"
        "    time.sleep(120)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    pid = int(parent.stdout.readline())
    parent.kill()
    parent.wait()
    parent.stdout.close()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        state = Path(f"/proc/{pid}/stat")
        if not state.exists() or state.read_text().rsplit(")", 1)[1].split()[0] == "Z":
            break
        time.sleep(0.1)
    else:
        os.kill(pid, 9)
        pytest.fail("the hog outlived its parent")
