"""Loading: the TOML file read, its ``${NAME}`` references expanded, and the result
validated into a frozen :class:`~replicator.core.config.model.Config`.

Loading is strict: unknown keys, wrong types, dangling region references and
unparseable durations or sizes are all reported at once, each with the file and the key
path, and the process never starts half-configured. The checks across sections (regions
that sections name, destinations shared, filter plugins' modules allowed) are here; each
section's own checks are in its model. Errors never echo an input value, which may be a
secret."""

from __future__ import annotations

import os
import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from replicator.core.config._common import key_path
from replicator.core.config.filters import FilterSpec
from replicator.core.config.model import Config
from replicator.core.config.references import (
    REFERENCE_REFUSED,
    _references,
    reference_allowed,
    remember_references,
)
from replicator.core.config.relay import RelayConfig
from replicator.core.config.secrets import _at, _expand_env, secret_paths
from replicator.core.errors import ConfigError


def load_config(path: str | os.PathLike[str], env: Mapping[str, str] | None = None) -> Config:
    """Read, expand and validate the config file at ``path``.

    Raises :class:`ConfigError` listing every problem with its key path.
    """
    shown = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(shown, [("", "file not found")]) from None
    except OSError as exc:
        raise ConfigError(shown, [("", f"cannot read: {exc.strerror}")]) from None
    return parse_config(text, shown, os.environ if env is None else env)


def parse_config(text: str, source: str, env: Mapping[str, str]) -> Config:
    """Validate config text; ``source`` names it in errors."""
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(source, [("", f"not valid TOML: {exc}")]) from None
    refused = [
        (key_path(path), REFERENCE_REFUSED)
        for path, _ in _references(raw, ())
        if not reference_allowed(path)
    ]
    unset: list[tuple[str, str]] = []
    expanded = _expand_env(raw, (), env, unset, source=source)
    try:
        config = Config.model_validate(expanded)
    except ValidationError as exc:
        # The error at an unset variable or a refused reference is that, not its value.
        paths = {path for path, _ in unset + refused}
        errors = [e for e in validation_problems(exc) if e[0] not in paths]
        unset = [problem for problem in unset if problem[0] not in dict(refused)]
        raise ConfigError(source, refused + unset + errors) from None
    secrets = {key_path(path) for path in secret_paths(config)}
    problems = refused + [p for p in unset if p[0] not in secrets and p[0] not in dict(refused)]
    problems += _check_references(config)
    if problems:
        raise ConfigError(source, problems)
    config._source = source
    config._secret_texts = {
        path: text for path in secret_paths(config) if isinstance(text := _at(raw, path), str)
    }
    remember_references(config, dict(_references(raw, ())))
    return config


_MESSAGES = {
    "extra_forbidden": "unknown key",
    "missing": "missing required key",
}


def validation_problems(exc: ValidationError) -> list[tuple[str, str]]:
    """Each error of ``exc`` as (key path, message), no input value echoed (it may be a
    secret)."""
    return [_describe(err) for err in exc.errors()]


def _describe(err: Any) -> tuple[str, str]:
    """Turn one pydantic error into (key path, message) without echoing the input value,
    which may be a secret."""
    loc = tuple(part for part in err["loc"] if not _is_union_tag(part))
    msg = _MESSAGES.get(err["type"], err["msg"])
    msg = msg.removeprefix("Value error, ").removeprefix("Assertion failed, ")
    return key_path(loc), msg


def _is_union_tag(part: Any) -> bool:
    # pydantic adds the member type (e.g. 'str', 'function-after[...]') to locations
    # inside unions; they mean nothing to a user.
    return isinstance(part, str) and (part in {"str", "int", "float", "bool"} or "[" in part)


