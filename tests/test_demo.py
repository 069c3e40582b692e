"""`pairwatch demo`, the README's main job: counters move, the page passes promtool."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from components import require


def totals(text: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[s.name] = out.get(s.name, 0.0) + s.value
    return out


def test_demo_moves_the_counters_and_serves_a_clean_page():
    proc = subprocess.Popen(
        [sys.executable, "-m", "pairwatch.cli", "demo", "--duration", "20", "--plain",
         "--metrics-port", "0", "--rate", "40",
         "--faults", "drop=0.3,null_id=0.2,wrong_id=0.2,reorder=0.5"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        url = re.search(r"metrics (http://127\.0\.0\.1:\d+/metrics)", first)
        assert url, first
        deadline = time.monotonic() + 15
        seen: dict[str, float] = {}
        text = ""
        while time.monotonic() < deadline:
            text = urllib.request.urlopen(url.group(1), timeout=5).read().decode()
            seen = totals(text)
            if seen.get("batch_closed_total", 0) >= 20 and seen.get(
                    "batch_null_id_response_total", 0) > 0:
                break
            time.sleep(0.5)
        for name in ("batch_closed_total", "batch_requests_total",
                     "batch_missing_response_total", "batch_unknown_id_response_total",
                     "batch_null_id_response_total", "batch_out_of_order_total",
                     "batch_pair_latency_seconds_count", "batch_size_count"):
            assert seen.get(name, 0) > 0, (name, seen)
        # Every request closes paired or missing: the books balance on the live page.
        assert seen["batch_pair_latency_seconds_count"] + seen[
            "batch_missing_response_total"] <= seen["batch_requests_total"]
        require(shutil.which("promtool") is not None, "promtool",
                "apt-get install prometheus (done by .ci/run)")
        check = subprocess.run(["promtool", "check", "metrics"], input=text, text=True,
                               capture_output=True, timeout=30)
        assert check.returncode == 0, check.stdout + check.stderr
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=20)
    assert proc.returncode == 0, out
    assert "pairwatch demo summary" in out
    assert "injected by the server" in out
