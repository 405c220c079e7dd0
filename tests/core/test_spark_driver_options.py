"""The driver JVM's options the product sets: a bounded run's driver compiles with C1
only, a streaming driver keeps the full compiler, and options the caller gives come after
the product's (HotSpot takes the last of a repeated option)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from replicator.core.spark import BOUNDED_DRIVER_JAVA_OPTIONS, with_driver_java_options

OPTIONS = "spark.driver.extraJavaOptions"
ARCHIVE = "-XX:SharedArchiveFile=/cache/a.jsa -Xlog:cds=off"


def test_a_bounded_run_compiles_with_c1_only_and_a_streaming_one_does_not() -> None:
    assert with_driver_java_options({}, "", bounded=True) == {OPTIONS: "-XX:TieredStopAtLevel=1"}
    assert with_driver_java_options({}, "", bounded=False) == {}
    assert with_driver_java_options({"k": "v"}, ARCHIVE, bounded=False) == {
        "k": "v",
        OPTIONS: ARCHIVE,
    }


def test_the_callers_options_come_last_so_theirs_win() -> None:
    given = {OPTIONS: "-XX:TieredStopAtLevel=4 -Dx=y"}
    assert with_driver_java_options(given, ARCHIVE, bounded=True) == {
        OPTIONS: f"{ARCHIVE} {BOUNDED_DRIVER_JAVA_OPTIONS} -XX:TieredStopAtLevel=4 -Dx=y"
    }
    assert with_driver_java_options(given, "", bounded=False) == given


PROBE = """
from replicator.core.spark import spark_session
spark = spark_session("local[1]", "probe", {}, bounded=True)
jvm = spark.sparkContext._jvm
bean = jvm.java.lang.management.ManagementFactory.getPlatformMXBean(
    jvm.java.lang.Class.forName("com.sun.management.HotSpotDiagnosticMXBean")
)
print("TieredStopAtLevel", bean.getVMOption("TieredStopAtLevel").getValue())
spark.stop()
"""


@pytest.mark.integration  # starts a Spark driver
def test_a_bounded_sessions_driver_jvm_runs_with_c1_only() -> None:
    # Without the suite's own C1 default (tests/fixtures/jvm.py), which would hide ours.
    env = {k: v for k, v in os.environ.items() if k != "PYSPARK_SUBMIT_ARGS"}
    done = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "TieredStopAtLevel 1" in done.stdout, done.stdout + done.stderr[-2000:]
