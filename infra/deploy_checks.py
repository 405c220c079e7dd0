"""Offline checks of the deployment files, run by ``make lint``: the alert rules and the
dashboard parse and hold what Prometheus and Grafana need, and the systemd units verify,
carry the sandboxing of :data:`SYSTEMD_HARDENING` and score at most :data:`MAX_EXPOSURE`
in ``systemd-analyze security``. (The Kubernetes manifests are checked by
``kubernetes-validate`` in the same target, and their isolation here.)

The metric names the rules and the dashboard use are read here too, for the test that
compares them with what the running services export.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import promql_parser
import yaml

INFRA = Path(__file__).parent
ALERT_RULES = INFRA / "monitoring" / "replicator-alerts.yaml"
DASHBOARD = INFRA / "monitoring" / "replicator-dashboard.json"
SYSTEMD_UNITS = INFRA / "systemd"
K8S_MANIFESTS = INFRA / "k8s"
INSTALLED_COMMAND = "/opt/replicator/bin/replicator"
"""Where the units expect the replicator: absent on the machine that checks them."""
PROMETHEUS_METRICS = frozenset({"up"})
"""Series Prometheus makes itself, not exported by any service."""
SEVERITIES = frozenset({"page", "warn"})


class DeployCheckError(Exception):
    pass


def metric_names(expr: str) -> set[str]:
    """The metric names an expression selects (parsing it, which fails on bad PromQL)."""
    try:
        parsed = promql_parser.parse(expr)
    except Exception as exc:  # the parser raises plain ValueErrors and runtime errors
        raise DeployCheckError(f"invalid PromQL {expr!r}: {exc}") from None
    names: set[str] = set()

    def visit(node: Any) -> None:
        if isinstance(node, promql_parser.VectorSelector) and node.name:
            names.add(node.name)

    promql_parser.walk(parsed, visit)
    return names


def alert_rules(path: Path = ALERT_RULES) -> list[dict[str, Any]]:
    """The rules, each checked for what an alert needs to be actionable."""
    document = yaml.safe_load(path.read_text())
    rules: list[dict[str, Any]] = []
    for group in document["groups"]:
        if not group.get("name") or not group.get("rules"):
            raise DeployCheckError(f"{path}: a group without a name or rules")
        for rule in group["rules"]:
            where = f"{path}: rule {rule.get('alert', '?')}"
            unknown = set(rule) - {"alert", "expr", "for", "labels", "annotations"}
            if unknown or not rule.get("alert") or not rule.get("expr"):
                raise DeployCheckError(f"{where}: needs alert and expr; unknown {unknown}")
            if rule.get("labels", {}).get("severity") not in SEVERITIES:
                raise DeployCheckError(f"{where}: severity must be one of {sorted(SEVERITIES)}")
            if not rule.get("annotations", {}).get("summary"):
                raise DeployCheckError(f"{where}: no summary annotation")
            if "for" in rule and not re.fullmatch(r"\d+[smh]", str(rule["for"])):
                raise DeployCheckError(f"{where}: 'for' is not a duration")
            metric_names(rule["expr"])
            rules.append(rule)
    return rules


def dashboard_queries(path: Path = DASHBOARD) -> list[str]:
    """Every query of the dashboard, after checking its panels' layout."""
    dashboard = json.loads(path.read_text())
    for key in ("uid", "title", "panels", "schemaVersion"):
        if key not in dashboard:
            raise DeployCheckError(f"{path}: no {key!r}")
    queries, ids = [], set()
    for panel in dashboard["panels"]:
        where = f"{path}: panel {panel.get('title', '?')!r}"
        if panel.get("id") in ids or not panel.get("targets"):
            raise DeployCheckError(f"{where}: duplicate id or no targets")
        ids.add(panel["id"])
        if set(panel.get("gridPos", {})) != {"h", "w", "x", "y"}:
            raise DeployCheckError(f"{where}: gridPos needs h, w, x and y")
        for target in panel["targets"]:
            metric_names(target["expr"])
            queries.append(target["expr"])
    return queries


def used_metric_names() -> dict[str, set[str]]:
    """Metric names (as exposed: counters with ``_total``) by where they are used."""
    used: dict[str, set[str]] = {}
    for rule in alert_rules():
        for name in metric_names(rule["expr"]) - PROMETHEUS_METRICS:
            used.setdefault(name, set()).add(f"alert {rule['alert']}")
    for query in dashboard_queries():
        for name in metric_names(query) - PROMETHEUS_METRICS:
            used.setdefault(name, set()).add("dashboard")
    return used


