"""Which checkpoint manager egress asks Spark for (see egress.checkpoint_files)."""

import pytest

from egress.checkpoint_files import (
    CHECKPOINT_FILE_MANAGER,
    LOCAL_FILE_MANAGER,
    checkpoint_file_settings,
)


@pytest.mark.parametrize(
    "location", [".replicator/egress-checkpoint", "/var/lib/replicator/ckpt", "file:///srv/ckpt"]
)
def test_a_local_checkpoint_is_written_through_the_file_system_manager(location):
    assert checkpoint_file_settings(location) == {CHECKPOINT_FILE_MANAGER: LOCAL_FILE_MANAGER}


@pytest.mark.parametrize("location", ["hdfs://namenode:8020/replicator/ckpt", "s3a://b/ckpt"])
def test_other_file_systems_keep_sparks_default(location):
    assert checkpoint_file_settings(location) == {}
