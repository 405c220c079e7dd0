"""The profile summary: per process, where its samples went, from py-spy's collapsed
stacks (``--subprocesses``: each stack starts with its process and that one's ancestors)."""

from __future__ import annotations

from bench.profiles import RATE, parse_collapsed, summarise

BENCH = 'process 22:"python -m bench.run"'
INGRESS = 'process 10:"python -m replicator ingress --config a;b.toml"'
STACKS = [
    f"{BENCH};{INGRESS};run (ingress/worker.py:50);produce (w.py:9) 60",
    f"{BENCH};{INGRESS};run (ingress/worker.py:50);read (r.py:3) 30",
    f"{BENCH};{INGRESS};main (cli.py:1) 10",
    f"{BENCH};wait (b.py:1) 5",
    'process 22:"python -m bench.run";process 31:"python -c import time',
    'time.sleep(1)";<module> (<string>:2) 7',
    "",
]


def test_collapsed_stacks_are_the_innermost_process_its_frames_and_samples():
    parsed = list(parse_collapsed(STACKS))
    assert parsed[0] == (
        "10 python -m replicator ingress --config a;b.toml",
        ["run (ingress/worker.py:50)", "produce (w.py:9)"],
        60,
    )
    assert parsed[3] == ("22 python -m bench.run", ["wait (b.py:1)"], 5)
    # A command line over two lines (python -c) is joined back.
    assert parsed[4] == ("31 python -c import time time.sleep(1)", ["<module> (<string>:2)"], 7)
    assert len(parsed) == 5


def test_the_summary_gives_each_process_its_own_and_inclusive_shares():
    lines = summarise(STACKS).splitlines()
    assert lines[0] == f"112 samples at {RATE}/s in 3 processes"
    ingress = lines.index(
        "== 10 python -m replicator ingress --config a;b.toml: 100 samples (1.0 s on a core)"
    )
    assert lines[ingress + 1 : ingress + 5] == [
        "  -- own --",
        "   60.0%  produce (w.py:9)",
        "   30.0%  read (r.py:3)",
        "   10.0%  main (cli.py:1)",
    ]
    assert "   90.0%  run (ingress/worker.py:50)" in lines[ingress + 5 :]
    assert lines.index("== 22 python -m bench.run: 5 samples (0.1 s on a core)") > ingress
