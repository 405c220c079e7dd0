"""``${NAME}`` references to environment variables, and secrets that a process lacks.

Secrets stay out of the file: a ``${NAME}`` is replaced by the environment variable
``NAME`` at load (where a reference is allowed at all is decided in
:mod:`replicator.core.config.references`). A variable that is not set is an error at
load, except in a secret field: there the value becomes an :class:`UnsetSecret`, which
loads and raises the error naming the variable and the key where the secret is used, so
that each process needs only the secrets it uses. Secret fields are
:class:`pydantic.SecretStr` and never appear in reprs, logs or error messages.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, SecretStr

from replicator.core.config._common import key_path
from replicator.core.errors import ConfigError

_ENV_RE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def secret_paths(value: Any, path: tuple[str | int, ...] = ()) -> list[tuple[str | int, ...]]:
    """The paths of every secret field set in ``value`` (a model, dict or list)."""
    if isinstance(value, SecretStr):
        return [path]
    if isinstance(value, BaseModel):
        items: Any = ((name, getattr(value, name)) for name in type(value).model_fields)
    elif isinstance(value, dict):
        items = value.items()
    elif isinstance(value, list):
        items = enumerate(value)
    else:
        return []
    return [found for key, item in items for found in secret_paths(item, (*path, key))]


def expand_env(
    text: str, env: Mapping[str, str], where: str, path: tuple[str | int, ...] = ()
) -> str:
    """``text`` (the value at key ``path``) with every ``${NAME}`` replaced from
    ``env``; ``ConfigError`` naming ``where``, the key and the variable when one is not
    set."""
    problems: list[tuple[str, str]] = []
    expanded = _expand_env(text, path, env, problems)
    if problems:
        raise ConfigError(where, problems)
    return str(expanded)


def expand_secret(
    text: str, env: Mapping[str, str], where: str, path: tuple[str | int, ...]
) -> str | UnsetSecret:
    """The secret at key ``path`` that ``text`` refers to, from ``env``; an
    :class:`UnsetSecret` naming ``where`` when a variable is not set (an error where
    the secret is used, as at load)."""
    expanded: str | UnsetSecret = _expand_env(text, path, env, [], source=where)
    return expanded


def has_env_reference(text: str) -> bool:
    return _ENV_RE.search(text) is not None


def _at(data: Any, path: tuple[str | int, ...]) -> Any:
    """The value at ``path`` in parsed TOML, or None."""
    for key in path:
        try:
            data = data[key]
        except (KeyError, IndexError, TypeError):
            return None
    return data


class UnsetSecret(SecretStr):
    """A secret field whose ``${NAME}`` variable this process lacks: the config loads
    (a process is given only the secrets it uses), and reading the secret raises the
    ConfigError naming the variable and the key: where it is used, never as an empty
    value."""

    def __init__(self, written: str, source: str, where: str, problem: str) -> None:
        super().__init__(written)
        self._error = ConfigError(source, [(where, problem)])

    def get_secret_value(self) -> str:
        raise self._error

    def __eq__(self, other: object) -> bool:
        # The same reference unset at the same key, whichever process (its source, in
        # the error) could not resolve it: a Spark process's copy equals the driver's.
        return isinstance(other, UnsetSecret) and self._identity() == other._identity()

    def __hash__(self) -> int:
        return hash(self._identity())

    def _identity(self) -> tuple[str, tuple[tuple[str, str], ...]]:
        return self._secret_value, tuple(self._error.problems)

    def __repr__(self) -> str:
        return f"UnsetSecret({self._error.problems[0][1]!r})"


def _expand_env(
    value: Any,
    path: tuple[str | int, ...],
    env: Mapping[str, str],
    problems: list[tuple[str, str]],
    source: str | None = None,
) -> Any:
    """``value`` with references replaced from ``env``; each unset variable is a problem.
    With a ``source``, a string with an unset variable becomes an :class:`UnsetSecret`
    (accepted by secret fields only: every other field refuses it)."""
    if isinstance(value, dict):
        return {k: _expand_env(v, (*path, k), env, problems, source) for k, v in value.items()}
    if isinstance(value, list):
        return [_expand_env(v, (*path, i), env, problems, source) for i, v in enumerate(value)]
    if isinstance(value, str):
        found: list[tuple[str, str]] = []

        def substitute(match: re.Match[str]) -> str:
            name = match.group(1)
            if name not in env:
                found.append((key_path(path), f"environment variable {name} is not set"))
                return ""
            return env[name]

        expanded = _ENV_RE.sub(substitute, value)
        problems += found
        if found and source is not None:
            return UnsetSecret(value, source, *found[0])
        return expanded
    return value
