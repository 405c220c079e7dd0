import subprocess
import sys
from pathlib import Path

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
