"""The direct relay: Kafka to Kafka, exactly once, with failover across identical
upstream clusters (``replicator relay``)."""
