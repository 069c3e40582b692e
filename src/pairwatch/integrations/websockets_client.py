"""websockets client connections, sync and asyncio: ``pairwatch.instrument(connection)``.

Why per connection: a websocket is one long stream on which any number of batches and
single requests are in flight at once, answered in any order.  The connection is therefore
one stream channel; every reply pairs by id across all of the connection's open batches, and
an id reused while an earlier batch still waits for it is a cross-batch duplicate (the
ledger's rule).  Both APIs are covered::

    from websockets.sync.client import connect
    ws = pairwatch.instrument(connect("ws://127.0.0.1:8545"))

    from websockets.asyncio.client import connect
    ws = pairwatch.instrument(await connect("ws://127.0.0.1:8545"))

``recv``, iteration (which calls ``recv``), ``recv_streaming`` and ``send`` (including
fragmented messages) are wrapped on the instance; the stream ends when one of them raises
``ConnectionClosed`` or when ``close()`` is called.  With ``repair=True`` the array frames the
client reads are aligned to the batch they answer (see :mod:`pairwatch.pairing.repair`); everything
else, and everything without ``repair``, reaches the client as the same object.
"""

from __future__ import annotations

from pairwatch.channel import Options
from pairwatch.integrations import Handle
from pairwatch.integrations._kit.ws import WsTap, instrument_connection


class WebsocketHandle(Handle):
    def __init__(self, tap: WsTap) -> None:
        self.tap = tap

    def uninstall(self) -> None:
        self.tap.uninstall("closed")


def _connection_classes() -> tuple[type, ...]:
    from websockets.asyncio.connection import Connection as AsyncConnection
    from websockets.sync.connection import Connection as SyncConnection

    return (SyncConnection, AsyncConnection)


def install(conn: object, options: Options) -> WebsocketHandle:
    if not isinstance(conn, _connection_classes()):
        raise TypeError(
            f"pairwatch instruments websockets connections, not {type(conn).__qualname__}; "
            "instrument what connect() returns (after await, for the asyncio API)"
        )
    return WebsocketHandle(instrument_connection(conn, options))
