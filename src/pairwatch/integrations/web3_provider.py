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
from urllib.parse import urlsplit

from pairwatch import guard
from pairwatch.channel import Channel, Options
from pairwatch.integrations import Handle
from pairwatch.integrations._patch import tracking
from pairwatch.integrations._ws import Patches, WsTap, instrument_connection
from pairwatch.pairing import wire
from pairwatch.pairing.repair import repair

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


class Web3Handle(Handle):
    def __init__(self, provider: Any) -> None:
        self.provider = provider
        self.patches: list[Patches] = []
        self.tap: WsTap | None = None

    def uninstall(self) -> None:
        for patches in reversed(self.patches):
            patches.restore()
        self.patches.clear()
        if self.tap is not None:
            self.tap.uninstall("closed")
            self.tap = None
        with _instrumented_lock:
            _instrumented.discard(self.provider)


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
class _Exchanges:
    """Opens one bound channel per POST and feeds it the body sent and the reply read."""

    def __init__(self, provider: Any, options: Options) -> None:
        self.options = options
        self.repair = options.repair
        try:
            self.host = urlsplit(str(provider.endpoint_uri)).hostname
        except Exception:
            self.host = None

    def begin(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        try:
            data = args[1] if len(args) > 1 else kwargs.get("data")
            if not isinstance(data, (bytes, bytearray, memoryview, str)):
                return None
            parsed = wire.parse(data)
            channel = Channel(
                bound=True,
                transport="http",
                integration="web3",
                server_address=self.host,
                options=self.options,
            )
            channel.sent_parsed(parsed)
            ids = None
            if self.repair and parsed.is_batch:
                ids = [m.key for m in parsed.messages if m.kind is wire.Kind.REQUEST]
            return channel, ids
        except Exception as exc:
            guard.report("web3_sent", exc, None)
            return None

    def end(self, begun: Any, raw: object) -> None:
        if begun is None:
            return
        channel, ids = begun
        channel.received(raw)
        channel.close("body_end")
        if ids is not None:
            _REPAIR.set((raw, ids, channel))

    def fail(self, begun: Any) -> None:
        if begun is not None:
            begun[0].close("send_failed")

    def post(self, wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        begun = self.begin(args, kwargs)
        try:
            # Marked as tracked so that the requests/aiohttp integrations, if also on,
            # pass this exchange through instead of counting it a second time.
            with tracking():
                raw = wrapped(*args, **kwargs)
        except BaseException:
            self.fail(begun)
            raise
        self.end(begun, raw)
        return raw

    async def apost(self, wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        begun = self.begin(args, kwargs)
        try:
            with tracking():
                raw = await wrapped(*args, **kwargs)
        except BaseException:
            self.fail(begun)
            raise
        self.end(begun, raw)
        return raw


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
    exchanges = _Exchanges(provider, options)
    manager = Patches(provider._request_session_manager)
    handle.patches.append(manager)
    if is_async:
        manager.wrap("async_make_post_request", exchanges.apost)
    else:
        manager.wrap("make_post_request", exchanges.post)
    if options.repair:
        own = Patches(provider)
        handle.patches.append(own)
        own.wrap("decode_rpc_response", _repair_decoded)


# ---------------------------------------------------------------------- WebSocket
def _install_ws(handle: Web3Handle, provider: Any, options: Options) -> None:
    def tap_current() -> None:
        try:
            if handle.tap is not None:
                handle.tap.uninstall("closed")
                handle.tap = None
            conn = getattr(provider, "_ws", None)
            if conn is not None:
                handle.tap = instrument_connection(conn, options, integration="web3")
        except Exception as exc:
            guard.report("web3_ws_connect", exc, None)

    async def connect(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        result = await wrapped(*args, **kwargs)
        tap_current()
        return result

    async def disconnect(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        try:
            return await wrapped(*args, **kwargs)
        finally:
            if handle.tap is not None:
                handle.tap.uninstall("closed")
                handle.tap = None

    async def cache_raw_response(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        # web3's listener was already inside the original recv when the tap went in: the
        # message it returns never passed the tap, so record (and repair) it here, decoded.
        tap = handle.tap
        if tap is not None and args and not tap.take_seen():
            args = (tap.decoded(args[0]), *args[1:])
        return await wrapped(*args, **kwargs)

    own = Patches(provider)
    handle.patches.append(own)
    own.wrap("_provider_specific_connect", connect)
    own.wrap("_provider_specific_disconnect", disconnect)
    if getattr(provider, "_ws", None) is not None:
        tap_current()  # already connected: tap the open socket now
        processor = Patches(provider._request_processor)
        handle.patches.append(processor)
        processor.wrap("cache_raw_response", cache_raw_response)
