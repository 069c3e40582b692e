"""Start a real Prometheus scraping real `pairwatch demo` processes, all on 127.0.0.1.

Shared by the end-to-end test (tests/dashboards/test_e2e_prometheus.py) and by
`render_png.py --from-demo`, so the committed picture and the test see metrics produced
the same way: the demo's OpenTelemetry Prometheus exporter, scraped by a Prometheus that
loads the repository's own rule files. Standard library only.

Everything waits with a deadline: the first scrape lands a few seconds after Prometheus
starts and rate() needs two samples, so callers poll for data with `wait_for` rather than
trusting readiness.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

REPO_ROOT = Path(__file__).resolve().parent.parent
RULE_FILES: tuple[Path, ...] = (
    REPO_ROOT / "dashboards" / "rules" / "pairwatch-recording.yaml",
    REPO_ROOT / "dashboards" / "rules" / "pairwatch-slo.yaml",
    REPO_ROOT / "dashboards" / "rules" / "pairwatch-alerts.yaml",
)
HOST = "127.0.0.1"

T = TypeVar("T")


def wait_for(check: Callable[[], T], ok: Callable[[T], bool], timeout: float) -> T:
    """Call `check` every second until `ok(result)` or `timeout` seconds; return the last
    result (the caller asserts on it, so a timeout fails with the evidence)."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if ok(result) or time.monotonic() > deadline:
            return result
        time.sleep(1.0)


