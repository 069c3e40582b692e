"""``pairwatch.serve_metrics``: a Prometheus endpoint for one's own application, in one call.

:mod:`pairwatch.otel.exposition` does the work; this module gives it the shape an
application wants: one object that holds the meter provider to pass to
:func:`pairwatch.instrument`, knows its URL (the port may have been picked by the OS), and
closes cleanly, releasing the port, so that tests and short-lived tools can start and stop
it as often as they like.
"""

from __future__ import annotations

from types import TracebackType
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider

from pairwatch.otel import exposition

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


def serve_metrics(port: int = 9464, addr: str = "127.0.0.1") -> MetricsEndpoint:
    """Serve pairwatch's metrics for a Prometheus scrape; return the endpoint.

    Pass ``endpoint.meter_provider`` to :func:`pairwatch.instrument`.  Binds loopback unless
    told otherwise, so metrics leave the machine only at the user's choice; ``port=0`` lets
    the OS pick a free port (read it from ``endpoint.port``).  A port in use raises
    ``OSError`` here, at start-up, where the application can choose what to do.
    """
    provider, server = exposition.serve(port, addr)
    return MetricsEndpoint(provider, server, addr)
