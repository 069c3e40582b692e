"""A fleet on an existing engine: four worker processes of one app, one real Prometheus.

Each worker (tests/fleet/worker.py) runs a seeded chaos workload whose injection record (the
chaos server's own count of what it bent) it reports, and gets its numbers to Prometheus by
one of the two fleet routes:

* ``scrape``: its own ``/metrics`` (``pairwatch.serve_metrics``) on a port of its own;
  Prometheus scrapes all four as one job (series told apart by ``instance``);
* ``push``: remote write (``pairwatch.otel.remote_write`` around OpenTelemetry's
  remote-write exporter) into Prometheus started with ``--web.enable-remote-write-receiver``
  (series told apart by the ``service_instance_id`` resource label).

Prometheus evaluates the repository's recording rules either way.  The test takes
three real expressions from dashboards/rules/pairwatch-recording.yaml and shows that they
sum exactly across the processes: what the queries return equals the sum of injected faults.

Worker 0 is restarted half-way with the same identity (port, or instance id), as a
supervisor restarts a dead worker: its counters start again at 0.  Two readings are checked:

* the rule's aggregation over the current counters (``rate(M{...}[5m])`` read as
  ``M{...}``) sums the live processes: the first life of worker 0 is gone from it;
* the rule's aggregation over ``increase(M[...])`` counts the reset as a reset and sums
  every life, the restarted worker's first life included.  ``increase`` extrapolates to the
  ends of its window; it is exact here because every series starts at 0 (pairwatch exports
  counters at 0 from the first batch, and each worker waits for that scrape before its
  faults) and each series is read ``@`` the time of its own last sample.

prometheus missing: skipped with an install hint, failed under CI=true.
"""

from __future__ import annotations

import json
import os
import re
import select
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from components import need, require
from live import REPO_ROOT, PrometheusServer, api_get, free_port, start_prometheus, wait_for

WORKER = Path(__file__).with_name("worker.py")
RULES = REPO_ROOT / "dashboards" / "rules" / "pairwatch-recording.yaml"
WORKERS = 4
BATCHES = 20
TIMEOUT = 60.0
# The counters whose recording rules are checked, and how each injected fault moves them.
COUNTERS = {
    "batch_missing_response_total": ("drop", "null_id", "wrong_id"),
    "batch_unknown_id_response_total": ("wrong_id",),
    "batch_null_id_response_total": ("null_id",),
}


@dataclass
class Worker:
    route: str
    port: int
    seed: int
    log: Path
    push_url: str = ""
    # The server it calls keeps its port across the worker's restart, as a real upstream
    # does: server.port is a label, and a new port would be a new series.
    upstream: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] = field(init=False)

    def start(self) -> None:
        env = {**os.environ, "PYTHONPATH": str(REPO_ROOT / "src")}
        where = str(self.port) if self.route == "scrape" else self.push_url
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, str(WORKER), self.route, where, str(self.seed), str(BATCHES),
                 str(self.upstream)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, env=env, bufsize=0,
            )  # fmt: skip
        assert self.line() == "ready", self.log.read_text()

    def line(self) -> str:
        """The worker's next line, waited for with a deadline (a hung worker fails)."""
        assert self.process.stdout is not None
        ready, _, _ = select.select([self.process.stdout], [], [], TIMEOUT)
        assert ready, f"worker on {self.port} said nothing: {self.log.read_text()}"
        return self.process.stdout.readline().decode().strip()

    def say(self, word: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(word.encode() + b"\n")

    def run(self) -> dict[str, int]:
        self.say("go")
        record: dict[str, int] = json.loads(self.line())
        return record

    def stop(self) -> None:
        if self.process.poll() is None:
            self.say("exit")
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)

    @property
    def label(self) -> str:
        """The label that tells this worker's series apart on its route."""
        return "instance" if self.route == "scrape" else "service_instance_id"

    @property
    def selector(self) -> str:
        if self.route == "scrape":
            return f'instance="127.0.0.1:{self.port}"'
        return f'service_instance_id="worker-{self.seed % 100}"'

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"


