"""One worker process of a fleet: its own metrics endpoint, chaos server and workload.

Run by tests/fleet/test_fleet_prometheus.py as ``python worker.py PORT SEED BATCHES``.
Each worker is what one gunicorn worker of an app would be: pairwatch instruments its
httpx client with ``pairwatch.serve_metrics`` on a port of its own, which Prometheus
scrapes.  The chaos server's record of what it injected is the truth the test sums.

Protocol on stdin/stdout, one line each, so the test can time the workload against
Prometheus's scrapes without sleeping:

1. after one clean batch (every counter now exported at 0): prints ``ready``;
2. waits for ``go``; runs BATCHES batches of 3 requests, each answered with one scripted
   fault (or none), chosen by a ``random.Random(SEED)``; prints the injection record as JSON;
3. waits for ``exit`` (or end of input) and stops.
"""

from __future__ import annotations

import json
import random
import sys

import httpx

import pairwatch
from pairwatch.chaos import ChaosServer, Fault

# Each fault touches one element of a 3-request reply: drop -> 1 missing; null_id -> 1
# null-id response and 1 missing; wrong_id -> 1 unknown-id response and 1 missing.
CHOICES = (None, Fault("drop", indices=(0,)), Fault("null_id", indices=(1,)),
           Fault("wrong_id", indices=(2,)))  # fmt: skip


def main() -> None:
    port, seed, batches = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    rng = random.Random(seed)
    script = [None] + [rng.choice(CHOICES) for _ in range(batches)]
    metrics = pairwatch.serve_metrics(port=port)
    with ChaosServer(script) as server, httpx.Client() as client:
        pairwatch.instrument(client, meter_provider=metrics.meter_provider, spans=False)

        def batch(n: int) -> None:
            body = [{"jsonrpc": "2.0", "id": n * 10 + i, "method": "echo"} for i in range(3)]
            client.post(server.url, json=body)

        batch(0)
        print("ready", flush=True)
        if sys.stdin.readline().strip() == "go":
            for n in range(1, batches + 1):
                batch(n)
            pairwatch.flush()
            record = {kind: server.counts.get(kind, 0) for kind in ("drop", "null_id", "wrong_id")}
            print(json.dumps(record), flush=True)
            sys.stdin.readline()
    metrics.close()


if __name__ == "__main__":
    main()