def free_port() -> int:
    """A port free on 127.0.0.1 right now (Prometheus takes no port 0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        port: int = sock.getsockname()[1]
        return port


def api_get(base_url: str, path: str, params: Mapping[str, str] | None = None) -> Any:
    """GET a Prometheus HTTP API path and decode the JSON body."""
    url = f"{base_url.rstrip('/')}{path}"
    if params:
        url += "?" + urllib.parse.urlencode(params)
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.load(response)


def _stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL after 10 s: teardown must not hang the test run."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)


# --- pairwatch demo -----------------------------------------------------------------------


@dataclass
class Demo:
    """One `pairwatch demo` process and the host:port its metrics are served on."""

    job: str
    target: str
    process: subprocess.Popen[bytes]
    log: Path

    def stop(self) -> None:
        _stop(self.process)


_METRICS_URL = re.compile(rb"metrics http://(127\.0\.0\.1:\d+)/metrics")


def start_demo(
    job: str,
    workdir: Path,
    *,
    faults: str | None = None,
    client_bug: float | None = None,
    rate: float | None = None,
    seed: int = 1,
    timeout: float = 30.0,
    extra: Sequence[str] = (),
) -> Demo:
    """Start `python -m pairwatch.cli demo` until stopped, metrics on a free 127.0.0.1 port.

    `faults`/`client_bug`/`rate` left as None keep the demo's defaults (what a reader who
    runs `pairwatch demo` sees). The metrics URL is read from the first stdout line, which
    goes to a log file (no pipe to fill up); `timeout` bounds the wait for it.
    """
    command = [
        sys.executable, "-m", "pairwatch.cli", "demo",
        "--duration", "0", "--plain",
        "--metrics-port", "0", "--metrics-addr", HOST,
        "--seed", str(seed),
    ]  # fmt: skip
    if faults is not None:
        command += ["--faults", faults]
    if client_bug is not None:
        command += ["--client-bug", str(client_bug)]
    if rate is not None:
        command += ["--rate", str(rate)]
    command += list(extra)  # e.g. --batch-size 1, --timeout 0.5
    # Run the pairwatch of this checkout even when it is not the installed one.
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(REPO_ROOT / "src"), *filter(None, [env.get("PYTHONPATH")])]
    )
    log = workdir / f"demo-{job}.log"
    with log.open("wb") as log_file:
        process = subprocess.Popen(command, stdout=log_file, stderr=subprocess.STDOUT, env=env)
    demo = Demo(job, "", process, log)

    def target() -> str | None:
        found = _METRICS_URL.search(log.read_bytes())
        return found.group(1).decode() if found else None

    found = wait_for(target, lambda t: t is not None or process.poll() is not None, timeout)
    if found is None:
        demo.stop()
        raise RuntimeError(f"pairwatch demo ({job}) gave no metrics URL: {log.read_text()}")
    demo.target = found
    return demo


# --- Prometheus ---------------------------------------------------------------------------


@dataclass
class PrometheusServer:
    """A Prometheus process and its base URL."""

    base_url: str
    process: subprocess.Popen[bytes]
    log: Path

    def stop(self) -> None:
        _stop(self.process)


def start_prometheus(
    prometheus_bin: str,
    workdir: Path,
    jobs: Mapping[str, Sequence[str]],
    *,
    rule_files: Sequence[Path] = RULE_FILES,
    interval: str = "1s",
    timeout: float = 20.0,
    alertmanager: str | None = None,
) -> PrometheusServer:
    """Start a real Prometheus on 127.0.0.1 scraping `jobs` (job name -> host:port targets)
    every `interval`, with `rule_files` (the repository's, by default) evaluated as often.

    A one-second interval gives rate() its two samples within seconds; the rules keep
    their own [5m]/[10m] windows, which already return data from two samples on.
    """
    port = free_port()
    config = {
        "global": {"scrape_interval": interval, "evaluation_interval": interval},
        "rule_files": [str(path) for path in rule_files],
        "scrape_configs": [
            {"job_name": job, "static_configs": [{"targets": list(targets)}]}
            for job, targets in jobs.items()
        ],
    }
    if alertmanager is not None:  # host:port of an Alertmanager to send alerts to
        config["alerting"] = {"alertmanagers": [{"static_configs": [{"targets": [alertmanager]}]}]}
    config_file = workdir / "prometheus.yml"
    config_file.write_text(json.dumps(config, indent=2), encoding="utf-8")  # JSON is YAML
    log = workdir / "prometheus.log"
    with log.open("wb") as log_file:
        process = subprocess.Popen(
            [
                prometheus_bin,
                f"--config.file={config_file}",
                f"--storage.tsdb.path={workdir / 'tsdb'}",
                f"--web.listen-address={HOST}:{port}",
            ],
            stdout=log_file,
            stderr=subprocess.STDOUT,
        )
    server = PrometheusServer(f"http://{HOST}:{port}", process, log)

    def ready() -> bool:
        if process.poll() is not None:
            return True  # reported below
        try:
            with urllib.request.urlopen(f"{server.base_url}/-/ready", timeout=2) as response:
                return bool(response.status == 200)
        except OSError:
            return False

    if not wait_for(ready, bool, timeout) or process.poll() is not None:
        server.stop()
        raise RuntimeError(f"prometheus did not start: {log.read_text(errors='replace')[-2000:]}")
    return server


# --- Alertmanager -------------------------------------------------------------------------


@dataclass
class AlertmanagerServer:
    """An Alertmanager process and its host:port."""

    target: str
    process: subprocess.Popen[bytes]
    log: Path

    @property
    def base_url(self) -> str:
        return f"http://{self.target}"

    def stop(self) -> None:
        _stop(self.process)


def start_alertmanager(
    binary: str, workdir: Path, config_text: str, *, timeout: float = 20.0
) -> AlertmanagerServer:
    """Start a real Alertmanager on 127.0.0.1 with `config_text` as alertmanager.yml (no
    cluster, no notifications leave the machine: receivers without integrations)."""
    config = workdir / "alertmanager.yml"
    config.write_text(config_text, encoding="utf-8")
    target = f"{HOST}:{free_port()}"
    log = workdir / "alertmanager.log"
    with log.open("wb") as log_file:
        process = subprocess.Popen(
            [
                binary,
                f"--config.file={config}",
                f"--storage.path={workdir / 'am-data'}",
                f"--web.listen-address={target}",
                "--cluster.listen-address=",
            ],
            stdout=log_file,
            stderr=subprocess.STDOUT,
        )
    server = AlertmanagerServer(target, process, log)

    def ready() -> bool:
        if process.poll() is not None:
            return True
        try:
            with urllib.request.urlopen(f"{server.base_url}/-/ready", timeout=2) as response:
                return bool(response.status == 200)
        except OSError:
            return False

    if not wait_for(ready, bool, timeout) or process.poll() is not None:
        server.stop()
        raise RuntimeError(f"alertmanager did not start: {log.read_text(errors='replace')[-2000:]}")
    return server
