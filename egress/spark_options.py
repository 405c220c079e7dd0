"""How the deployment config reaches egress's data source and sink in Spark processes.

Spark builds data sources from string options and pickles readers and writers into other
processes (planner processes on the driver, executors anywhere in the cluster), which may
not have the config file. So the driver passes the validated config as JSON in one
option, with every secret as the ``${NAME}`` reference the file wrote: plans, logs, the UI
and task payloads show the reference, and each process resolves it from its own
environment (see :func:`replicator.core.config_json.config_to_json`). Nothing relies on Spark's
redaction.
"""

from __future__ import annotations

from typing import Any

from replicator.core.config import Config
from replicator.core.config_json import config_from_json, config_to_json

CONFIG_OPTION = "replicator_config"
TASKS_OPTION = "replicator_tasks"
"""Tasks per micro-batch: the cluster's parallelism, read by the driver at start."""


def config_to_option(config: Config) -> str:
    return config_to_json(config)


def config_from_options(options: Any) -> Config:
    return config_from_json(options[CONFIG_OPTION])
