"""Where a ``${NAME}`` reference may be written, and what is remembered of the ones the
file wrote.

A reference is expanded in a secret field and in ``sasl_username`` (each service its own
user, one file), and nowhere else: a reference in any other field is refused at load,
naming the key (:func:`reference_allowed`), since a secret expanded there would be shown
in clear (``config check``, logs, a client id sent to the broker). Every value written
with a reference is remembered as written: processes without the file (Spark's) get the
reference and resolve it themselves (:func:`reference_texts`, :func:`dump_json`)."""

from __future__ import annotations

import types
import typing
from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import BaseModel, SecretStr

from replicator.core.config.model import Config
from replicator.core.config.secrets import UnsetSecret, _at, has_env_reference, secret_paths

REFERENCE_FIELDS = frozenset({("KafkaConfig", "sasl_username")})
"""Fields besides the secret ones whose ``${NAME}`` references are expanded: the user a
process authenticates as (one config file for every service, each service its own user
from its own environment). Not a secret, and shown as such."""
REFERENCE_REFUSED = (
    "a ${NAME} reference is expanded only in a secret field or sasl_username (elsewhere "
    "it would show a secret in clear); write the value itself"
)


def reference_allowed(path: tuple[str | int, ...]) -> bool:
    """Whether a ``${NAME}`` reference at key ``path`` of the file is expanded: in a
    secret field (:class:`pydantic.SecretStr`, alone or in a list) or one of
    :data:`REFERENCE_FIELDS`; found from the model's annotations, before validation.
    Pure."""
    annotation: Any = Config
    owner, last = "", ""
    for part in path:
        annotation = _unwrapped(annotation)
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            field = annotation.model_fields.get(str(part))
            if field is None:
                return False
            owner, annotation = annotation.__name__, field.annotation
            last = str(part)
        elif typing.get_origin(annotation) is list:
            annotation = typing.get_args(annotation)[0]
        elif typing.get_origin(annotation) is dict:
            annotation = typing.get_args(annotation)[1]
        else:
            return False
    annotation = _unwrapped(annotation)
    if isinstance(annotation, type) and issubclass(annotation, SecretStr):
        return True
    return bool(path) and (owner, last) in REFERENCE_FIELDS and not isinstance(path[-1], int)


def _unwrapped(annotation: Any) -> Any:
    """``annotation`` without ``Annotated`` and ``None`` in a union; a union of several
    types is left as it is."""
    while True:
        origin = typing.get_origin(annotation)
        if origin is Annotated:
            annotation = typing.get_args(annotation)[0]
        elif origin in (typing.Union, types.UnionType):
            members = [a for a in typing.get_args(annotation) if a is not type(None)]
            if len(members) != 1:
                return annotation
            annotation = members[0]
        else:
            return annotation


def remember_references(config: Config, texts: dict[tuple[str | int, ...], str]) -> None:
    """Note ``texts``, the values of ``config`` written with ``${NAME}`` references
    (by key path, as written), and the values they gave."""
    dumped = dump_json(config)
    config._reference_texts = texts
    config._reference_values = {path: _at(dumped, path) for path in texts}


def reference_texts(config: Config, dumped: Mapping[str, Any]) -> dict[tuple[str | int, ...], str]:
    """Every value the file wrote with a ``${NAME}`` reference, by key path, as written,
    that ``config`` (``dumped``: its :func:`dump_json`) still holds."""
    return {
        path: text
        for path, text in config._reference_texts.items()
        if path in config._reference_values and _at(dumped, path) == config._reference_values[path]
    }


def dump_json(config: Config) -> dict[str, Any]:
    """``config`` as JSON data, each secret this process lacks (:class:`UnsetSecret`)
    written empty: dumping a secret reads it, and reading that one raises."""
    masked: Any = config
    for path in secret_paths(config):
        if isinstance(_value_at(config, path), UnsetSecret):
            masked = _replaced(masked, path, SecretStr(""))
    dumped: dict[str, Any] = masked.model_dump(mode="json")
    return dumped


def _value_at(value: Any, path: tuple[str | int, ...]) -> Any:
    """The value at ``path`` in a model (by attribute), dict or list."""
    for key in path:
        value = getattr(value, str(key)) if isinstance(value, BaseModel) else value[key]
    return value


def _replaced(value: Any, path: tuple[str | int, ...], new: Any) -> Any:
    """A copy of ``value`` (models, dicts and lists) with ``new`` at ``path``."""
    if not path:
        return new
    key, rest = path[0], path[1:]
    if isinstance(value, BaseModel):
        inner = getattr(value, str(key))
        return value.model_copy(update={str(key): _replaced(inner, rest, new)})
    if isinstance(value, list):
        items = list(value)
        items[int(key)] = _replaced(items[int(key)], rest, new)
        return items
    return {**value, key: _replaced(value[key], rest, new)}


def _references(value: Any, path: tuple[str | int, ...]) -> list[tuple[tuple[str | int, ...], str]]:
    """The (path, text) of every string in parsed TOML that holds a reference."""
    if isinstance(value, dict):
        return [found for k, v in value.items() for found in _references(v, (*path, k))]
    if isinstance(value, list):
        return [found for i, v in enumerate(value) for found in _references(v, (*path, i))]
    if isinstance(value, str) and has_env_reference(value):
        return [(path, value)]
    return []


def secret_text(config: Config, path: tuple[str | int, ...]) -> str | None:
    """The secret at ``path`` as the file wrote it (``${NAME}`` unexpanded); None for a
    config that did not come from a file."""
    return config._secret_texts.get(path)
