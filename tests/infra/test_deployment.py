"""The deployment files agree with the product: the Kubernetes manifests' config loads,
their commands parse, their probes and ports are the services' own; the systemd units run
real commands; the offline checks of the monitoring files reject what is broken."""

from __future__ import annotations

import configparser
import shlex
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from infra.deploy_checks import (
    K8S_MANIFESTS,
    MAX_EXPOSURE,
    SYSTEMD_UNITS,
    DeployCheckError,
    alert_rules,
    exposure,
    hardening_problems,
    k8s_isolation_problems,
    k8s_resources,
    metric_names,
    network_egress_problems,
    shared_identity_problems,
    verify_systemd_units,
)
from replicator.cli import build_parser
from replicator.config_check import services_of
from replicator.core.config import parse_config
from replicator.core.kafka.clients import client_config

CONFIG_PATH = "/etc/replicator/replicator.toml"
SECRETS = {"KAFKA_US_EAST_1_PASSWORD": "pw-east-1", "KAFKA_US_WEST_1_PASSWORD": "pw-west-1"}


def resources() -> dict[tuple[str, str], dict[str, Any]]:
    found = {}
    for path in sorted(K8S_MANIFESTS.glob("*.yaml")):
        for document in yaml.safe_load_all(path.read_text()):
            found[(document["kind"], document["metadata"]["name"])] = document
    return found


def pod_spec(resource: dict[str, Any]) -> dict[str, Any]:
    if resource["kind"] == "CronJob":
        return resource["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    return resource["spec"]["template"]["spec"]


def workloads() -> dict[str, dict[str, Any]]:
    kinds = {"Deployment", "StatefulSet", "CronJob"}
    return {name: r for (kind, name), r in resources().items() if kind in kinds}


def test_the_configmap_config_loads_with_its_secrets_from_the_environment():
    text = resources()[("ConfigMap", "replicator-config")]["data"]["replicator.toml"]
    config = parse_config(text, "replicator-config", SECRETS)
    password = config.regions["us-east-1"].kafka.sasl_password
    assert password is not None and password.get_secret_value() == "pw-east-1"
    assert "pw-east-1" not in text and "${KAFKA_US_EAST_1_PASSWORD}" in text
    assert config.spark.ship_environment is False  # executors run the same image
    for section in (config.egress, config.ingress, config.relay):
        assert section is not None and section.metrics_port == 9100


@pytest.mark.parametrize("name", sorted(workloads()))
def test_every_workload_runs_a_replicator_command_on_the_mounted_config(name):
    [container] = pod_spec(workloads()[name])["containers"]
    args = build_parser().parse_args(container["args"])
    assert args.config == CONFIG_PATH
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    assert str(Path(CONFIG_PATH).parent) in mounts
    assert "envFrom" not in container  # each secret by name, from the workload's own Secret
    for variable in container.get("env", []):
        if "valueFrom" in variable:
            ref = variable["valueFrom"]["secretKeyRef"]
            assert ref == {"name": f"{name}-secrets", "key": variable["name"]}
    if "livenessProbe" in container:  # the long-running services
        ports = {p["name"]: p["containerPort"] for p in container["ports"]}
        assert ports["metrics"] == 9100
        assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
        assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}


SERVICES = {
    "replicator-egress": "egress",
    "replicator-ingress": "ingress",
    "replicator-relay": "relay",
    "replicator-compaction": "compaction",
}


def secret_env(name: str) -> dict[str, str]:
    """The secret variables a workload's pod gets, each with a value naming itself."""
    [container] = pod_spec(workloads()[name])["containers"]
    return {
        v["name"]: f"value-of-{v['name']}" for v in container.get("env", []) if "valueFrom" in v
    }


@pytest.mark.parametrize("name", sorted(SERVICES))
def test_each_workload_gets_exactly_the_secrets_its_service_uses(name):
    """The config loads in each pod with that pod's variables alone, every Kafka cluster
    its service talks to gets its password, and the pod holds no other secret."""
    text = resources()[("ConfigMap", "replicator-config")]["data"]["replicator.toml"]
    env = secret_env(name)
    config = parse_config(text, "replicator-config", env)
    service = SERVICES[name]
    kafka_regions = services_of(config).get(service, []) if service != "compaction" else []
    if service == "ingress":
        assert config.ingress is not None
        kafka_regions = [config.ingress.region]  # the sources' buckets only, not their Kafka
    used = set()
    for region in kafka_regions:
        conf = client_config(config.region(region).kafka)
        used.add(conf["sasl.password"].removeprefix("value-of-"))
    assert used == set(env)


