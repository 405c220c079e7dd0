"""Spark's logs in the service's own format.

A Spark job (egress, compaction, restore) writes three kinds of lines: the project's
Python logging in the driver, the same in Spark's Python workers, and the JVM's log4j2.
With ``--log-format json`` every one of them must be one JSON object, with the project's
field names (``time``, ``level``, ``logger``, ``message``, ``exception``); in text mode
one readable pattern.

- The driver's JVM (with a local master, the executors too): a log4j2 configuration
  written for the process (log4j2's JSON template layout, whose jar ships with PySpark),
  handed to it with ``-Dlog4j2.configurationFile``. Executor JVMs of a cluster log as the
  cluster's log4j2 configuration says. Spark's own default profile (and its
  ``Using Spark's default log4j profile`` line) is then not used. Root level WARN, as
  Spark's shell sets it.
- Python workers: :data:`LOG_ENV` carries the level and format to them (Spark passes
  ``spark.executorEnv.*`` to their environment), and
  :func:`replicator.core.logs.configure_worker_logging` sets it up in each worker.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from replicator.core.logs import LOG_ENV, current_logging

_TIME = "yyyy-MM-dd'T'HH:mm:ss.SSSxxx"
JSON_EVENT_TEMPLATE = {
    "time": {"$resolver": "timestamp", "pattern": {"format": _TIME, "timeZone": "UTC"}},
    "level": {"$resolver": "level", "field": "name"},
    "logger": {"$resolver": "logger", "field": "name"},
    "message": {"$resolver": "message", "stringified": True},
    "exception": {
        "$resolver": "exception",
        "field": "stackTrace",
        "stackTrace": {"stringified": True},
    },
}
TEXT_PATTERN = "%d{yyyy-MM-dd HH:mm:ss,SSS} %p %c %m%n%ex"
"""The text mode's pattern, as Python's: time, level, logger, message."""


def log4j2_properties(fmt: str) -> str:
    """A log4j2 configuration writing to stderr in ``fmt`` ("json" or "text"). Pure."""
    if fmt == "json":
        layout = [
            "appender.console.layout.type = JsonTemplateLayout",
            "appender.console.layout.eventTemplate = "
            + json.dumps(JSON_EVENT_TEMPLATE, separators=(",", ":")),
        ]
    else:
        layout = [
            "appender.console.layout.type = PatternLayout",
            f"appender.console.layout.pattern = {TEXT_PATTERN}",
        ]
    return "\n".join(
        [
            "status = error",
            "appender.console.type = Console",
            "appender.console.name = console",
            "appender.console.target = SYSTEM_ERR",
            *layout,
            "rootLogger.level = warn",
            "rootLogger.appenderRef.console.ref = console",
            # Spark's own chatter at start-up, as its shell quiets it.
            "logger.native.name = org.apache.hadoop.util.NativeCodeLoader",
            "logger.native.level = error",
            "",
        ]
    )


def spark_log_settings(extra: dict[str, str]) -> dict[str, str]:
    """Session settings that put the JVMs' log4j2 and the Python workers' logging in this
    process's format; ``extra`` Java options the caller sets are kept after ours."""
    level, fmt = current_logging()
    directory = Path(tempfile.gettempdir()) / f"replicator-log4j2-{os.getuid()}"
    directory.mkdir(mode=0o700, exist_ok=True)
    path = directory / f"{fmt}.properties"
    text = log4j2_properties(fmt)
    if not path.exists() or path.read_text() != text:
        staged = path.with_suffix(f".{os.getpid()}")
        staged.write_text(text)
        staged.replace(path)
    option = f"-Dlog4j2.configurationFile=file:{path}"
    driver_options = "spark.driver.extraJavaOptions"
    return {
        f"spark.executorEnv.{LOG_ENV}": f"{level}:{fmt}",
        driver_options: f"{option} {extra.get(driver_options, '')}".strip(),
    }
