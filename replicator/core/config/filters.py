"""Record filters: a filter's entry in an ingress source or relay topic (``filters``),
and ``[filters]``, the modules filter plugins may be loaded from.

A plugin is code run inside the service with its credentials, so the modules it may
come from are listed in the config and checked at load, before anything imports them
(:mod:`replicator.core.config.loader`). A filter's table reaches Spark processes as
JSON, so it may hold only values JSON has."""

from __future__ import annotations

import datetime
import math
from typing import Annotated, Any

from pydantic import AfterValidator, Field

from replicator.core.config._common import _Model, key_path


def _json_values(table: dict[str, Any]) -> dict[str, Any]:
    """A filter's table with only values JSON has, so that they reach Spark processes as
    they are (the config is handed to them as JSON): a TOML date or time would arrive
    as text, inf or nan as null. Others are refused by their key, never their value."""
    problems = [
        f"{key_path(path)}: {problem}"
        for path, value in _leaves(table, ())
        if (problem := _not_json(value))
    ]
    if problems:
        raise ValueError("; ".join(problems))
    return table


def _leaves(value: Any, path: tuple[str | int, ...]) -> list[tuple[tuple[str | int, ...], Any]]:
    if isinstance(value, dict):
        return [leaf for k, v in value.items() for leaf in _leaves(v, (*path, k))]
    if isinstance(value, list):
        return [leaf for i, v in enumerate(value) for leaf in _leaves(v, (*path, i))]
    return [(path, value)]


def _not_json(value: Any) -> str | None:
    """Why JSON cannot carry ``value`` (None: it can)."""
    if isinstance(value, datetime.date | datetime.time):
        return "a TOML date or time, which JSON lacks (write it as text)"
    if isinstance(value, float) and not math.isfinite(value):
        return "inf or nan, which JSON lacks"
    return None


class FilterSpec(_Model):
    """A record filter: ``plugin`` names a callable ``module:attribute`` that receives
    ``config`` once and returns the filter (see :mod:`replicator.core.filters`)."""

    plugin: Annotated[str, Field(pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")]
    """``module:attribute``; the pattern is matched by pydantic's engine, where ``$`` is
    the very end of the text."""
    config: Annotated[dict[str, Any], AfterValidator(_json_values)] = Field(default_factory=dict)
    """The table the plugin's factory is called with. Its values are JSON's (text,
    numbers, booleans, arrays and tables; no dates, times, inf or nan): Spark processes
    get the config as JSON."""


BUILTIN_FILTERS_MODULE = "replicator.core.filters.builtin"


class FiltersConfig(_Model):
    """Where record filter plugins may come from. A plugin is imported and run inside
    the service with its credentials: whoever writes the config chooses code the
    service runs, so the modules it may name are listed here."""

    allowed_modules: list[Annotated[str, Field(pattern=r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")]] = (
        Field(default_factory=list)
    )
    """Modules (or packages, with every module under them) that filter plugins may be
    loaded from, besides the built-in filters (``replicator.core.filters.builtin``)."""

    def allows(self, plugin: str) -> bool:
        """Whether ``plugin`` (``module:attribute``) comes from an allowed module. Pure."""
        module = plugin.partition(":")[0]
        return any(
            module == prefix or module.startswith(prefix + ".")
            for prefix in (BUILTIN_FILTERS_MODULE, *self.allowed_modules)
        )
