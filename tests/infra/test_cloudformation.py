import fnmatch
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

TEMPLATE = Path(__file__).resolve().parents[2] / "infra" / "aws" / "replicator.yaml"


def test_template_passes_cfn_lint():
    result = subprocess.run(
        [str(Path(sys.executable).with_name("cfn-lint")), str(TEMPLATE)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_template_declares_the_production_resources():
    text = TEMPLATE.read_text()
    for needed in (
        "AWS::S3::Bucket",
        "AWS::SQS::Queue",
        "AWS::SQS::QueuePolicy",
        "RedrivePolicy",
        "AbortIncompleteMultipartUpload",
        "ReplicationConfiguration",
        "s3:ObjectCreated:*",
        "s3:ObjectRemoved:*",
    ):
        assert needed in text, needed


def test_template_locks_down_transport_writes_and_keys():
    text = TEMPLATE.read_text()
    for needed in (
        '"aws:SecureTransport": "false"',  # no plain HTTP to either bucket
        'ArnNotLike: { "aws:PrincipalArn": !Ref WriterPrincipalArns }',  # writers only
        "SseKmsEncryptedObjects",  # KMS-encrypted segments replicate...
        "ReplicaKmsKeyID",  # ...re-encrypted with the destination's key
        '"aws:SourceAccount": !Ref AWS::AccountId',  # replication role trust
        "${BucketName}/${Prefix}/*",  # object permissions limited to the prefix
    ):
        assert needed in text, needed
    assert text.count("AWS::IAM::ManagedPolicy") == 3  # egress, ingress, compaction
    assert text.count('"aws:SecureTransport": "false"') == 2


class _CloudFormationLoader(yaml.SafeLoader):
    """YAML with CloudFormation's short forms (``!Ref``, ``!Sub``, ...) as their long
    forms."""


def _intrinsic(loader: yaml.SafeLoader, tag_suffix: str, node: yaml.Node) -> dict[str, Any]:
    name = "Ref" if tag_suffix == "Ref" else f"Fn::{tag_suffix}"
    if isinstance(node, yaml.ScalarNode):
        value: Any = loader.construct_scalar(node)
        if name == "Fn::GetAtt":
            value = value.split(".", 1)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)  # type: ignore[arg-type]
    return {name: value}


_CloudFormationLoader.add_multi_constructor("!", _intrinsic)

ACCOUNT, BUCKET = "111122223333", "replicator-west"
PARAMETERS = {"AWS::Partition": "aws", "AWS::AccountId": ACCOUNT, "BucketName": BUCKET}


def _resolved(value: Any) -> Any:
    """Parameters and pseudo parameters put in, as CloudFormation would for one stack."""
    if isinstance(value, dict) and "Ref" in value:
        return PARAMETERS[value["Ref"]]
    if isinstance(value, dict) and "Fn::Sub" in value:
        return re.sub(r"\$\{([^}]+)\}", lambda m: PARAMETERS[m.group(1)], value["Fn::Sub"])
    return value


def _condition_holds(operator: str, key: str, wanted: Any, request: dict[str, str]) -> bool:
    """IAM's reading of one condition: a key missing from the request matches no value,
    so a negated operator holds for it."""
    wanted = _resolved(wanted)
    present = request.get(key)
    positive = operator.removesuffix("IfExists").replace("Not", "", 1)
    if present is None:
        matched = False
    elif positive in ("ArnLike", "StringLike"):
        matched = fnmatch.fnmatchcase(present, wanted)
    else:
        assert positive in ("ArnEquals", "StringEquals"), operator
        matched = present == wanted
    return matched != ("Not" in operator)


def _statement_applies(statement: dict[str, Any], request: dict[str, str]) -> bool:
    principal = statement["Principal"]
    if principal != "*" and principal.get("Service") != request.get("service"):
        return False
    return all(
        _condition_holds(operator, key, wanted, request)
        for operator, pairs in statement.get("Condition", {}).items()
        for key, wanted in pairs.items()
    )


def _queue_policy_says(effect: str, request: dict[str, str]) -> bool:
    """Whether a statement of the queue policy with ``effect`` applies to sending."""
    template = yaml.load(TEMPLATE.read_text(), Loader=_CloudFormationLoader)  # a SafeLoader
    policy = template["Resources"]["EventsQueuePolicy"]["Properties"]["PolicyDocument"]
    return any(
        s["Effect"] == effect and _statement_applies(s, request)
        for s in policy["Statement"]
        if s["Action"] == "sqs:SendMessage"
    )


def test_only_s3_delivering_the_buckets_notifications_may_send_to_the_queue():
    """A sent message names any key it likes, and an identity policy in the account
    (``sqs:*`` on ``*``) would let its holder send despite a queue policy that only allows
    S3: the queue policy denies everyone else."""
    bucket_arn = f"arn:aws:s3:::{BUCKET}"
    s3 = {"service": "s3.amazonaws.com"}
    notifications = {**s3, "aws:SourceArn": bucket_arn, "aws:SourceAccount": ACCOUNT}
    assert _queue_policy_says("Allow", notifications)
    assert not _queue_policy_says("Deny", notifications)
    for request in (
        {},  # a user or role of the account: its request names no source
        {**s3, "aws:SourceArn": "arn:aws:s3:::another-bucket", "aws:SourceAccount": ACCOUNT},
        {**s3, "aws:SourceArn": bucket_arn, "aws:SourceAccount": "444455556666"},
    ):
        assert _queue_policy_says("Deny", request), request
