"""Offline checks of the deployment files, run by ``make lint``: the alert rules and the
dashboard parse and hold what Prometheus and Grafana need, and the systemd units verify,
carry the sandboxing of :data:`SYSTEMD_HARDENING`, score at most :data:`MAX_EXPOSURE`
in ``systemd-analyze security`` and each run as its own user with its own secrets file
(one for all would hand every service every service's secrets). (The Kubernetes
manifests are checked by ``kubernetes-validate`` in the same target, and their isolation
here, egress reaching only named address blocks.)

The metric names the rules and the dashboard use are read here too, for the test that
compares them with what the running services export.
"""

from __future__ import annotations

import argparse
import ipaddress
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


def shared_identity_problems(units: list[Path]) -> list[str]:
    """What service units share that must be each one's own: the user they run as and
    the environment file their secrets come from (one user or one file for all gives
    every service every service's secrets, and the per-service Kafka users and ACLs
    collapse into one). A unit without either is named too."""
    problems: list[str] = []
    owners: dict[tuple[str, str], str] = {}
    for path in units:
        settings = unit_settings(path)
        for key in ("User", "EnvironmentFile"):
            values = settings.get(key, [])
            if not values:
                problems.append(f"{path.name}: no {key} of its own")
            for value in values:
                owner = owners.setdefault((key, value.lstrip("-")), path.name)
                if owner != path.name:
                    problems.append(f"{path.name}: shares {key}={value} with {owner}")
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


WORKLOAD_KINDS = frozenset({"Deployment", "StatefulSet", "CronJob", "Job", "DaemonSet"})


def k8s_resources(directory: Path = K8S_MANIFESTS) -> list[dict[str, Any]]:
    """Every resource of the manifests, in file order, with the executor pod template
    Spark reads (kept in a ConfigMap) as a resource of its own."""
    found: list[dict[str, Any]] = []
    for path in sorted(directory.glob("*.yaml")):
        for document in yaml.safe_load_all(path.read_text()):
            if not document:
                continue
            found.append(document)
            for key, text in (document.get("data") or {}).items():
                if document["kind"] == "ConfigMap" and key.endswith("pod-template.yaml"):
                    found.append(yaml.safe_load(text))
    return found


def pod_spec_of(resource: dict[str, Any]) -> dict[str, Any] | None:
    kind = resource["kind"]
    if kind == "Pod":
        return dict(resource["spec"])
    if kind == "CronJob":
        return dict(resource["spec"]["jobTemplate"]["spec"]["template"]["spec"])
    if kind in WORKLOAD_KINDS:
        return dict(resource["spec"]["template"]["spec"])
    return None


