"""A run's report reaches monitoring: summary text, metrics, and a Pushgateway push."""

from __future__ import annotations

import http.server
import threading

from compaction.job import RunReport, export
from replicator.core.config import parse_config

CONFIG = """
[regions.us-east-1]
bucket = "bucket-east"
kafka.bootstrap_servers = "127.0.0.1:1"
[compaction]
region = "us-east-1"
pushgateway_url = "http://127.0.0.1:{port}"
"""


def test_report_is_pushed_to_the_pushgateway_with_the_run_figures():
    received: list[tuple[str, str, bytes]] = []

    class Gateway(http.server.BaseHTTPRequestHandler):
        def do_PUT(self) -> None:  # the Pushgateway API: PUT /metrics/job/<job>/<label>/<value>
            body = self.rfile.read(int(self.headers["Content-Length"]))
            received.append(("PUT", self.path, body))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Gateway)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        config = parse_config(CONFIG.format(port=server.server_port), "test.toml", {})
        report = RunReport(
            partitions=3,
            segments_read=12,
            segments_written=3,
            segments_deleted=12,
            bytes_in=1000,
            bytes_out=900,
            records=50,
            seconds=2.5,
            listed_by_level={0: 12, 1: 4},
        )
        registry = export(report, config)
    finally:
        server.shutdown()
    assert (
        registry.get_sample_value("replicator_compaction_segments_written", {"region": "us-east-1"})
        == 3
    )
    listed = {"region": "us-east-1", "level": "0"}
    assert registry.get_sample_value("replicator_compaction_listed_segments", listed) == 12
    [(_, path, body)] = received
    assert path == "/metrics/job/replicator-compaction/region/us-east-1"
    assert b"replicator_compaction_bytes_in" in body


def test_summary_names_every_figure_and_why_things_were_skipped():
    report = RunReport(
        partitions=2,
        segments_read=8,
        segments_written=2,
        segments_deleted=8,
        bytes_in=100,
        bytes_out=90,
        records=40,
        seconds=1.0,
        skipped=["t/0: 2 segments below min_segment_count"],
    )
    text = report.summary()
    for part in (
        "2 partitions",
        "8 segments read",
        "2 written",
        "8 deleted",
        "100 bytes in",
        "90 bytes out",
        "skipped: 1 (t/0: 2 segments below min_segment_count)",
    ):
        assert part in text