def verify_systemd_units(directory: Path = SYSTEMD_UNITS) -> list[str]:
    """``systemd-analyze verify`` of every unit; its complaints, except that the
    replicator is not installed here."""
    units = sorted(str(p) for p in directory.iterdir() if p.suffix in (".service", ".timer"))
    result = subprocess.run(
        ["systemd-analyze", "verify", *units], capture_output=True, text=True, check=False
    )
    lines = (result.stdout + result.stderr).splitlines()
    absent = f"Command {INSTALLED_COMMAND} is not executable"
    return [line for line in lines if line.strip() and absent not in line]


SYSTEMD_HARDENING = {
    "UMask": "0077",
    "NoNewPrivileges": "yes",
    "CapabilityBoundingSet": "",
    "AmbientCapabilities": "",
    "ProtectSystem": "strict",
    "ProtectHome": "yes",
    "PrivateTmp": "yes",
    "PrivateDevices": "yes",
    "ProtectKernelTunables": "yes",
    "ProtectKernelModules": "yes",
    "ProtectKernelLogs": "yes",
    "ProtectControlGroups": "yes",
    "RestrictAddressFamilies": "AF_UNIX AF_INET AF_INET6 AF_NETLINK",
    "RestrictNamespaces": "yes",
    "RestrictSUIDSGID": "yes",
    "LockPersonality": "yes",
    "SystemCallArchitectures": "native",
    "SystemCallFilter": "@system-service",
}
"""What every service unit sets (a key set twice, as SystemCallFilter, counts if any of
its values is this)."""
MAX_EXPOSURE = 2.0
"""The highest ``systemd-analyze security`` exposure a unit may score (0 best, 10 worst)."""


def unit_settings(path: Path) -> dict[str, list[str]]:
    """Every ``[Service]`` setting of a unit file, each with all its values in order."""
    settings: dict[str, list[str]] = {}
    section = ""
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1]
        elif section == "Service" and "=" in line:
            key, value = line.split("=", 1)
            settings.setdefault(key.strip(), []).append(value.strip())
    return settings


def hardening_problems(path: Path) -> list[str]:
    """What a service unit lacks of the sandbox every unit must have."""
    settings = unit_settings(path)
    problems = [
        f"{path.name}: {key}={value} missing"
        for key, value in SYSTEMD_HARDENING.items()
        if value not in settings.get(key, [])
    ]
    if "MemoryMax" not in settings:
        problems.append(f"{path.name}: MemoryMax missing (a leak would take the machine)")
    if "StateDirectory" in settings and settings.get("StateDirectoryMode") != ["0700"]:
        problems.append(f"{path.name}: StateDirectoryMode=0700 missing")
    return problems


def exposure(path: Path) -> float:
    """The unit's ``systemd-analyze security --offline`` exposure score."""
    result = subprocess.run(
        ["systemd-analyze", "security", "--offline=true", "--no-pager", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    found = re.search(r"Overall exposure level for \S+: ([\d.]+)", result.stdout)
    if found is None:
        raise DeployCheckError(f"{path}: systemd-analyze security gave no score: {result.stderr}")
    return float(found.group(1))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.parse_args(argv)
    try:
        rules = alert_rules()
        queries = dashboard_queries()
    except (DeployCheckError, KeyError, ValueError) as exc:
        sys.stderr.write(f"deploy checks: {exc}\n")
        return 1
    sys.stdout.write(f"alert rules: {len(rules)} valid; dashboard: {len(queries)} queries valid\n")
    services = sorted(SYSTEMD_UNITS.glob("*.service"))
    problems = [p for unit in services for p in hardening_problems(unit)]
    if problems:
        sys.stderr.write("".join(f"systemd: {line}\n" for line in problems))
        return 1
    if shutil.which("systemd-analyze") is None:
        sys.stdout.write("systemd units: sandboxed; not verified (systemd-analyze not found)\n")
        return 0
    scores = {unit.name: exposure(unit) for unit in services}
    problems = verify_systemd_units() + [
        f"{name}: exposure {score} above {MAX_EXPOSURE}"
        for name, score in scores.items()
        if score > MAX_EXPOSURE
    ]
    for line in problems:
        sys.stderr.write(f"systemd: {line}\n")
    if problems:
        return 1
    shown = ", ".join(f"{name} {score}" for name, score in scores.items())
    sys.stdout.write(f"systemd units: verified; exposure {shown}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