def _check_references(config: Config) -> list[tuple[str, str]]:
    problems: list[tuple[str, str]] = []
    known = ", ".join(sorted(config.regions)) or "none"

    def need(region: str, where: str, *, bucket: bool = True) -> None:
        if region not in config.regions:
            problems.append((where, f"region {region!r} is not defined under [regions] ({known})"))
        elif bucket and config.regions[region].bucket is None:
            problems.append(
                (key_path(("regions", region, "bucket")), f"{where} needs this region's bucket")
            )

    problems += _check_filter_plugins(config)
    if config.egress:
        need(config.egress.region, "egress.region")
    if config.compaction:
        need(config.compaction.region, "compaction.region")
    if config.relay:
        problems += _check_relay(config.relay, need)
    if config.ingress:
        ingress = config.ingress
        need(ingress.region, "ingress.region")
        region = config.regions.get(ingress.region)
        if region is not None and not region.sqs_queue:
            problems.append(
                (
                    key_path(("regions", ingress.region, "sqs_queue")),
                    "ingress runs in this region and needs its bucket's notification queue",
                )
            )
        destinations: dict[str, int] = {}
        for i, source in enumerate(ingress.sources):
            where = key_path(("ingress", "sources", i, "region"))
            need(source.region, where)
            if source.region == ingress.region:
                problems.append((where, "a source must be another region than ingress.region"))
            if source.topic_pattern is not None:
                continue  # destinations of patterns are checked as topics appear
            if source.destination in destinations:
                problems.append(
                    (
                        key_path(("ingress", "sources", i, "destination_topic")),
                        f"topic {source.destination!r} is already the destination of "
                        f"ingress.sources[{destinations[source.destination]}]",
                    )
                )
            destinations.setdefault(source.destination, i)
    return problems


def _check_filter_plugins(config: Config) -> list[tuple[str, str]]:
    """Each filter plugin's module is allowed (checked before anything imports it)."""
    specs: list[tuple[tuple[str | int, ...], FilterSpec]] = []
    if config.relay:
        for i, topic in enumerate(config.relay.topics):
            specs += [
                (("relay", "topics", i, "filters", j), f) for j, f in enumerate(topic.filters)
            ]
    if config.ingress:
        for i, source in enumerate(config.ingress.sources):
            where = ("ingress", "sources", i, "filters")
            specs += [((*where, j), f) for j, f in enumerate(source.filters)]
    return [
        (
            key_path((*path, "plugin")),
            f"module {spec.plugin.partition(':')[0]!r} is not among [filters] allowed_modules "
            "(nor a built-in filter): a filter plugin is code run with the service's rights; "
            "list the module or its package there to allow it",
        )
        for path, spec in specs
        if not config.filters.allows(spec.plugin)
    ]


def _check_relay(relay: RelayConfig, need: Callable[..., None]) -> list[tuple[str, str]]:
    problems: list[tuple[str, str]] = []
    for i, source in enumerate(relay.sources):
        need(source, key_path(("relay", "sources", i)), bucket=False)
    need(relay.destination, "relay.destination", bucket=False)
    if relay.mode == "failover" and len(set(relay.sources)) < 2:
        problems.append(("relay.sources", "failover needs at least two different upstreams"))
    if len(set(relay.sources)) != len(relay.sources):
        problems.append(("relay.sources", "an upstream is listed twice"))
    destinations: dict[str, int] = {}
    loops = relay.destination in relay.sources
    for i, topic in enumerate(relay.topics):
        where = key_path(("relay", "topics", i, "destination_topic"))
        if loops and topic.destination == topic.source_topic:
            problems.append(
                (
                    where,
                    f"relay.destination {relay.destination!r} is also a source: "
                    f"{topic.source_topic!r} would be relayed into itself (a loop); "
                    "name another destination_topic",
                )
            )
        if topic.destination in destinations:
            problems.append(
                (
                    where,
                    f"topic {topic.destination!r} is already the destination of "
                    f"relay.topics[{destinations[topic.destination]}]",
                )
            )
        destinations.setdefault(topic.destination, i)
    return problems
