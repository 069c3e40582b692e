"""``pairwatch.serve_metrics``: a Prometheus endpoint for one's own application, in one call.

:mod:`pairwatch.otel.exposition` does the work; this module gives it the shape an
application wants: one object that holds the meter provider to pass to
:func:`pairwatch.instrument`, knows its URL (the port may have been picked by the OS), and
closes cleanly, releasing the port, so that tests and short-lived tools can start and stop
it as often as they like.
"""

from __future__ import annotations

from collections.abc import Iterable
from types import TracebackType
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.view import View

from pairwatch.otel import default_provider, exposition

__all__ = ["MetricsEndpoint", "serve_metrics"]


class MetricsEndpoint:
    """A running ``/metrics`` endpoint and the meter provider that feeds it.

    Usable as a context manager; :meth:`close` is idempotent.
    """

    def __init__(self, meter_provider: MeterProvider, server: Any, addr: str) -> None:
        self.meter_provider = meter_provider
        self._server = server
        self.addr = addr
        self.port: int = server.server_port
        self.closed = False

    @property
    def url(self) -> str:
        host = f"[{self.addr}]" if ":" in self.addr else self.addr
        return f"http://{host}:{self.port}/metrics"

    def close(self) -> None:
        """Stop serving, free the port, and shut the provider down (its instruments stop)."""
        if self.closed:
            return
        self.closed = True
        default_provider.take_back(self.meter_provider)
        self._server.shutdown()
        self._server.server_close()
        self.meter_provider.shutdown()

    def __enter__(self) -> MetricsEndpoint:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else "serving"
        return f"<MetricsEndpoint {self.url} {state}>"


def serve_metrics(
    port: int = 9464, addr: str = "127.0.0.1", *, views: Iterable[View] = ()
) -> MetricsEndpoint:
    """Serve pairwatch's metrics for a Prometheus scrape; return the endpoint.

    While it runs, channels given no meter provider record into it, unless the application
    set a global SDK provider (:mod:`pairwatch.otel.default_provider`); passing
    ``endpoint.meter_provider`` explicitly works too.  Binds loopback unless
    told otherwise, so metrics leave the machine only at the user's choice; ``port=0`` lets
    the OS pick a free port (read it from ``endpoint.port``).  A port in use raises
    ``OSError`` here, at start-up, where the application can choose what to do.

    The application may use the same provider for its own meters: every OpenTelemetry point
    kind is served (sums, gauges, explicit and exponential histograms; an exponential one as
    classic buckets at its own boundaries).  ``views`` are SDK views for that provider.
    """
    provider, server = exposition.serve(port, addr, views=views)
    default_provider.lend(provider)
    return MetricsEndpoint(provider, server, addr)
