"""``replicator config check``: validate a config before deploying it, show what each
service would use, and (``--connect``) whether what it names answers.

What is shown: per configured service, the sections it reads with every default filled
in. A secret is shown only as the file wrote it: a ``${NAME}`` reference, with whether
``NAME`` is set here; a secret written in clear is never shown (and flagged). References
are expanded in secret fields and ``sasl_username`` only (anywhere else the file is
refused at load, naming the key), and every value written with one is shown as written;
a raw librdkafka property that holds a secret (refused at load too) is shown redacted,
by librdkafka's list of sensitive properties and by its name
(:func:`replicator.core.config.is_secret_property`). A
reference to an unset variable does not stop the check: the file is validated with it
standing in, and the check fails naming it.

``--connect`` asks each region a service touches, with one short attempt each: its Kafka
for metadata (and the topics the config names where they must exist), its bucket with a
HEAD (and a write and delete of a probe object under the prefix with
``--write-probe``), and its queue. Nothing is created.
"""

from __future__ import annotations

import os
import re
import tomllib
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from replicator.core.aws.clients import probe_clients
from replicator.core.config import (
    Config,
    is_secret_property,
    parse_config,
    reference_texts,
    secret_paths,
    secret_text,
)
from replicator.core.errors import ConfigError
from replicator.core.kafka.clients import client_config

ENV_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
CONNECT_TIMEOUT = 5.0


@dataclass(frozen=True)
class Probe:
    service: str
    what: str
    target: str
    ok: bool
    reason: str = ""


@dataclass
class CheckResult:
    source: str
    missing: list[str]
    """Environment variables the file references that are not set here."""
    clear_secrets: list[str]
    """Key paths of secrets written in clear in the file."""
    services: dict[str, dict[str, Any]]
    probes: list[Probe]

    @property
    def ok(self) -> bool:
        return not self.missing and all(p.ok for p in self.probes)

    def to_dict(self) -> dict[str, Any]:
        return {
            "config": self.source,
            "ok": self.ok,
            "missing_variables": self.missing,
            "secrets_in_clear": self.clear_secrets,
            "services": self.services,
            "connect": [vars(p) for p in self.probes],
        }


def load_for_check(path: Path, env: Mapping[str, str]) -> tuple[Config, list[str]]:
    """The config at ``path`` validated with unset variables standing in, and the names of
    those variables. ConfigError for anything else wrong."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(str(path), [("", f"cannot read: {exc.strerror}")]) from None
    try:
        values = _strings(tomllib.loads(text))
    except tomllib.TOMLDecodeError:
        values = []  # parse_config names the problem
    named = {name for value in values for name in ENV_REFERENCE.findall(value)}
    missing = sorted(name for name in named if name not in env)
    standing_in = {**env, **{name: f"<{name} not set>" for name in missing}}
    return parse_config(text, str(path), standing_in), missing


def _strings(value: Any) -> list[str]:
    """Every string value in parsed TOML (comments are gone)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for inner in value.values() for s in _strings(inner)]
    if isinstance(value, list):
        return [s for inner in value for s in _strings(inner)]
    return []


def services_of(config: Config) -> dict[str, list[str]]:
    """Each configured service and the regions it touches. Pure."""
    found: dict[str, list[str]] = {}
    if config.egress:
        found["egress"] = [config.egress.region]
    if config.ingress:
        regions = [config.ingress.region, *(s.region for s in config.ingress.sources)]
        found["ingress"] = list(dict.fromkeys(regions))
    if config.relay:
        found["relay"] = list(dict.fromkeys([*config.relay.sources, config.relay.destination]))
    if config.compaction:
        found["compaction"] = [config.compaction.region]
    return found


