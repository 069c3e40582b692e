"""pairwatch: make JSON-RPC 2.0 response pairing visible.

One line instruments a client::

    import pairwatch
    pairwatch.instrument(client)                         # a known library's client
    pairwatch.instrument(obj, send="write", receive="read")  # any object

Each batch the client sends is mirrored in a shadow pending table; every response is paired
by id, and the ``batch.*`` metrics and one span per request id go to the OpenTelemetry
providers (the global ones unless given).  The client sends and receives exactly what it
would without pairwatch, and nothing pairwatch does raises into it.

To let Prometheus scrape the metrics from this process::

    metrics = pairwatch.serve_metrics(port=9464)         # http://127.0.0.1:9464/metrics
    pairwatch.instrument(client, meter_provider=metrics.meter_provider)

A JSON-RPC server keeps its own side of the same books (labelled ``pairwatch.side="server"``)::

    app = pairwatch.PairwatchMiddleware(app)             # ASGI: Starlette, FastMCP, ...
    app = pairwatch.PairwatchWSGIMiddleware(app)         # WSGI: Flask, waitress, ...

To stop observing at run time (a kill switch for an incident, or a benchmark)::

    pairwatch.disable()      # every wrapper passes straight through; nothing is counted
    pairwatch.enable()

Settings also come from the environment (``PAIRWATCH_TIMEOUT``, ``PAIRWATCH_SPANS``...,
see :mod:`pairwatch.config`); arguments given in code win.

A language-server (LSP) client on any ``Content-Length``-framed stream pair::

    reader, writer = pairwatch.instrument_streams(proc.stdout, proc.stdin)

For clients no integration covers, feed a channel by hand::

    channel = pairwatch.open_channel(transport="websocket")
    channel.sent(request_bytes)
    channel.received(reply_bytes)
    channel.close("stream_end")
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pairwatch import _moved
from pairwatch import config as _config
from pairwatch._version import __version__
from pairwatch.api import instrument, instrument_streams, is_instrumented, uninstrument
from pairwatch.channel import Channel, Options, open_channel
from pairwatch.endpoint import serve_metrics
from pairwatch.otel.deferred import flush
from pairwatch.pairing import diagnosis
from pairwatch.runtime import forks as _forks  # noqa: F401 - registers the fork hooks
from pairwatch.runtime.switch import disable, enable, is_enabled

if _config.starts_disabled():  # PAIRWATCH_ENABLED=false, or OTEL_SDK_DISABLED=true
    disable()
_moved.install()  # old import paths of moved modules, with a DeprecationWarning

__all__ = [
    "Channel",
    "Options",
    "PairwatchMiddleware",
    "PairwatchWSGIMiddleware",
    "__version__",
    "diagnosis",
    "disable",
    "enable",
    "flush",
    "instrument",
    "instrument_streams",
    "is_enabled",
    "is_instrumented",
    "open_channel",
    "serve_metrics",
    "uninstrument",
]

if TYPE_CHECKING:
    from pairwatch.server import PairwatchMiddleware, PairwatchWSGIMiddleware

_SERVER = frozenset({"PairwatchMiddleware", "PairwatchWSGIMiddleware"})


def __getattr__(name: str) -> Any:
    """The middleware loads on first use: ``import pairwatch`` in a client process must not
    load the server side (nor the HTTP tap it shares with the integrations)."""
    if name in _SERVER:
        from pairwatch import server

        return getattr(server, name)
    raise AttributeError(f"module 'pairwatch' has no attribute {name!r}")
