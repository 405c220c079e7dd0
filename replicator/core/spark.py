"""Spark plumbing shared by egress and compaction: the session, and the config handed to
code that runs in other Spark processes."""

from __future__ import annotations

import json
import os
import sys
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
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark


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
