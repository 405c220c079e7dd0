"""Ingress: the service that replays segments from S3 into the destination region's Kafka."""