def test_the_manifests_isolate_every_workload():
    assert k8s_isolation_problems(k8s_resources()) == []


def test_the_egress_executors_run_apart_under_an_account_without_api_rights():
    found = {
        (r["kind"], r["metadata"].get("namespace"), r["metadata"].get("name")): r
        for r in k8s_resources()
        if "metadata" in r
    }
    defaults = resources()[("ConfigMap", "replicator-spark-defaults")]["data"]
    settings = dict(
        line.split(None, 1)
        for line in defaults["spark-defaults.conf"].splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    )
    namespace = settings["spark.kubernetes.namespace"]
    assert namespace != "replicator"
    account = settings["spark.kubernetes.authenticate.executor.serviceAccountName"]
    executor_account = found[("ServiceAccount", namespace, account)]
    assert executor_account["automountServiceAccountToken"] is False
    assert ("Role", namespace, "replicator-egress-driver") in found
    assert not [k for k in found if k[0] == "Role" and k[1] == "replicator"]
    assert settings["spark.kubernetes.executor.podTemplateFile"].startswith("/etc/spark/")
    secret = settings["spark.kubernetes.executor.secretKeyRef.KAFKA_US_EAST_1_PASSWORD"]
    assert secret == "replicator-egress-secrets:KAFKA_US_EAST_1_PASSWORD"


def test_the_isolation_check_names_what_a_workload_lacks():
    shared = {"envFrom": [{"secretRef": {"name": "everything"}}]}
    bare = [
        {
            "kind": "Deployment",
            "metadata": {"name": name, "namespace": "ns"},
            "spec": {
                "template": {
                    "spec": {
                        "serviceAccountName": name,
                        "containers": [{"name": "c", **shared}],
                        "volumes": [{"name": "tmp", "emptyDir": {}}],
                    }
                }
            },
        }
        for name in ("a", "b")
    ]
    role = {
        "kind": "Role",
        "metadata": {"name": "driver", "namespace": "ns"},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["create", "delete"]}],
    }
    problems = k8s_isolation_problems([*bare, role])
    for expected in (
        "a: mounts a service-account token it has no role for",
        "a: no RuntimeDefault seccomp profile",
        "a: may run as root",
        "a/c: privilege escalation allowed",
        "a/c: capabilities not dropped",
        "a/c: writable root filesystem",
        "a/c: takes a whole Secret (envFrom); name each key",
        "b/c: shares Secret everything with a",
        "a: scratch volume tmp has no sizeLimit",
        "namespace ns: no default-deny NetworkPolicy",
        "Role driver: creates pods where the workloads run (ns)",
    ):
        assert expected in problems, (expected, problems)


def test_the_egress_check_names_rules_open_to_any_address_or_a_wide_block():
    policy = {
        "kind": "NetworkPolicy",
        "metadata": {"name": "out", "namespace": "ns"},
        "spec": {
            "podSelector": {},
            "policyTypes": ["Egress"],
            "egress": [
                {"to": [{"ipBlock": {"cidr": "10.0.0.0/8"}}], "ports": [{"port": 9096}]},
                {"ports": [{"protocol": "TCP", "port": 443}]},
                {"to": [{"ipBlock": {"cidr": "10.1.2.0/24"}}], "ports": [{"port": 9096}]},
            ],
        },
    }
    assert network_egress_problems([policy]) == [
        "NetworkPolicy ns/out: egress rule 0 reaches 10.0.0.0/8, wider than /16",
        "NetworkPolicy ns/out: egress rule 1 reaches any address",
    ]


def test_ingress_memory_is_requested_above_its_measured_peak_for_each_process():
    [container] = pod_spec(workloads()["replicator-ingress"])["containers"]
    request = container["resources"]["requests"]
    assert request["memory"].endswith("Mi")
    # A container sees its node's cores: the default (a process per core) is not the
    # pod's share, so the config names the processes, one per requested core.
    text = resources()[("ConfigMap", "replicator-config")]["data"]["replicator.toml"]
    ingress = parse_config(text, "replicator-config", SECRETS).ingress
    assert ingress is not None and ingress.processes == int(request["cpu"])
    assert int(request["memory"][:-2]) >= 512 * ingress.processes


