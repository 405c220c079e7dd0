"""The validated config as JSON, for processes that have no config file of their own.

Spark builds data sources from string options and pickles readers, writers and tasks into
other processes (planner processes on the driver, executors anywhere in the cluster). The
driver hands them the config as JSON in which every secret, and every other value the file
wrote with a ``${NAME}`` reference, is that reference: plans, task payloads, the UI and
logs hold the reference, and each receiving process resolves it from its own environment.

Why a module of its own: every Spark Python process that runs egress, restore or compaction
code imports it first, so it imports the config model and nothing else (no Spark launcher,
no AWS SDK): each import here is paid once per Python worker.
"""

from __future__ import annotations

import json
import logging
import os
import socket
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ValidationError

from replicator.core.config import (
    Config,
    UnsetSecret,
    dump_json,
    expand_env,
    expand_secret,
    has_env_reference,
    key_path,
    reference_texts,
    remember_references,
    secret_paths,
    secret_text,
    validation_problems,
)
from replicator.core.errors import ConfigError

log = logging.getLogger(__name__)

SECRET_REFERENCES = "secret_references"
"""The payload's list of paths whose values are ``${NAME}`` references to resolve."""
UNSET_SECRETS = "unset_secrets"
"""The payload's list of secrets whose variables the sending process lacked too (it
does not use them): a receiving process that lacks them holds them unset as well, an
error only where one is used. Any other reference it cannot resolve is an error at once."""


def config_to_json(config: Config) -> str:
    """The validated config for processes that have no config file of their own (Spark's
    planner processes and executors), with every secret, and every other value the file
    wrote with a reference, as the file wrote it: a ``${NAME}`` reference that the
    receiving process resolves from its own environment, so that plans, task payloads
    and logs never hold the value. A secret written in clear in the file, or set
    without a file, travels as it is (with a warning); one whose variable this process
    lacks travels as its reference, unset where the receiving process lacks it too."""
    data = dump_json(config)
    references: list[list[str | int]] = []
    unset: list[list[str | int]] = []
    for path in secret_paths(config):
        text = secret_text(config, path)
        if text is not None and has_env_reference(text):
            _put(data, path, text)
            references.append(list(path))
            if isinstance(_get(config, path), UnsetSecret):
                unset.append(list(path))
        else:
            _warn_clear_secret(path)
            _put(data, path, _get(config, path).get_secret_value())
    secrets = {tuple(p) for p in references}
    for path, text in reference_texts(config, data).items():  # the others written so
        if path not in secrets and _has(data, path):
            _put(data, path, text)
            references.append(list(path))
    payload = {SECRET_REFERENCES: references, UNSET_SECRETS: unset}
    return json.dumps({**payload, "config": data, "source": config.source})


def config_from_json(text: str, env: Mapping[str, str] | None = None) -> Config:
    """The config :func:`config_to_json` wrote, its secret references resolved from
    ``env`` (this process's environment by default).

    Raises :class:`ConfigError` naming the config, the host of this Spark process and
    every key at fault: a variable that is not set, or a value the model refuses (a
    bug: the sender validated it), never with the value."""
    payload = json.loads(text)
    shipped, source = payload["config"], payload.get("source", "config")
    data = json.loads(json.dumps(shipped))  # resolved below; ``shipped`` keeps the texts
    environment = os.environ if env is None else env
    where = f"{source} (in a Spark process on {socket.gethostname()})"
    may_stay_unset = {tuple(path) for path in payload.get(UNSET_SECRETS, [])}
    problems: list[tuple[str, str]] = []
    for path in map(tuple, payload[SECRET_REFERENCES]):
        written = _get(shipped, path)
        if path in may_stay_unset:
            _put(data, path, expand_secret(written, environment, where, path))
            continue
        try:
            _put(data, path, expand_env(written, environment, where, path))
        except ConfigError as exc:
            problems += exc.problems
    if problems:
        raise ConfigError(where, problems)
    try:
        config = Config.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(where, validation_problems(exc)) from None
    config._source = source
    config._secret_texts = {  # as the file wrote them, for the next hand-over
        path: _get(shipped, path) for path in secret_paths(config)
    }
    remember_references(
        config,
        {
            tuple(path): text
            for path in payload[SECRET_REFERENCES]
            if isinstance(text := _get(shipped, path), str) and has_env_reference(text)
        },
    )
    return config


def _warn_clear_secret(path: tuple[str | int, ...]) -> None:
    log.warning(
        "%s is not a ${NAME} reference: it is handed to Spark processes as it is",
        key_path(path),
    )


def _get(value: Any, path: Sequence[str | int]) -> Any:
    """The value at ``path`` in a model (by attribute) or in dumped JSON (by index)."""
    for key in path:
        value = getattr(value, str(key)) if isinstance(value, BaseModel) else value[key]
    return value


def _has(data: Any, path: Sequence[str | int]) -> bool:
    """Whether dumped JSON has a value at ``path``."""
    try:
        _get(data, path)
    except (KeyError, IndexError, TypeError):
        return False
    return True


def _put(data: Any, path: Sequence[str | int], value: Any) -> None:
    *parents, last = path
    container: Any = _get(data, parents)
    container[last] = value
