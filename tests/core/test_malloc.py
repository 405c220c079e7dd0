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