def test_compaction_runs_once_per_schedule_never_two_at_a_time():
    cronjob = workloads()["replicator-compaction"]
    text = resources()[("ConfigMap", "replicator-config")]["data"]["replicator.toml"]
    config = parse_config(text, "replicator-config", SECRETS)
    assert config.compaction is not None
    assert cronjob["spec"]["schedule"] == config.compaction.schedule
    assert cronjob["spec"]["concurrencyPolicy"] == "Forbid"
    [container] = pod_spec(cronjob)["containers"]
    assert build_parser().parse_args(container["args"]).once


def test_the_egress_driver_keeps_its_checkpoint_on_a_persistent_volume():
    statefulset = workloads()["replicator-egress"]
    text = resources()[("ConfigMap", "replicator-config")]["data"]["replicator.toml"]
    egress = parse_config(text, "replicator-config", SECRETS).egress
    assert egress is not None
    [claim] = statefulset["spec"]["volumeClaimTemplates"]
    [container] = pod_spec(statefulset)["containers"]
    [mount] = [m for m in container["volumeMounts"] if m["name"] == claim["metadata"]["name"]]
    assert egress.checkpoint_location.startswith(mount["mountPath"] + "/")
    assert build_parser().parse_args(container["args"]).master.startswith("k8s://")


@pytest.mark.parametrize("unit", sorted(p.name for p in SYSTEMD_UNITS.glob("*.service")))
def test_every_systemd_unit_runs_a_replicator_command(unit):
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.read(SYSTEMD_UNITS / unit)
    command = shlex.split(parser["Service"]["ExecStart"])
    assert command[0] == "/opt/replicator/bin/replicator"
    assert build_parser().parse_args(command[1:]).config == CONFIG_PATH


@pytest.mark.parametrize("unit", sorted(p.name for p in SYSTEMD_UNITS.glob("*.service")))
def test_every_systemd_unit_is_sandboxed(unit):
    assert hardening_problems(SYSTEMD_UNITS / unit) == []
    if shutil.which("systemd-analyze") is not None:
        assert exposure(SYSTEMD_UNITS / unit) <= MAX_EXPOSURE


def test_each_systemd_unit_has_its_own_user_and_secrets_file():
    assert shared_identity_problems(sorted(SYSTEMD_UNITS.glob("*.service"))) == []


def test_the_identity_check_names_what_units_share(tmp_path):
    for name in ("a", "b"):
        (tmp_path / f"{name}.service").write_text(
            "[Service]\nUser=replicator\nEnvironmentFile=/etc/replicator/secrets.env\n"
        )
    (tmp_path / "c.service").write_text("[Service]\nUser=c\n")
    assert shared_identity_problems(sorted(tmp_path.glob("*.service"))) == [
        "b.service: shares User=replicator with a.service",
        "b.service: shares EnvironmentFile=/etc/replicator/secrets.env with a.service",
        "c.service: no EnvironmentFile of its own",
    ]


def test_the_systemd_units_verify():
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze not installed")
    assert verify_systemd_units() == []


def test_the_sandbox_check_names_what_a_unit_lacks(tmp_path):
    unit = tmp_path / "bare.service"
    unit.write_text(
        "[Service]\nExecStart=/opt/replicator/bin/replicator\nStateDirectory=replicator\n"
        "SystemCallFilter=@system-service\nSystemCallFilter=~@privileged\n"
    )
    problems = hardening_problems(unit)
    assert "bare.service: UMask=0077 missing" in problems
    assert "bare.service: CapabilityBoundingSet= missing" in problems
    assert "bare.service: StateDirectoryMode=0700 missing" in problems
    assert "bare.service: MemoryMax missing (a leak would take the machine)" in problems
    assert not [p for p in problems if "SystemCallFilter" in p]


def test_the_rule_checks_reject_broken_rules(tmp_path):
    good = alert_rules()[0]
    cases = {
        "invalid PromQL": {**good, "expr": "sum(rate(x[5m]"},
        "severity": {**good, "labels": {"severity": "someday"}},
        "summary": {**good, "annotations": {}},
    }
    for problem, rule in cases.items():
        path = tmp_path / "rules.yaml"
        path.write_text(yaml.safe_dump({"groups": [{"name": "g", "rules": [rule]}]}))
        with pytest.raises(DeployCheckError, match=problem):
            alert_rules(path)


def test_metric_names_are_read_from_every_selector():
    expr = "sum(rate(a_total[5m])) / on(x) b or histogram_quantile(0.9, rate(c_bucket[1m]))"
    assert metric_names(expr) == {"a_total", "b", "c_bucket"}