def k8s_isolation_problems(resources: list[dict[str, Any]]) -> list[str]:
    """What the manifests lack of the isolation every workload must have: a service
    account and Secrets of its own, no API token unless bound to a role, the RuntimeDefault
    seccomp profile, non-root, no privilege escalation or capabilities, a read-only root
    filesystem, size limits on scratch volumes; a default-deny NetworkPolicy in every
    namespace with workloads; pod-creating roles only where no workload runs."""
    problems: list[str] = []
    namespace_of = {id(r): r.get("metadata", {}).get("namespace") for r in resources}
    bound = {
        (subject.get("namespace"), subject["name"])
        for r in resources
        if r["kind"] == "RoleBinding"
        for subject in r.get("subjects", [])
        if subject["kind"] == "ServiceAccount"
    }
    accounts: dict[str, str] = {}
    secrets: dict[str, str] = {}
    workload_namespaces = set()
    for resource in resources:
        spec = pod_spec_of(resource)
        if spec is None:
            continue
        name = (
            resource.get("metadata", {}).get("name")
            or (resource["metadata"]["labels"]["app.kubernetes.io/name"])
        )
        namespace = namespace_of[id(resource)]
        if resource["kind"] != "Pod":
            workload_namespaces.add(namespace)
            account = spec.get("serviceAccountName")
            if not account or account == "default":
                problems.append(f"{name}: no service account of its own")
            elif account in accounts:
                problems.append(
                    f"{name}: shares service account {account} with {accounts[account]}"
                )
            else:
                accounts[account] = name
            needs_token = (namespace, account) in bound
            if spec.get("automountServiceAccountToken", True) and not needs_token:
                problems.append(f"{name}: mounts a service-account token it has no role for")
        elif spec.get("automountServiceAccountToken", True):
            problems.append(f"{name}: mounts a service-account token")
        pod_context = spec.get("securityContext", {})
        if pod_context.get("seccompProfile", {}).get("type") != "RuntimeDefault":
            problems.append(f"{name}: no RuntimeDefault seccomp profile")
        if pod_context.get("runAsNonRoot") is not True:
            problems.append(f"{name}: may run as root")
        for container in spec.get("containers", []):
            where = f"{name}/{container['name']}"
            context = container.get("securityContext", {})
            if context.get("allowPrivilegeEscalation") is not False:
                problems.append(f"{where}: privilege escalation allowed")
            if context.get("capabilities", {}).get("drop") != ["ALL"]:
                problems.append(f"{where}: capabilities not dropped")
            if context.get("readOnlyRootFilesystem") is not True:
                problems.append(f"{where}: writable root filesystem")
            used = []
            for source in container.get("envFrom", []):
                if "secretRef" in source:
                    problems.append(f"{where}: takes a whole Secret (envFrom); name each key")
                    used.append(source["secretRef"]["name"])
            for variable in container.get("env", []):
                ref = variable.get("valueFrom", {}).get("secretKeyRef")
                if ref is not None:
                    used.append(ref["name"])
            for secret in dict.fromkeys(used):
                owner = secrets.setdefault(secret, name)
                if owner != name:
                    problems.append(f"{where}: shares Secret {secret} with {owner}")
        for volume in spec.get("volumes", []):
            if "emptyDir" in volume and not (volume["emptyDir"] or {}).get("sizeLimit"):
                problems.append(f"{name}: scratch volume {volume['name']} has no sizeLimit")
    for namespace in sorted(n for n in workload_namespaces if n):
        if not any(
            r["kind"] == "NetworkPolicy"
            and namespace_of[id(r)] == namespace
            and r["spec"].get("podSelector") == {}
            and set(r["spec"].get("policyTypes", [])) == {"Ingress", "Egress"}
            and not r["spec"].get("ingress")
            and not r["spec"].get("egress")
            for r in resources
        ):
            problems.append(f"namespace {namespace}: no default-deny NetworkPolicy")
    problems += network_egress_problems(resources)
    for resource in resources:
        if resource["kind"] not in ("Role", "ClusterRole"):
            continue
        for rule in resource.get("rules", []):
            if "pods" in rule.get("resources", []) and {"create", "*"} & set(rule["verbs"]):
                namespace = namespace_of[id(resource)]
                if resource["kind"] == "ClusterRole" or namespace in workload_namespaces:
                    problems.append(
                        f"{resource['kind']} {resource['metadata']['name']}: creates pods "
                        f"where the workloads run ({namespace or 'every namespace'})"
                    )
    return problems


WIDEST_EGRESS_PREFIX = 16
"""The widest address block a NetworkPolicy may let pods reach: a VPC's or a region's
whole private range (a /8) is every other workload, not the brokers or the endpoints."""


def network_egress_problems(resources: list[dict[str, Any]]) -> list[str]:
    """Egress rules of the NetworkPolicies that reach further than named destinations: a
    rule with ports and no ``to`` (any address), or an ``ipBlock`` wider than
    ``WIDEST_EGRESS_PREFIX`` bits."""
    problems: list[str] = []
    for resource in resources:
        if resource["kind"] != "NetworkPolicy":
            continue
        where = (
            f"NetworkPolicy {resource['metadata'].get('namespace')}/{resource['metadata']['name']}"
        )
        for index, rule in enumerate(resource["spec"].get("egress") or []):
            if not rule.get("to"):
                problems.append(f"{where}: egress rule {index} reaches any address")
            for peer in rule.get("to") or []:
                cidr = (peer.get("ipBlock") or {}).get("cidr")
                if cidr is None:
                    continue
                network = ipaddress.ip_network(cidr, strict=False)
                if network.prefixlen < WIDEST_EGRESS_PREFIX:
                    problems.append(
                        f"{where}: egress rule {index} reaches {cidr}, wider than "
                        f"/{WIDEST_EGRESS_PREFIX}"
                    )
    return problems


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
    isolation = k8s_isolation_problems(k8s_resources())
    if isolation:
        sys.stderr.write("".join(f"kubernetes: {line}\n" for line in isolation))
        return 1
    sys.stdout.write("kubernetes: every workload isolated\n")
    services = sorted(SYSTEMD_UNITS.glob("*.service"))
    problems = [p for unit in services for p in hardening_problems(unit)]
    problems += shared_identity_problems(services)
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
