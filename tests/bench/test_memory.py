"""Peak RSS is sampled from the benchmark's own processes only: on a machine where other
work runs (other benchmarks, test suites with Spark of their own), a process that merely
looks like the measured stage is not the stage."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path

from bench.memory import PeakRss, cpu_seconds

MARK = "peak-rss-test-mark"
STARTER = (
    "import os, subprocess, sys\n"
    "p = subprocess.Popen([sys.executable, os.environ['SLEEPER'], sys.argv[1]],\n"
    "                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,\n"
    "                     start_new_session=True)\n"
    "print(p.pid, flush=True)\n"
    "if sys.argv[2] == 'wait':\n"
    "    p.wait()\n"
)


def test_only_the_benchmarks_descendants_are_sampled(tmp_path: Path):
    sleeper = tmp_path / f"{MARK}.py"
    sleeper.write_text("import sys, time\ntime.sleep(float(sys.argv[1]))\n")
    env = os.environ | {"SLEEPER": str(sleeper)}
    # An orphan: its parent exits at once, so it is no descendant of this process.
    started = subprocess.run(
        [sys.executable, "-c", STARTER, "30", "exit"], env=env, capture_output=True, text=True
    )
    orphan = int(started.stdout)
    child = subprocess.Popen([sys.executable, str(sleeper), "30"])
    # A grandchild, under a parent whose command line does not match.
    parent = subprocess.Popen(
        [sys.executable, "-c", STARTER, "30", "wait"], env=env, stdout=subprocess.PIPE, text=True
    )
    try:
        assert parent.stdout is not None
        grandchild = int(parent.stdout.readline())
        with PeakRss(lambda command: MARK in command, interval=0.1) as memory:
            time.sleep(0.5)
        assert set(memory.peaks) == {child.pid, grandchild}, (
            f"sampled {set(memory.peaks)}: the orphan is {orphan}"
        )
    finally:
        for process in (child, parent):
            process.kill()
            process.wait()
        if parent.stdout is not None:
            parent.stdout.close()
        for pid in (orphan, locals().get("grandchild")):
            if pid:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, 9)


def test_cpu_seconds_counts_a_process_work_and_none_once_it_is_gone():
    spinner = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time\nend = time.process_time() + 0.5\nwhile time.process_time() < end: pass",
        ]
    )
    spinner.wait(30)
    assert cpu_seconds(os.getpid()) is not None
    assert cpu_seconds(spinner.pid) is None  # reaped: its /proc entry is gone
    busy = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\nend = time.process_time() + 0.5\n"
            "while time.process_time() < end: pass\nsys.stdin.read()",
        ],
        stdin=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 30
        used = 0.0
        while used < 0.4 and time.monotonic() < deadline:
            time.sleep(0.1)
            used = cpu_seconds(busy.pid) or 0.0
        assert used >= 0.4
    finally:
        busy.communicate(b"", timeout=30)
