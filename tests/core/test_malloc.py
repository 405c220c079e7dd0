import subprocess
import sys

CHECK = "from replicator.core.malloc import limit_malloc_arenas; print(limit_malloc_arenas())"


def run(env):
    return subprocess.run(
        [sys.executable, "-c", CHECK], capture_output=True, text=True, env=env, check=True
    ).stdout.strip()


def test_arenas_are_capped_on_glibc_linux():
    expected = "True" if sys.platform.startswith("linux") else "False"
    assert run({"PATH": ""}) == expected


def test_an_operator_choice_in_the_environment_wins():
    assert run({"MALLOC_ARENA_MAX": "4"}) == "False"


JEMALLOC_CHECK = (
    "import pyarrow as pa; from replicator.core.malloc import use_jemalloc_for_arrow; "
    "print(use_jemalloc_for_arrow(), pa.default_memory_pool().backend_name)"
)


def test_arrow_allocates_with_jemalloc_unless_the_operator_chose_a_pool():
    def pool(env: dict[str, str]) -> str:
        return subprocess.run(
            [sys.executable, "-c", JEMALLOC_CHECK],
            capture_output=True,
            text=True,
            env=env,
            check=True,
        ).stdout.strip()

    assert pool({"PATH": ""}) == "True jemalloc"
    assert pool({"ARROW_DEFAULT_MEMORY_POOL": "system"}) == "False system"
