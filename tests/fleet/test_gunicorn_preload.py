"""Real gunicorn with ``--preload`` and examples/gunicorn_conf.py: pairwatch is instrumented
once in the master, the workers are forked from it, each serves its own ``/metrics``, and
the sum over the workers' endpoints is exactly what the chaos server injected."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

from components import need, require
from live import free_port, wait_for
from prometheus_client.parser import text_string_to_metric_families
from test_gunicorn_example import free_pair

from pairwatch.chaos import ChaosServer, Fault

ROOT = Path(__file__).resolve().parents[2]
REQUESTS = 12


def scrape(port: int) -> dict[str, float]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[s.name] = out.get(s.name, 0.0) + s.value
    return out


def scrape_when_up(port: int) -> dict[str, float] | None:
    """One worker's samples, or None while its endpoint is not listening yet: gunicorn
    boots the workers one after another, so the first answer from the app says nothing
    about the second worker's ``post_fork`` having run."""
    try:
        return scrape(port)
    except OSError:
        return None


def get(url: str) -> dict[str, int] | None:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            found: dict[str, int] = json.load(response)
            return found
    except OSError:
        return None


def test_preloaded_gunicorn_workers_count_exactly(tmp_path):
    need("httpx", "pip install 'pairwatch[httpx]'")
    need("opentelemetry.instrumentation", "pip install 'pairwatch[instrumentation]'")
    gunicorn = shutil.which("gunicorn", path=str(Path(sys.executable).parent))
    require(gunicorn is not None, "gunicorn", "pip install gunicorn")
    assert gunicorn is not None
    port, metrics_base = free_port(), free_pair()
    log = tmp_path / "gunicorn.log"
    script = [Fault("drop", indices=(0,))] * REQUESTS
    with ChaosServer(script) as chaos, log.open("wb") as out:
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(Path(__file__).parent)]),
            "CHAOS_URL": chaos.url,
            "WEB_CONCURRENCY": "2",
            "PAIRWATCH_METRICS_PORT": str(metrics_base),
        }
        master = subprocess.Popen(
            [gunicorn, "-c", str(ROOT / "examples" / "gunicorn_conf.py"), "--preload",
             "-b", f"127.0.0.1:{port}", "gunicorn_app:app"],
            stdout=out, stderr=subprocess.STDOUT, env=env,
        )  # fmt: skip
        try:
            url = f"http://127.0.0.1:{port}/"
            assert wait_for(lambda: get(url + "0"), lambda r: r is not None, 60), log.read_text()
            answers = [get(f"{url}{n}") for n in range(1, REQUESTS)]
            assert all(a is not None and a["replies"] == 2 for a in answers), answers
            per_worker = [
                wait_for(lambda p=p: scrape_when_up(p), lambda r: r is not None, 60)
                for p in (metrics_base, metrics_base + 1)
            ]
            assert None not in per_worker, log.read_text()
        finally:
            master.terminate()
            master.wait(30)
        assert chaos.counts["drop"] == REQUESTS
    missing = sum(w.get("batch_missing_response_total", 0) for w in per_worker)
    requests = sum(w.get("batch_requests_total", 0) for w in per_worker)
    closed = sum(w.get("batch_closed_total", 0) for w in per_worker)
    assert (missing, requests, closed) == (REQUESTS, 3 * REQUESTS, REQUESTS), per_worker
