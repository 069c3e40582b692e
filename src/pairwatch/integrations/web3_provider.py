"""web3.py providers: ``pairwatch.instrument(w3)`` for Web3 / AsyncWeb3 or a provider.

Why these hook points.  web3 caches ``make_request`` and ``make_batch_request`` per provider
(``_request_func_cache``, ``_batch_request_func_cache``) the first time a request is made, so
wrapping those on an instance after first use is silently skipped.  pairwatch therefore hooks
only what web3 looks up on every call, where the bytes cross the wire:

* HTTPProvider / AsyncHTTPProvider: the provider's own session manager's
  ``make_post_request`` / ``async_make_post_request`` (request body in, raw reply bytes out).
  Each call is one HTTP exchange, hence one bound channel; retries are separate exchanges.
  This needs nothing from pairwatch's requests/aiohttp integrations.
* WebSocketProvider: the frames of ``provider._ws`` (a websockets asyncio connection), tapped
  when it connects (``_provider_specific_connect``) and released at disconnect.  The
  connection is one stream channel, as for any websockets client.  When the provider is
  already connected, web3's listener is already waiting inside the original ``recv``; the
  one message that wait returns is recorded where web3 caches it (already sorted by id, so
  that message alone cannot show ``batch.out_of_order``).

Repair mode (``repair=True``), for web3's position pairing after its sort by id: over HTTP
the decoded reply is aligned in ``decode_rpc_response`` to the ids of the body sent in the
same exchange; over WebSocket the reply frame is aligned before web3 decodes it.  Because
web3's ids increase through a batch, the aligned array stays in request order after web3's
own sort.  What web3 does with pairwatch's error element (code -32099): in web3 8 one error
element makes ``execute()`` / ``async_execute()`` raise ``Web3RPCError`` for the whole batch,
so a dropped response surfaces as that exception instead of shifted values.
"""

from __future__ import annotations

import contextvars
import threading
import weakref
from typing import Any

from pairwatch.channel import Channel, Options
from pairwatch.integrations import Handle, hold
from pairwatch.integrations._kit.calls import Args, Around, Kwargs, argument
from pairwatch.integrations._kit.exchange import (
    Exchange,
    HttpClient,
    Request,
    async_send,
    fixed,
    sync_send,
)
from pairwatch.integrations._kit.patch import Patches
from pairwatch.integrations._kit.stream import Tap
from pairwatch.integrations._kit.ws import WsTap, instrument_connection
from pairwatch.pairing import wire
from pairwatch.pairing.repair import repair
from pairwatch.runtime import guard

_instrumented: weakref.WeakSet[Any] = weakref.WeakSet()
_instrumented_lock = threading.Lock()

_PendingRepair = tuple[object, list[wire.IdKey | None], Channel]
_REPAIR: contextvars.ContextVar[_PendingRepair | None] = contextvars.ContextVar(
    "pairwatch_web3_repair", default=None
)
"""The last batch exchange of this thread or task: its raw reply, request ids and channel."""


def _provider_of(client: Any) -> Any:
    from web3 import AsyncWeb3, Web3

    if isinstance(client, (Web3, AsyncWeb3)):
        return client.provider
    return client


class _Noop(Handle):
    def uninstall(self) -> None:
        pass


class Web3Handle(Patches):
    """The provider's patches, plus the websocket tap of its current connection."""

    def __init__(self, provider: Any) -> None:
        super().__init__()
        self.provider = hold(provider)
        self.tap: WsTap | None = None
        self.on_uninstall.append(self._release)

    def retap(self, conn: Any, options: Options | None) -> None:
        """Close the old connection's tap; tap ``conn`` when given (a new connection)."""
        if self.tap is not None:
            self.tap.uninstall("closed")
            self.tap = None
        if conn is not None and options is not None:
            self.tap = instrument_connection(conn, options, integration="web3")

    def _release(self) -> None:
        self.retap(None, None)
        provider = self.provider()
        with _instrumented_lock:
            if provider is not None:
                _instrumented.discard(provider)


