"""Spark plumbing shared by egress and compaction: the session, and the config handed to
code that runs in other Spark processes."""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from pydantic import SecretStr

from replicator.core.config import Config


def spark_session(master: str | None, app_name: str, extra: dict[str, str]) -> Any:
    """A Spark session whose Python workers run this interpreter (and so find this
    package and its dependencies)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    builder = builder.master(master or "local[*]")
    defaults = {
        "spark.ui.showConsoleProgress": "false",
        "spark.ui.enabled": "false",
        "spark.python.worker.reuse": "true",
        "spark.sql.streaming.stopGracefullyOnShutdown": "true",
        "spark.pyspark.python": sys.executable,
        "spark.executorEnv.PYSPARK_PYTHON": sys.executable,
        # One Spark task per planned range; keep Arrow batches of a useful size.
        "spark.sql.execution.arrow.maxRecordsPerBatch": "20000",
        "spark.sql.streaming.numRecentProgressUpdates": "20",
    }
    for key, value in {**defaults, **extra}.items():
        builder = builder.config(key, value)
    with _jvm_ignores_termination():
        spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark


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


def _reveal(value: Any) -> Any:
    if isinstance(value, SecretStr):
        return value.get_secret_value()
    if isinstance(value, dict):
        return {k: _reveal(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_reveal(v) for v in value]
    return value


def config_to_json(config: Config) -> str:
    """The validated config with secrets resolved, for processes that have no config file
    or environment of their own. Never log it."""
    return json.dumps(_reveal(config.model_dump()))


def config_from_json(text: str) -> Config:
    return Config.model_validate(json.loads(text))
