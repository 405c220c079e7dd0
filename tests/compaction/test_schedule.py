"""Cron scheduling: a schedule with seconds fires repeatedly; fire times a long run took
are skipped, not made up for."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime

from compaction.schedule import next_fire, run_on_schedule


def test_next_fire_supports_a_seconds_field():
    base = 1_800_000_000.0  # a multiple of 10 seconds
    assert next_fire("* * * * * */5", base) == base + 5
    assert next_fire("0 1 * * *", base) > base


def test_runs_fire_on_schedule_and_a_long_run_skips_instead_of_overlapping(caplog):
    stop = threading.Event()
    started: list[float] = []
    finished: list[float] = []

    def run() -> None:
        started.append(time.time())
        if len(started) == 1:
            time.sleep(2.5)  # longer than the 1-second period
        finished.append(time.time())
        if len(started) == 3:
            stop.set()

    with caplog.at_level("INFO", logger="compaction.schedule"):
        assert run_on_schedule("* * * * * *", run, stop) == 3
    # The fire times the long run took are skipped, not made up for: the next runs are due
    # at later fire times one period apart, not back to back as soon as it ended.
    # 2.5 s from a fire time covers 2 later ones, or 3 when the run starts late.
    assert any(re.search("past [23] fire times", r.getMessage()) for r in caplog.records), (
        caplog.text
    )
    # Judged on the fire times the scheduler chose (it logs each), not on when the runs
    # started: on a loaded machine a run starts some 100 ms after its fire time.
    due = [
        datetime.fromisoformat(m.group(1)).timestamp()
        for r in caplog.records
        if (m := re.fullmatch(r"next compaction run at (\S+)", r.getMessage()))
    ]
    assert len(due) >= 3, caplog.text
    assert due[1] - 1.0 <= finished[0] < due[1]  # the first fire time after the long run
    assert due[2] - due[1] == 1.0  # then the next one, a period later
    assert all(start >= fire for start, fire in zip(started, due, strict=False))


def test_the_compact_command_fires_twice_then_stops_cleanly(compaction_setup, tmp_path):
    setup = compaction_setup()  # schedule "* * * * * */3"
    log = tmp_path / "compact.log"
    process = subprocess.Popen(
        [sys.executable, "-m", "replicator", "compact", "--config", str(setup.path)],
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60

        def runs() -> int:  # printed summaries; the log repeats them with a prefix
            return sum(line.startswith("compaction: ") for line in log.read_text().splitlines())

        while runs() < 2:
            assert process.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 0
    finally:
        if process.poll() is None:
            process.kill()
    assert "next compaction run at" in log.read_text()
