"""Cron scheduling: a schedule with seconds fires repeatedly; fire times a long run took
are skipped, not made up for."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import threading
import time

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

    with caplog.at_level("WARNING"):
        assert run_on_schedule("* * * * * *", run, stop) == 3
    # The fire times the long run took are skipped, not made up for: the next runs start
    # at later fire times one period apart, not back to back as soon as it ended.
    # 2.5 s from a fire time covers 2 later ones, or 3 when the run starts late.
    assert any(re.search("past [23] fire times", r.getMessage()) for r in caplog.records), (
        caplog.text
    )
    assert 0 < started[1] - finished[0] <= 1.0
    assert started[2] - started[1] >= 0.9


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
