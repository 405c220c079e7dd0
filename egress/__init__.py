"""Egress: the Spark Structured Streaming job from a region's Kafka to level-0 segments."""