@dataclass(frozen=True)
class Rule:
    """A recording rule ``sum by (BY) (rate(NAME{MATCHERS}[5m]))`` from the rule file."""

    record: str
    by: str
    name: str
    matchers: str

    def over(self, inner: str) -> str:
        return f"sum by ({self.by}) ({inner})"

    def selector(self, extra: str = "") -> str:
        return self.name + "{" + ", ".join(m for m in (self.matchers, extra) if m) + "}"

    def current(self) -> str:
        """The rule over the counters' current values instead of their 5-minute rate."""
        return self.over(self.selector())

    def increase(self, extra: str, window: str, at: float) -> str:
        """The rule over ``increase()`` of the whole run, read at ``at``."""
        return self.over(f"increase({self.selector(extra)}[{window}] @ {at})")


RULE = re.compile(r"sum by \(([\w, ]+)\) \(rate\((\w+)(?:\{([^}]*)\})?\[5m\]\)\)")


def rule_expressions() -> dict[str, Rule]:
    """counter -> its recording rule, as the file has it (parsed, and checked to rebuild)."""
    yaml = need("yaml", "pip install -e '.[dashboards]'")
    groups = yaml.safe_load(RULES.read_text(encoding="utf-8"))["groups"]
    found: dict[str, Rule] = {}
    for group in groups:
        for rule in group["rules"]:
            expr = " ".join(rule["expr"].split())
            parsed = RULE.fullmatch(expr)
            if parsed and parsed.group(2) in COUNTERS:
                found[parsed.group(2)] = made = Rule(
                    rule["record"], *(g or "" for g in parsed.groups())
                )
                assert made.over(f"rate({made.selector()}[5m])") == expr
    assert set(found) == set(COUNTERS), found
    return found


def query(prom: PrometheusServer, expr: str) -> list[dict[str, Any]]:
    body = api_get(prom.base_url, "/api/v1/query", {"query": expr})
    assert body["status"] == "success", body
    result: list[dict[str, Any]] = body["data"]["result"]
    return result


def total(prom: PrometheusServer, expr: str) -> float:
    return sum(float(r["value"][1]) for r in query(prom, expr))


@pytest.fixture
def prometheus_bin() -> str:
    path = shutil.which("prometheus")
    require(path is not None, "prometheus", "apt-get install prometheus")
    assert path is not None
    return path


