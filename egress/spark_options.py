"""How the deployment config reaches egress's data source and sink in Spark processes.

Spark builds data sources from string options and pickles readers and writers into other
processes (planner processes on the driver, executors anywhere in the cluster), which may
not have the config file or its environment. So the driver passes the validated config,
secrets resolved, as JSON in one option. Its name contains "secret" so that Spark's
default ``spark.redaction.regex`` hides the value in plans, logs and the UI.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import SecretStr

from replicator.config import Config

CONFIG_OPTION = "replicator_config_secret"


def _reveal(value: Any) -> Any:
    if isinstance(value, SecretStr):
        return value.get_secret_value()
    if isinstance(value, dict):
        return {k: _reveal(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_reveal(v) for v in value]
    return value


def config_to_option(config: Config) -> str:
    return json.dumps(_reveal(config.model_dump()))


def config_from_options(options: Any) -> Config:
    return Config.model_validate(json.loads(options[CONFIG_OPTION]))
