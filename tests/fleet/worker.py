"""One worker process of a fleet: its own metrics endpoint, chaos server and workload.

Run by tests/fleet/test_fleet_prometheus.py as ``python worker.py ROUTE WHERE SEED BATCHES``.
Each worker is what one gunicorn worker of an app would be, with one of the two fleet routes:

* ``scrape PORT``: ``pairwatch.serve_metrics`` on a port of its own, which Prometheus scrapes;
* ``push URL``: a periodic reader pushing through :mod:`pairwatch.otel.remote_write` to
  Prometheus's remote-write receiver, with ``service.instance.id`` = ``worker-SEED % 100``
  (a restarted worker keeps its identity, as a supervisor's worker slot does).

The chaos server's record of what it injected is the truth the test sums.

Protocol on stdin/stdout, one line each, so the test can time the workload against
Prometheus's scrapes without sleeping:

1. after one clean batch (every counter now exported at 0, and pushed when pushing):
   prints ``ready``;
2. waits for ``go``; runs BATCHES batches of 3 requests, each answered with one scripted
   fault (or none), chosen by a ``random.Random(SEED)``; prints the injection record as JSON;
3. waits for ``exit`` (or end of input) and stops.
"""

from __future__ import annotations

import json
import random
import sys
from collections.abc import Callable
from typing import Any

import httpx

import pairwatch
from pairwatch.chaos import ChaosServer, Fault

# Each fault touches one element of a 3-request reply: drop -> 1 missing; null_id -> 1
# null-id response and 1 missing; wrong_id -> 1 unknown-id response and 1 missing.
CHOICES = (None, Fault("drop", indices=(0,)), Fault("null_id", indices=(1,)),
           Fault("wrong_id", indices=(2,)))  # fmt: skip


def provider(route: str, where: str, seed: int) -> tuple[Any, Callable[[], None]]:
    """The worker's meter provider, and what makes its latest numbers visible."""
    if route == "scrape":
        metrics = pairwatch.serve_metrics(port=int(where))
        return metrics, lambda: None
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
    from opentelemetry.sdk.resources import Resource

    from pairwatch.otel.remote_write import exporter

    reader = PeriodicExportingMetricReader(exporter(where), export_interval_millis=1000)
    resource = Resource.create(
        {"service.name": "fleet-app", "service.instance.id": f"worker-{seed % 100}"}
    )
    pushed = MeterProvider(resource=resource, metric_readers=[reader])
    return pushed, lambda: pushed.force_flush()


def main() -> None:
    route, where, seed, batches = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    upstream = int(sys.argv[5]) if len(sys.argv) > 5 else 0  # the server's port, kept
    rng = random.Random(seed)
    script = [None] + [rng.choice(CHOICES) for _ in range(batches)]
    metrics, publish = provider(route, where, seed)
    meter_provider = getattr(metrics, "meter_provider", metrics)
    with ChaosServer(script, port=upstream) as server, httpx.Client() as client:
        pairwatch.instrument(client, meter_provider=meter_provider, spans=False)

        def batch(n: int) -> None:
            body = [{"jsonrpc": "2.0", "id": n * 10 + i, "method": "echo"} for i in range(3)]
            client.post(server.url, json=body)

        batch(0)
        publish()
        print("ready", flush=True)
        if sys.stdin.readline().strip() == "go":
            for n in range(1, batches + 1):
                batch(n)
            publish()
            record = {kind: server.counts.get(kind, 0) for kind in ("drop", "null_id", "wrong_id")}
            print(json.dumps(record), flush=True)
            sys.stdin.readline()
    (getattr(metrics, "close", None) or metrics.shutdown)()


if __name__ == "__main__":
    main()