def start_receiver(prometheus_bin: str, workdir: Path) -> PrometheusServer:
    """Prometheus with no scrape jobs, taking remote writes, evaluating the rules."""
    port = free_port()
    config = workdir / "prometheus.yml"
    config.write_text(
        json.dumps({"global": {"evaluation_interval": "1s"}, "rule_files": [str(RULES)]}),
        encoding="utf-8",
    )
    log = workdir / "prometheus.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [prometheus_bin, f"--config.file={config}", f"--storage.tsdb.path={workdir / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{port}", "--web.enable-remote-write-receiver"],
            stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    server = PrometheusServer(f"http://127.0.0.1:{port}", process, log)

    def ready() -> bool:
        try:
            return bool(api_get(server.base_url, "/api/v1/status/buildinfo")["status"] == "success")
        except OSError:
            return process.poll() is not None

    if not wait_for(ready, bool, TIMEOUT) or process.poll() is not None:
        server.stop()
        raise RuntimeError(f"prometheus did not start: {log.read_text(errors='replace')[-2000:]}")
    return server


@pytest.fixture(params=["scrape", "push"])
def fleet(
    request: pytest.FixtureRequest, tmp_path: Path, prometheus_bin: str
) -> Iterator[tuple[list[Worker], PrometheusServer]]:
    route = request.param
    need("httpx", "pip install 'pairwatch[httpx]'")
    if route == "push":
        need(
            "opentelemetry.exporter.prometheus_remote_write",
            "pip install opentelemetry-exporter-prometheus-remote-write",
        )
    workers = [
        Worker(route, free_port(), seed, tmp_path / f"worker-{seed}.log") for seed in range(WORKERS)
    ]
    prom: PrometheusServer | None = None
    try:
        if route == "push":
            prom = start_receiver(prometheus_bin, tmp_path)
            for worker in workers:
                worker.push_url = f"{prom.base_url}/api/v1/write"
        for worker in workers:
            worker.start()
        if route == "scrape":
            prom = start_prometheus(
                prometheus_bin, tmp_path, {"app": [w.target for w in workers]}, rule_files=[RULES]
            )
        assert prom is not None
        yield workers, prom
    finally:
        for worker in workers:
            if hasattr(worker, "process"):
                worker.stop()
        if prom is not None:
            prom.stop()


def scraped(prom: PrometheusServer, worker: Worker, expected: dict[str, float]) -> bool:
    """Whether Prometheus's latest samples of ``worker`` read ``expected`` (counter -> value)."""
    for name, value in expected.items():
        found = query(prom, f"{name}{{{worker.selector}}}")
        if not found or sum(float(r["value"][1]) for r in found) != value:
            return False  # not scraped yet (an absent series is not a 0)
    return True


def moved(record: dict[str, int]) -> dict[str, float]:
    return {name: float(sum(record[k] for k in kinds)) for name, kinds in COUNTERS.items()}


def test_four_workers_sum_exactly_in_prometheus_across_a_restart(fleet):
    """Both routes: the rules' sums equal the injected faults, across a restart."""
    workers, prom = fleet
    started = time.time()
    rules = rule_expressions()
    zero = dict.fromkeys(COUNTERS, 0.0)
    for worker in workers:  # every series has a first sample at 0 before any fault
        assert wait_for(lambda w=worker: scraped(prom, w, zero), bool, TIMEOUT), worker.log
    records = [worker.run() for worker in workers]
    for worker, record in zip(workers, records, strict=True):
        assert wait_for(lambda w=worker, r=record: scraped(prom, w, moved(r)), bool, TIMEOUT)

    # Worker 0 dies and is restarted on the same port; its counters start again at 0.
    first_life = records[0]
    workers[0].stop()
    workers[0].seed = 100
    workers[0].start()
    assert wait_for(lambda: scraped(prom, workers[0], zero), bool, TIMEOUT)
    second_life = workers[0].run()
    assert wait_for(lambda: scraped(prom, workers[0], moved(second_life)), bool, TIMEOUT)
    live = [second_life, *records[1:]]
    every_life = [first_life, *live]
    # The seeds inject every kind in worker 0's first life, so each counter has a reset to
    # find and no sum below is 0 == 0.
    assert min(first_life.values()) > 0, first_life

    window = f"{int(time.time() - started) + 120}s"
    for name, rule in rules.items():
        kinds = COUNTERS[name]
        # 1. The rule over current values: the live processes, summed exactly.
        current = rule.current()
        assert total(prom, current) == sum(r[k] for r in live for k in kinds), current
        # 2. The rule over increase(): every life, the restart counted as a reset.
        summed = 0.0
        for worker in workers:
            at = total(prom, f"max(timestamp({rule.selector(worker.selector)}))")
            summed += total(prom, rule.increase(worker.selector, window, at))
        assert summed == sum(r[k] for r in every_life for k in kinds), (name, every_life)
        resets = query(prom, f"resets({name}[{window}]) > 0")
        assert [r["metric"][workers[0].label] for r in resets] == [
            workers[0].selector.split('"')[1]
        ]
    # The recording rules themselves run in Prometheus over the whole fleet.
    recorded = rules["batch_missing_response_total"].record
    assert wait_for(lambda: total(prom, recorded), lambda v: v > 0, TIMEOUT) > 0
