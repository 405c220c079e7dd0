from bench.run import figures_from, render


def test_figures_are_judged_against_their_same_run_baselines_and_limits():
    raw = {
        "ingress": {
            "ingress_records_per_s": 90.0,
            "baseline_records_per_s": 100.0,
            "ingress_peak_rss_mib": 600.0,
        },
        "latency": {"p50_seconds": 2.0, "p99_seconds": 4.5},
    }
    by_name = {f.name: f for f in figures_from(raw)}
    rate = by_name["ingress records/s"]
    assert (rate.ratio, rate.met) == (0.9, True)
    assert not by_name["ingress process peak RSS"].met
    assert by_name["end-to-end latency p99"].met and by_name["end-to-end latency p99"].ratio is None
    table = render(list(by_name.values()))
    assert "0.90" in table and "NO" in table and "<= 512 MiB" in table
