"""Stand-in for S3 Cross-Region Replication on the local stack. Not part of the product.

In AWS, a bucket replication rule copies every new object of the source region's bucket to
the destination region's bucket (see ``infra/aws/replicator.yaml``). The local S3 endpoint
does not replicate, so this process polls each source bucket and copies new or changed
objects (by ETag) to the same key in the destination bucket, usually within a second.
Like CRR with default settings, it does not replicate deletions: each region compacts and
expires its own bucket.

Run as ``python -m infra.replication --endpoint URL --pair SRC=DST [--pair ...]``;
credentials come from the standard AWS environment variables.
"""

from __future__ import annotations

import argparse
import logging
import threading
from typing import TYPE_CHECKING

import boto3
from botocore.config import Config as BotoConfig
from botocore.exceptions import BotoCoreError, ClientError

from replicator.core.signals import stop_on_signals

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

log = logging.getLogger(__name__)


class BucketReplicator:
    """Copies objects from ``source`` to ``destination`` that it has not copied yet."""

    def __init__(self, client: S3Client, source: str, destination: str) -> None:
        self.client = client
        self.source = source
        self.destination = destination
        self._copied: dict[str, str] = {}

    def sync_once(self) -> int:
        """One pass over the source bucket; returns how many objects were copied."""
        copied = 0
        seen: set[str] = set()
        paginator = self.client.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=self.source):
            for item in page.get("Contents", []):
                key, etag = item["Key"], item["ETag"]
                seen.add(key)
                if self._copied.get(key) == etag:
                    continue
                self._copy(key, item.get("StorageClass"))
                self._copied[key] = etag
                copied += 1
        # Forget deleted keys so that a re-created key is copied again.
        for key in set(self._copied) - seen:
            del self._copied[key]
        return copied

    def _copy(self, key: str, storage_class: str | None) -> None:
        # The managed copy switches to multipart copy for large objects, as CRR handles
        # objects of any size.
        extra = {"StorageClass": storage_class} if storage_class else None
        self.client.copy(
            {"Bucket": self.source, "Key": key}, self.destination, key, ExtraArgs=extra
        )
        log.debug("replicated s3://%s/%s -> s3://%s/%s", self.source, key, self.destination, key)


def run(
    client: S3Client, pairs: list[tuple[str, str]], interval: float, stop: threading.Event
) -> None:
    replicators = [BucketReplicator(client, src, dst) for src, dst in pairs]
    log.info("replicating %s every %.1fs", ", ".join(f"{s} -> {d}" for s, d in pairs), interval)
    while not stop.is_set():
        for replicator in replicators:
            try:
                count = replicator.sync_once()
            except (ClientError, BotoCoreError) as exc:
                log.warning(
                    "replication pass %s -> %s failed, will retry: %s",
                    replicator.source,
                    replicator.destination,
                    exc,
                )
                continue
            if count:
                log.info(
                    "replicated %d objects %s -> %s",
                    count,
                    replicator.source,
                    replicator.destination,
                )
        stop.wait(interval)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--endpoint", required=True)
    parser.add_argument("--region", default="us-east-1")
    parser.add_argument("--pair", action="append", required=True, metavar="SRC=DST")
    parser.add_argument("--interval", type=float, default=0.5)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    pairs = []
    for pair in args.pair:
        source, sep, destination = pair.partition("=")
        if not sep or not source or not destination:
            parser.error(f"--pair {pair!r}: expected SOURCE_BUCKET=DESTINATION_BUCKET")
        pairs.append((source, destination))
    client = boto3.client(
        "s3",
        endpoint_url=args.endpoint,
        region_name=args.region,
        config=BotoConfig(s3={"addressing_style": "path"}, retries={"mode": "standard"}),
    )
    stop = threading.Event()
    with stop_on_signals(stop):
        run(client, pairs, args.interval, stop)
    log.info("replication stand-in stopped")


if __name__ == "__main__":
    main()
