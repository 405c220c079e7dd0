"""The profile summary: per process, where its samples went, from py-spy's collapsed
stacks (``--subprocesses``: each stack starts with its process and that one's ancestors)."""

from __future__ import annotations

import cProfile
import os
import pstats
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench import profiles
from bench.profiles import RATE, parse_collapsed, summarise, waiting

BENCH = 'process 22:"python -m bench.run"'
INGRESS = 'process 10:"python -m replicator ingress --config a;b.toml"'
STACKS = [
    f"{BENCH};{INGRESS};run (ingress/worker.py:50);produce (w.py:9) 60",
    f"{BENCH};{INGRESS};run (ingress/worker.py:50);read (r.py:3) 30",
    f"{BENCH};{INGRESS};main (cli.py:1) 10",
    f"{BENCH};Condition.wait (threading.py:331) 5",
    'process 22:"python -m bench.run";process 31:"python -c import time',
    'time.sleep(1)";<module> (<string>:2) 7',
    "",
]


def test_collapsed_stacks_are_the_innermost_process_its_frames_and_samples():
    parsed = list(parse_collapsed(STACKS))
    assert parsed[0] == (
        "10 python -m replicator ingress --config a;b.toml",
        ["run (ingress/worker.py:50)", "produce (w.py:9)"],
        60,
    )
    assert parsed[3] == ("22 python -m bench.run", ["Condition.wait (threading.py:331)"], 5)
    # A command line over two lines (python -c) is joined back.
    assert parsed[4] == ("31 python -c import time time.sleep(1)", ["<module> (<string>:2)"], 7)
    assert len(parsed) == 5


def test_the_summary_gives_each_process_its_own_and_inclusive_shares():
    lines = summarise(STACKS).splitlines()
    assert lines[0] == f"112 samples at {RATE}/s in 3 processes"
    ingress = lines.index(
        "== 10 python -m replicator ingress --config a;b.toml: 100 samples (1.0 s on a core), "
        "0% of them in calls that wait"
    )
    assert lines[ingress + 1 : ingress + 5] == [
        "  -- own --",
        "   60.0%  produce (w.py:9)",
        "   30.0%  read (r.py:3)",
        "   10.0%  main (cli.py:1)",
    ]
    assert "   90.0%  run (ingress/worker.py:50)" in lines[ingress + 5 :]
    bench = lines.index(
        "== 22 python -m bench.run: 5 samples (0.1 s on a core), 100% of them in calls that wait"
    )
    assert bench > ingress
    assert lines[bench + 2] == "  100.0%  Condition.wait (threading.py:331)  [waits]"


def test_waiting_calls_are_told_from_work():
    assert waiting("_PollLikeSelector.select (selectors.py:415)")
    assert waiting("SocketIO.readinto (socket.py:706)")
    assert waiting("Thread._wait_for_tstate_lock (threading.py:1132)")
    assert not waiting("with_provenance (replicator/core/kafka/provenance.py:102)")
    assert not waiting("Producer.produce (w.py:9)")


def descends_from(pid: int, ancestor: int) -> bool:
    """Whether ``pid`` is ``ancestor`` or one of its descendants (False once it exited)."""
    while pid > 1:
        if pid == ancestor:
            return True
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return False
        pid = int(stat.rsplit(")", 1)[1].split()[1])
    return False


def spin(seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        sum(range(1000))


def test_a_stage_not_asked_for_is_not_profiled(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(profiles, "_wanted", set())
    monkeypatch.setattr(profiles, "_directory", tmp_path)
    with profiles.profiled("egress"):
        pass
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(profiles.py_spy() is None, reason="py-spy is not installed")
def test_a_profiled_stage_samples_this_process_and_its_children_once(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(profiles, "_wanted", set())
    monkeypatch.setattr(profiles, "_done", set())
    profiles.enable(["relay"], tmp_path)
    busy = (
        "import time\nprint('started', flush=True)\n"
        "t = time.monotonic()\nwhile time.monotonic() - t < 5: pass"
    )
    # The child's interpreter runs before the sampling starts: py-spy tries a new process
    # a few times just after it appears and never again, and a child that took longer to
    # start (the suite's load) was left out. At its start py-spy waits for every child.
    worker = subprocess.Popen([sys.executable, "-c", busy], stdout=subprocess.PIPE, text=True)
    assert worker.stdout is not None and worker.stdout.readline() == "started\n"
    with profiles.profiled("relay"):
        spin(2.0)
        worker.wait(30)
    summary = (tmp_path / "relay-summary.txt").read_text()
    assert "spin (" in summary and "test_profiles.py" in summary
    # This process and the child, each once; any other process sampled is one this
    # process started before (under xdist: the session's local stack, S3 and replication
    # being Python), never one outside its tree.
    sampled = [int(pid) for pid in re.findall(r"^== (\d+) ", summary, re.MULTILINE)]
    assert len(sampled) == len(set(sampled)), summary
    assert {os.getpid(), worker.pid} <= set(sampled), summary
    others = set(sampled) - {worker.pid}  # the child has exited
    assert all(descends_from(pid, os.getpid()) for pid in others), summary
    assert (tmp_path / "relay.txt").stat().st_size > 0
    # Once per stage: a second run of the stage is not profiled again.
    (tmp_path / "relay.txt").unlink()
    with profiles.profiled("relay"):
        pass
    assert not (tmp_path / "relay.txt").exists()


def test_cprofile_reports_are_kept_with_their_raw_statistics(tmp_path: Path, capsys):
    profile = cProfile.Profile()
    profile.enable()
    spin(0.05)
    profile.disable()
    report = profiles.cprofile_report("own time", pstats.Stats(profile), "tottime", 5)
    profiles.keep_cprofile("egress-read", report, profile, tmp_path)
    kept = (tmp_path / "egress-read-cprofile.txt").read_text()
    assert kept.startswith("== own time ==") and "spin" in kept
    kept_stats = pstats.Stats(str(tmp_path / "egress-read.pstats"))
    assert "spin" in kept_stats.get_stats_profile().func_profiles
    assert "own time" in capsys.readouterr().out
