"""Logging configuration for entry points (and only for them).

Library modules log through ``logging.getLogger(__name__)`` and never configure handlers.
One line per event: plain text for people, or ``--log-format json`` for log shippers, where
fields passed with ``extra=`` (region, topic, partition, offsets, key) become JSON fields.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from datetime import UTC, datetime
from typing import Any

_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"
FIELDS = ("region", "topic", "partition", "offset", "start", "end", "key", "batch")


class JsonFormatter(logging.Formatter):
    """One JSON object per line."""

    def format(self, record: logging.LogRecord) -> str:
        data: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in FIELDS:
            if hasattr(record, name):
                data[name] = getattr(record, name)
        if record.exc_info:
            data["exception"] = self.formatException(record.exc_info)
        return json.dumps(data, default=str)


LOG_ENV = "REPLICATOR_LOG"
"""``LEVEL:FORMAT`` of the process that started a Spark job, for its Python workers."""


def configure_logging(level: str = "INFO", fmt: str = "text") -> None:
    """Log to stderr; noisy client libraries are kept at WARNING."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(_FORMAT))
    logging.basicConfig(level=level.upper(), handlers=[handler], force=True)
    for noisy in ("botocore", "boto3", "s3transfer", "urllib3", "py4j"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


_worker_configured = False


def configure_worker_logging() -> None:
    """In a Spark Python worker: log as the process that started the job does
    (:data:`LOG_ENV`), once per worker. Without it a worker's lines would reach stderr
    through Python's last-resort handler, bare messages in neither format."""
    global _worker_configured
    setting = os.environ.get(LOG_ENV)
    if _worker_configured or not setting:
        return
    level, _, fmt = setting.partition(":")
    configure_logging(level or "INFO", fmt or "text")
    _worker_configured = True


def current_logging() -> tuple[str, str]:
    """The level and format :func:`configure_logging` set in this process, for a child
    process to configure its own logging the same way."""
    root = logging.getLogger()
    formatter = root.handlers[0].formatter if root.handlers else None
    fmt = "json" if isinstance(formatter, JsonFormatter) else "text"
    return logging.getLevelName(root.level), fmt


class ContextLog(logging.LoggerAdapter[logging.Logger]):
    """A logger that adds fixed fields (region, topic, partition) to every record, merged
    with the call's own ``extra`` (offsets), so per-partition code logs them without
    repeating them at each call."""

    def process(self, msg: object, kwargs: Any) -> tuple[object, Any]:
        kwargs["extra"] = {**(self.extra or {}), **kwargs.get("extra", {})}
        return msg, kwargs


def partition_fields(region: str, topic: str, partition: int, **offsets: int) -> dict[str, Any]:
    """The ``extra=`` of a log line about one partition, e.g. ``start=..., end=...``."""
    return {"region": region, "topic": topic, "partition": partition, **offsets}