def effective(config: Config, env: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    """Per service, the sections it reads, defaults filled in, secrets as references."""
    data = config.model_dump(mode="json")
    for path, written in reference_texts(config, data).items():
        _put(data, path, written)  # as the file wrote it (sasl_username)
    for path in secret_paths(config):
        _put(data, path, _shown_secret(config, path, env))
    for region in data["regions"].values():
        raw = region["kafka"]["config"]
        for name in [n for n in raw if is_secret_property(n)]:
            raw[name] = REDACTED
    shown: dict[str, dict[str, Any]] = {}
    for service, regions in services_of(config).items():
        sections: dict[str, Any] = {service: data[service]}
        sections["regions"] = {r: data["regions"][r] for r in regions}
        if service != "relay":
            sections["s3"] = data["s3"]
        if service in ("egress", "compaction"):
            sections["spark"] = data["spark"]
        shown[service] = sections
    return shown


REDACTED = "<a secret: not shown>"


def _shown_secret(config: Config, path: tuple[str | int, ...], env: Mapping[str, str]) -> str:
    written = secret_text(config, path)
    if written is None or not ENV_REFERENCE.search(written):
        return "<written in clear: not shown>"
    names = ENV_REFERENCE.findall(written)
    unset = [n for n in names if n not in env]
    return f"{written} ({'NOT SET: ' + ', '.join(unset) if unset else 'set'})"


def clear_secrets(config: Config) -> list[str]:
    return [
        ".".join(str(p) for p in path)
        for path in secret_paths(config)
        if not ENV_REFERENCE.search(secret_text(config, path) or "")
    ]


def _put(data: Any, path: tuple[str | int, ...], value: Any) -> None:
    for key in path[:-1]:
        data = data[key]
    data[path[-1]] = value


# -- connecting ---------------------------------------------------------------------------


def connect(config: Config, *, write_probe: bool = False) -> list[Probe]:
    """Ask everything each service touches whether it answers."""
    probes: list[Probe] = []
    for service, regions in services_of(config).items():
        for region in regions:
            if service != "compaction":  # compaction reads and writes the bucket only
                probes.append(
                    _kafka(config, service, region, _topics_named(config, service, region))
                )
            region_config = config.region(region)
            if region_config.bucket and service != "relay":
                probes.append(_bucket(config, service, region, write_probe))
            if service == "ingress" and config.ingress and region == config.ingress.region:
                probes.append(_queue(config, service, region))
    return probes


def _topics_named(config: Config, service: str, region: str) -> list[str]:
    """Topics that must already exist in ``region`` for ``service`` (sources)."""
    if service == "egress" and config.egress:
        return sorted(config.egress.topics)
    if service == "relay" and config.relay and region in config.relay.sources:
        return sorted({t.source_topic for t in config.relay.topics})
    return []


def _kafka(config: Config, service: str, region: str, topics: list[str]) -> Probe:
    kafka = config.region(region).kafka
    target = f"{region} Kafka {kafka.bootstrap_servers}"
    admin = AdminClient(client_config(kafka, socket_timeout_ms=int(CONNECT_TIMEOUT * 1000)))
    try:
        metadata = admin.list_topics(timeout=CONNECT_TIMEOUT)
    except KafkaException as exc:
        return Probe(service, "kafka metadata", target, False, exc.args[0].str())
    absent = [t for t in topics if t not in metadata.topics]
    if absent:
        return Probe(service, "kafka topics", target, False, f"no topic {', '.join(absent)}")
    named = f" (topics {', '.join(topics)} there)" if topics else ""
    return Probe(service, "kafka metadata", target, True, f"{len(metadata.brokers)} brokers{named}")


def _aws_call(service: str, what: str, target: str, call: Callable[[], Any]) -> Probe:
    try:
        call()
    except Exception as exc:  # botocore's errors, connection errors: the reason is the text
        return Probe(service, what, target, False, f"{type(exc).__name__}: {exc}")
    return Probe(service, what, target, True)


def _bucket(config: Config, service: str, region: str, write_probe: bool) -> Probe:
    bucket = config.region(region).bucket
    assert bucket is not None
    s3, _ = probe_clients(config, region)
    target = f"s3://{bucket}/{config.s3.prefix}/"
    if not write_probe:
        return _aws_call(service, "bucket HEAD", target, lambda: s3.head_bucket(Bucket=bucket))
    key = f"{config.s3.prefix}/_config-check/{uuid.uuid4().hex}"

    def write_and_delete() -> None:
        s3.put_object(Bucket=bucket, Key=key, Body=b"replicator config check")
        s3.delete_object(Bucket=bucket, Key=key)

    return _aws_call(service, "bucket write+delete", target, write_and_delete)


def _queue(config: Config, service: str, region: str) -> Probe:
    queue = config.region(region).sqs_queue
    if not queue:
        return Probe(service, "queue", region, False, "no sqs_queue for the ingress region")
    _, sqs = probe_clients(config, region)
    return _aws_call(service, "queue", f"sqs {queue}", lambda: sqs.get_queue_url(QueueName=queue))


def check(path: Path, *, connect_to: bool = False, write_probe: bool = False) -> CheckResult:
    env = os.environ
    config, missing = load_for_check(path, env)
    probes = connect(config, write_probe=write_probe) if connect_to else []
    return CheckResult(str(path), missing, clear_secrets(config), effective(config, env), probes)


# -- output -------------------------------------------------------------------------------


def render(result: CheckResult) -> str:
    lines = [f"{result.source}: valid"]
    for name in result.missing:
        lines.append(f"FAIL: ${{{name}}} is referenced but not set")
    for path in result.clear_secrets:
        lines.append(f"warning: {path} is written in clear (use a ${{NAME}} reference)")
    for service, sections in result.services.items():
        lines += ["", f"[{service}] would use:"]
        lines += [f"  {key} = {value}" for key, value in _flat(sections)]
    if result.probes:
        lines += ["", "service     check                 target / reason"]
        for p in result.probes:
            status = "OK  " if p.ok else "FAIL"
            detail = f"{p.target}" + (f": {p.reason}" if p.reason else "")
            lines.append(f"{status} {p.service:<11} {p.what:<21} {detail}")
    lines += ["", "OK" if result.ok else "FAILED"]
    return "\n".join(lines)


def _flat(value: Any, prefix: str = "") -> list[tuple[str, Any]]:
    if isinstance(value, dict) and value:
        return [item for key, inner in value.items() for item in _flat(inner, f"{prefix}{key}.")]
    return [(prefix.rstrip("."), value)]
