"""gunicorn settings for an app that pairwatch instruments: one metrics port per worker.

Run:  gunicorn -c examples/gunicorn_conf.py --preload myapp:app

With ``--preload`` the app (and ``pairwatch.instrument(...)`` or the instrumentor in it) is
loaded once in the master, before the workers are forked.  pairwatch is fork-safe: each
worker starts with empty books and its own threads, and counts only its own traffic.  What
each worker needs of its own is where its numbers go, so ``post_fork`` gives it a meter
provider:

* scrape route (here): a ``/metrics`` endpoint on the first free port of
  ``PAIRWATCH_METRICS_PORT`` .. ``+ workers - 1``.  Prometheus scrapes all of them; a worker
  that dies frees its port and its replacement takes it, so the series keep their
  ``instance`` and Prometheus sees a counter reset, which ``rate``/``increase`` handle.
* push route: replace ``serve_on_first_free_port`` by a ``PeriodicExportingMetricReader``
  over ``pairwatch.otel.remote_write.exporter(url)`` with a ``service.instance.id`` per
  worker (see tests/fleet/worker.py).

The app instruments with the global meter provider (no ``meter_provider=`` argument), which
``post_fork`` sets in each worker before its first request.  Settings come from the
environment (``PAIRWATCH_TIMEOUT=10``, ``PAIRWATCH_SPANS=false``...).
"""

from __future__ import annotations

import os
from typing import Any

from opentelemetry import metrics

import pairwatch
from pairwatch.endpoint import MetricsEndpoint

workers = int(os.environ.get("WEB_CONCURRENCY", "4"))
preload_app = True
METRICS_PORT = int(os.environ.get("PAIRWATCH_METRICS_PORT", "9464"))
METRICS_ADDR = os.environ.get("PAIRWATCH_METRICS_ADDR", "127.0.0.1")


def serve_on_first_free_port(base: int, count: int, addr: str = "127.0.0.1") -> MetricsEndpoint:
    """``pairwatch.serve_metrics`` on the first of ``count`` ports from ``base`` that is free.

    A fixed set of ports (not port 0) so that Prometheus can list them as static targets,
    and so that a restarted worker reuses the port its predecessor freed.
    """
    for port in range(base, base + count):
        try:
            return pairwatch.serve_metrics(port=port, addr=addr)
        except OSError:
            continue
    raise OSError(f"no free metrics port in {base}..{base + count - 1}")


def post_fork(server: Any, worker: Any) -> None:
    endpoint = serve_on_first_free_port(METRICS_PORT, workers, METRICS_ADDR)
    metrics.set_meter_provider(endpoint.meter_provider)
    worker.log.info("pairwatch metrics for worker %s on %s", worker.pid, endpoint.url)
