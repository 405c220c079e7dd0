"""Spark plumbing shared by egress and compaction: the session, and the config handed to
code that runs in other Spark processes."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from replicator.core.aws.clients import REQUEST_LOG_ENV
from replicator.core.config import SparkConfig
from replicator.core.logs import current_logging
from replicator.core.spark_class_archive import driver_java_options
from replicator.core.spark_environment import executor_settings
from replicator.core.spark_logs import spark_log_settings

log = logging.getLogger(__name__)


CLUSTER_SECURITY = {
    "spark.authenticate": "true",
    "spark.network.crypto.enabled": "true",
    "spark.io.encryption.enabled": "true",
}
"""With a master that is not local, the driver, executors and shuffle authenticate each
other and encrypt what they send and spill. On Kubernetes and YARN Spark makes the shared
secret itself; a standalone cluster needs ``spark.authenticate.secret`` (or
``spark.authenticate.secret.file``) in ``spark-defaults.conf`` of its master, workers and
of the machine running the replicator (``SPARK_CONF_DIR``)."""


def spark_session(
    master: str | None,
    app_name: str,
    extra: dict[str, str],
    settings: SparkConfig | None = None,
    class_archive: bool = True,
    bounded: bool = False,
) -> Any:
    """A Spark session whose Python workers can import this package and its
    dependencies: the driver's own interpreter with a local master; on a cluster, the
    environment ``settings`` say (shipped by default, :mod:`replicator.core.spark_environment`).
    Its driver JVM maps the class archive recorded for its class path, if there is one
    (:mod:`replicator.core.spark_class_archive`; ``class_archive=False``: not).

    ``bounded``: the session serves a run that ends by itself (a restore, a compaction
    run, an export ``--stop-at-end``), and its driver JVM compiles with C1 only
    (:data:`BOUNDED_DRIVER_JAVA_OPTIONS`)."""
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    settings = settings or SparkConfig()
    executors = executor_settings(settings, master)
    archive = driver_java_options(settings) if class_archive else ""
    extra = with_driver_java_options(extra, archive, bounded=bounded)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    builder = builder.master(master or "local[*]")
    defaults = {
        "spark.ui.showConsoleProgress": "false",
        "spark.ui.enabled": "false",
        "spark.python.worker.reuse": "true",
        "spark.sql.streaming.stopGracefullyOnShutdown": "true",
        # One Spark task per planned range; keep Arrow batches of a useful size.
        "spark.sql.execution.arrow.maxRecordsPerBatch": "20000",
        "spark.sql.streaming.numRecentProgressUpdates": "20",
        **executors,
        **_request_log_setting(),
        **spark_log_settings(extra),
    }
    if not (master or "local").startswith("local"):
        defaults.update(CLUSTER_SECURITY)
    extra = {k: v for k, v in extra.items() if k != _DRIVER_JAVA_OPTIONS}  # merged above
    for key, value in {**defaults, **extra}.items():
        builder = builder.config(key, value)
    with _jvm_ignores_termination():
        if current_logging()[1] == "json":
            _launch_jvm_with_json_stderr({**defaults, **extra})
        spark = builder.getOrCreate()
    return spark


_DRIVER_JAVA_OPTIONS = "spark.driver.extraJavaOptions"

BOUNDED_DRIVER_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1"
"""The driver JVM of a run that ends by itself compiles with C1 only.

Why: the driver's JVM handles no record (the Python tasks read, write and produce them;
Spark gets a row per segment or per partition), so its CPU is start-up and compilation:
8.5 s compiling 8,343 methods in a 1,000,000-record export (Java Flight Recorder), most
of it C2's, on the two cores the tasks need. C1 alone starts a session about 1 s sooner
and runs its first job about 1 s sooner (measured: 3.7-3.8 against 4.8-4.9 s, and 2.0-2.2
against 2.9-3.2 s). A streaming driver lives for days and keeps the full compiler: there
compilation is paid once and its code runs every batch. Options given in ``extra`` come
after these, so a ``-XX:TieredStopAtLevel`` there wins."""


def with_driver_java_options(extra: dict[str, str], archive: str, bounded: bool) -> dict[str, str]:
    """``extra`` with the driver JVM's options this module sets put before any it holds
    (HotSpot takes the last of a repeated option, so the caller's win): ``archive``'s
    (the class archive's, or ``""``) and, for a ``bounded`` run,
    :data:`BOUNDED_DRIVER_JAVA_OPTIONS`."""
    ours = [
        option for option in (archive, BOUNDED_DRIVER_JAVA_OPTIONS if bounded else "") if option
    ]
    if not ours:
        return extra
    given = extra.get(_DRIVER_JAVA_OPTIONS, "")
    return {**extra, _DRIVER_JAVA_OPTIONS: " ".join([*ours, given]).strip()}


def _launch_jvm_with_json_stderr(settings: Mapping[str, str]) -> None:
    """Start the driver's JVM (unless running) with its stderr read by this process: the
    JVM's log4j2 lines are JSON already (:mod:`replicator.core.spark_logs`), and what the
    JVM writes past log4j2 (``WARNING: Using incubator modules…`` at start, a crash
    report) becomes a JSON line of the ``spark.jvm`` logger, so that every line a JSON
    mode service writes is one JSON object."""
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    if SparkContext._gateway is not None:
        return
    conf = SparkConf(loadDefaults=False).setAll(list(settings.items()))
    gateway = launch_gateway(conf, popen_kwargs={"stderr": subprocess.PIPE})
    SparkContext._ensure_initialized(gateway=gateway)
    process = gateway.proc
    threading.Thread(
        target=_forward_jvm_stderr, args=(process.stderr,), name="jvm-stderr", daemon=True
    ).start()


def _forward_jvm_stderr(stream: Any) -> None:
    jvm = logging.getLogger("spark.jvm")
    for raw in stream:
        line = raw.decode(errors="replace").rstrip("\n")
        if not line:
            continue
        if line.startswith("{") and line.endswith("}"):
            sys.stderr.write(line + "\n")
            sys.stderr.flush()
        else:
            jvm.warning("%s", line)


def _request_log_setting() -> dict[str, str]:
    """The AWS request log (a benchmark's) for this session's Python workers too: they are
    started by a JVM that may predate the variable (one per driver process)."""
    path = os.environ.get(REQUEST_LOG_ENV)
    return {f"spark.executorEnv.{REQUEST_LOG_ENV}": path} if path else {}


@contextmanager
def _jvm_ignores_termination() -> Iterator[None]:
    """Start the JVM with SIGTERM ignored, as PySpark already starts it with SIGINT ignored.

    A signal to the whole process group (systemd's default stop, container runtimes, a
    terminal) would otherwise reach the JVM, whose shutdown hook stops the SparkContext
    under the driver's graceful stop. A JVM started with a signal ignored keeps it ignored;
    it still exits when the driver does (it watches the gateway's stdin). The driver
    itself ignores SIGTERM only while the JVM starts (a few seconds); a stop sent then is
    not seen, and a second one is."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signal dispositions can only be changed from the main thread
        return
    previous = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
