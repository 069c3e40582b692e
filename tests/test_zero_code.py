"""The README's zero-code route, as written: ``opentelemetry-instrument`` with the distro and
``OTEL_METRICS_EXPORTER=prometheus`` puts pairwatch's counters on the exporter's endpoint.

The app is an ordinary script that never mentions pairwatch; it talks to the real chaos
server, then reads its own metrics endpoint the way Prometheus would.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

from components import need
from prometheus_client.parser import text_string_to_metric_families

from pairwatch.chaos import ChaosServer, Fault

INSTALL = "pip install 'pairwatch[instrumentation,prometheus]' opentelemetry-distro"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_opentelemetry_instrument_with_the_distro_exports_the_counters(tmp_path):
    need("opentelemetry.distro", INSTALL)
    need("opentelemetry.exporter.prometheus", INSTALL)
    need("httpx", "pip install 'pairwatch[httpx]'")
    cli = Path(sys.executable).parent / "opentelemetry-instrument"
    assert cli.exists(), INSTALL
    port = free_port()
    batch = json.dumps(
        [{"jsonrpc": "2.0", "id": i, "method": "echo", "params": [i]} for i in (1, 2, 3)]
    )
    with ChaosServer([Fault("drop", indices=(0,))]) as server:
        app = tmp_path / "app.py"
        app.write_text(
            textwrap.dedent(f"""
            import urllib.request
            import httpx

            httpx.post({server.url!r}, content={batch!r},
                       headers={{"Content-Type": "application/json"}})
            page = urllib.request.urlopen("http://127.0.0.1:{port}/metrics", timeout=10)
            print(page.read().decode())
        """)
        )
        env = {
            **os.environ,
            "OTEL_METRICS_EXPORTER": "prometheus",
            "OTEL_TRACES_EXPORTER": "none",
            "OTEL_LOGS_EXPORTER": "none",
            "OTEL_SERVICE_NAME": "my-app",
            "OTEL_EXPORTER_PROMETHEUS_HOST": "127.0.0.1",
            "OTEL_EXPORTER_PROMETHEUS_PORT": str(port),
        }
        done = subprocess.run(
            [str(cli), sys.executable, str(app)],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 0, done.stderr
    totals: dict[str, float] = {}
    for family in text_string_to_metric_families(done.stdout):
        for sample in family.samples:
            totals[sample.name] = totals.get(sample.name, 0.0) + sample.value
    assert totals.get("batch_requests_total") == 3, done.stdout
    assert totals.get("batch_missing_response_total") == 1, done.stdout
    assert totals.get("batch_closed_total") == 1, done.stdout
    assert totals.get("batch_pair_latency_seconds_count") == 2, done.stdout
