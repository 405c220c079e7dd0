"""Logging configuration for entry points (and only for them).

Library modules log through ``logging.getLogger(__name__)`` and never configure handlers.
"""

from __future__ import annotations

import logging
import sys

_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"


def configure_logging(level: str = "INFO") -> None:
    """One line per event on stderr; noisy client libraries are kept at WARNING."""
    logging.basicConfig(level=level.upper(), format=_FORMAT, stream=sys.stderr, force=True)
    for noisy in ("botocore", "boto3", "s3transfer", "urllib3", "py4j"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
