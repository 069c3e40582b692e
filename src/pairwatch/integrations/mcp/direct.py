"""An MCP session over an in-process ``DirectDispatcher`` (``Client(server)`` in modern mode).

Why this is a session of its own: ``DirectDispatcher.send_raw_request`` awaits the server's
handler directly, with no JSON-RPC message, no id on any wire and no stream.  Yet it is the
same request/reply life as on a wire (a reply, an error, the SDK's timeout, the peer
closing), and users who swap ``Client(url)`` for ``Client(server)`` in their tests expect
the same counters.  So each call is recorded as the request it stands for, under an id of
pairwatch's own (the dispatcher mints its ids inside the peer, out of sight), and closed by
how the call ends:

* a result: paired;  an ``MCPError`` from the server's handler: paired as an error reply;
* the SDK's own timeout (``REQUEST_TIMEOUT`` raised by the dispatcher): missing, ``timeout``;
* the connection closed (``CONNECTION_CLOSED``): missing, ``stream_end``;
* the caller cancelled: missing, ``cancelled``.

A call the dispatcher refuses before delivering anything (closed or not yet running) is not
recorded: nothing was sent.  ``notify`` is recorded as a notification (it expects nothing).
Requests the server sends back run the client's handlers in-process; there is no reply to
watch on this side, so they are not recorded.  Labels: ``pairwatch.transport="memory"``.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

import anyio
from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT
from opentelemetry.util.types import AttributeValue

from pairwatch.channel import Channel, Options
from pairwatch.integrations._kit.calls import Args, Kwargs, argument
from pairwatch.integrations._kit.patch import Patches, Wrapper
from pairwatch.integrations.mcp.follow import Spans
from pairwatch.pairing.records import Batch, Call
from pairwatch.runtime import guard

__all__ = ["install"]


class _Direct:
    """One dispatcher's channel and the ids pairwatch gives its calls."""

    channel: Channel  # set right after, since the channel needs span_attributes

    def __init__(self) -> None:
        self.ids = itertools.count(1)
        self.spans = Spans()

    def sent(self, instance: object, method: object, params: object) -> tuple[int, Batch] | None:
        if getattr(instance, "_closed", False) or not getattr(instance, "_running", True):
            return None  # refused before anything reached the peer
        if not isinstance(method, str):
            return None
        rid = next(self.ids)
        batch = self.channel.sent({"jsonrpc": "2.0", "id": rid, "method": method})
        if batch is None:
            return None
        if self.channel.telemetry.spans:
            self.spans.sent(batch, method, params)
        return rid, batch

    def span_attributes(self, call: Call) -> Mapping[str, AttributeValue]:
        return self.spans.details(call, "memory")

    def ended(self, sent: tuple[int, Batch], result: object, exc: BaseException | None) -> None:
        rid, batch = sent
        if self.channel.telemetry.spans:
            self.spans.replied(batch, result, getattr(exc, "error", None))
        if exc is None:
            body = dict(result) if isinstance(result, Mapping) else {}
            self.channel.received({"jsonrpc": "2.0", "id": rid, "result": body})
            return
        error = getattr(exc, "error", None)
        code, text = getattr(error, "code", None), getattr(error, "message", None)
        if isinstance(exc, anyio.get_cancelled_exc_class()):
            reason = "cancelled"
        elif code == REQUEST_TIMEOUT and isinstance(text, str) and text.startswith("Timed out"):
            reason = "timeout"  # the dispatcher's own clock, not a handler's error
        elif code == CONNECTION_CLOSED:
            reason = "stream_end"
        elif isinstance(code, int) and isinstance(text, str):  # the handler's error reply
            reply = {"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": text}}
            self.channel.received(reply)
            return
        else:
            reason = "send_failed"
        self.channel.close_batch(batch, reason)

    def notified(self, method: object) -> None:
        if isinstance(method, str):
            self.channel.sent({"jsonrpc": "2.0", "method": method})


def install(dispatcher: object, options: Options) -> Patches:
    """Instrument one ``DirectDispatcher`` (the client's side of an in-process pair)."""
    state = _Direct()
    state.channel = Channel(
        transport="memory",
        integration="mcp",
        options=options,
        span_attributes=state.span_attributes,
    )
    count = state.channel.telemetry.internal_error
    handle = Patches()
    handle.on_uninstall.append(lambda: state.channel.close("closed"))

    async def send_raw_request(wrapped: Any, instance: Any, args: Args, kwargs: Kwargs) -> Any:
        method = argument(args, kwargs, 0, "method")
        params = argument(args, kwargs, 1, "params")
        sent = guard.shielded("mcp_direct", state.sent, instance, method, params, count=count)
        if sent is None:
            return await wrapped(*args, **kwargs)
        try:
            result = await wrapped(*args, **kwargs)
        except BaseException as exc:
            guard.shielded("mcp_direct", state.ended, sent, None, exc, count=count)
            raise
        guard.shielded("mcp_direct", state.ended, sent, result, None, count=count)
        return result

    async def notify(wrapped: Any, instance: Any, args: Args, kwargs: Kwargs) -> Any:
        closed = getattr(instance, "_closed", False)
        result = await wrapped(*args, **kwargs)
        if not closed:
            guard.shielded("mcp_direct", state.notified, argument(args, kwargs, 0, "method"))
        return result

    wrappers: list[tuple[str, Wrapper]] = [
        ("send_raw_request", send_raw_request),
        ("notify", notify),
    ]
    try:
        for name, wrapper in wrappers:
            handle.wrap(dispatcher, name, wrapper)
    except Exception:
        handle.uninstall()
        raise
    return handle