def install(client: object, options: Options) -> Handle:
    from web3.providers.persistent.websocket import WebSocketProvider
    from web3.providers.rpc.async_rpc import AsyncHTTPProvider
    from web3.providers.rpc.rpc import HTTPProvider

    provider = _provider_of(client)
    if not isinstance(provider, (HTTPProvider, AsyncHTTPProvider, WebSocketProvider)):
        raise TypeError(
            "pairwatch instruments web3's HTTPProvider, AsyncHTTPProvider and "
            f"WebSocketProvider, not {type(provider).__qualname__}"
        )
    with _instrumented_lock:
        if provider in _instrumented:
            guard.logger.warning("pairwatch: this web3 provider is already instrumented")
            return _Noop()
        _instrumented.add(provider)
    handle = Web3Handle(provider)
    try:
        if isinstance(provider, WebSocketProvider):
            _install_ws(handle, provider, options)
        else:
            _install_http(handle, provider, options, isinstance(provider, AsyncHTTPProvider))
    except Exception:
        handle.uninstall()
        raise
    return handle


# --------------------------------------------------------------------------- HTTP
class _Web3Http(HttpClient):
    """``make_post_request(endpoint_uri, data)``: bytes in, the whole reply's bytes out."""

    integration = "web3"

    def request(self, instance: Any, args: Args, kwargs: Kwargs) -> Request | None:
        data = argument(args, kwargs, 1, "data")
        if not isinstance(data, (bytes, bytearray, memoryview, str)):
            return None
        return Request(data, argument(args, kwargs, 0, "endpoint_uri"))

    def payload(self, request: Request) -> wire.Payload | None:
        # No sniff: web3 only ever posts JSON-RPC, and an empty batch ``[]`` (web3.py #3518)
        # must still be counted.
        return wire.parse(request.body)

    def attach(self, exchange: Exchange, response: Any, instance: Any, kwargs: Any) -> Tap | None:
        channel = exchange
        channel.replied(response)
        if channel.options.repair and exchange.payload.is_batch:
            ids = [m.key for m in exchange.payload.messages if m.kind is wire.Kind.REQUEST]
            _REPAIR.set((response, ids, channel))
        return None


def _repair_decoded(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    """Align a decoded batch reply to the ids sent in the same exchange (repair mode)."""
    value = wrapped(*args, **kwargs)
    pending = _REPAIR.get()
    if pending is None:
        return value
    channel = pending[2]
    try:
        _REPAIR.set(None)
        raw, ids, _ = pending
        if not args or args[0] is not raw:
            return value  # not the reply of that exchange
        fixed = repair(value, ids)
        if not fixed.changed:
            return value
        channel.repaired(fixed.actions)
        return fixed.value
    except Exception as exc:
        guard.report("web3_repair", exc, channel.telemetry.internal_error)
        return value


def _install_http(handle: Web3Handle, provider: Any, options: Options, is_async: bool) -> None:
    manager = provider._request_session_manager
    if is_async:
        handle.wrap(manager, "async_make_post_request", async_send(_Web3Http(), fixed(options)))
    else:
        handle.wrap(manager, "make_post_request", sync_send(_Web3Http(), fixed(options)))
    if options.repair:
        handle.wrap(provider, "decode_rpc_response", _repair_decoded)


# ---------------------------------------------------------------------- WebSocket
def _install_ws(handle: Web3Handle, provider: Any, options: Options) -> None:
    def tap_current(_: None = None, result: Any = None) -> Any:
        handle.retap(getattr(provider, "_ws", None), options)
        return result

    def cache_raw_response(args: Args, kwargs: Kwargs) -> tuple[Args, Kwargs]:
        # web3's listener was already inside the original recv when the tap went in: the
        # message it returns never passed the tap, so record (and repair) it here, decoded.
        tap = handle.tap
        if tap is not None and args and not tap.take_seen():
            args = (tap.decoded(args[0]), *args[1:])
        return args, kwargs

    connect = Around("web3_ws_connect", after=tap_current)
    disconnect = Around("web3_ws_disconnect", finally_=lambda: handle.retap(None, None))
    handle.wrap(provider, "_provider_specific_connect", connect.wrapper(True), always=True)
    handle.wrap(provider, "_provider_specific_disconnect", disconnect.wrapper(True), always=True)
    if getattr(provider, "_ws", None) is not None:
        guard.shielded("web3_ws_connect", tap_current)  # already connected: tap it now
        cache = Around("web3_ws_received", swap=cache_raw_response).wrapper(True)
        handle.wrap(provider._request_processor, "cache_raw_response", cache)
