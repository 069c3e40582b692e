"""``pairwatch.instrument(session)`` for the MCP Python SDK's client (mcp 2.x).

Works on a ``mcp.ClientSession`` (before or after ``initialize()``) and on a high-level
``mcp.Client`` once entered (its handshake has then already happened and is not seen; to see
it, build the ``ClientSession`` yourself and instrument it before ``initialize()``).  The
session is one stream channel: each request is a batch of one, server-initiated requests and
the client's answers pair in the ledger's inbound table, apart from the client's own ids
(the server counts from 1 or 0 too, so the same numbers are in flight both ways).

Which hook sees what, and why
-----------------------------
* ``session._dispatcher._write`` (per instance): every outgoing message as a pydantic model
  (requests, notifications, the client's answers to server requests).  Dumped exactly as the
  transports dump it and recorded as sent.  A ``notifications/cancelled`` the SDK writes
  after its own read timeout closes that request's batch at once (reason ``timeout``;
  another cancellation: ``cancelled``), so "missing" matches what the caller saw.
* ``session._dispatcher._dispatch`` (per instance): every incoming item, already parsed, with
  the sender's context.  The SDK has by then dropped what it could not parse, coerced ids
  (``"07"`` pairs with 7) and, over streamable HTTP, rewritten a POST stream's response id
  to the POST's request id or replaced a reply by an error of its own.  So pairing uses the
  raw text (:mod:`pairwatch.integrations.mcp_raw`): the stdio line, the SSE event data, the
  JSON body.  An item without raw text was synthesized by the SDK (the POST stream ended,
  202, 4xx without a JSON-RPC body, unexpected content type): it is no response.
* After the raw text is paired, a response or error item whose (SDK) id names one of our
  requests that is still open means the SDK handed the caller something pairwatch could not
  pair to that request: the batch closes as missing, with reason ``stream_end`` (the SDK's
  "SSE stream ended without a response"), ``body_end`` (other HTTP endings, or a POST body
  whose response carried another id) or ``client_resolved`` (stdio/SSE: an id the SDK
  coerced, such as ``"7"`` for 7).
* ``session._dispatcher._fan_out_closed``: the read stream ended (the server exited, the
  connection dropped): every open batch closes as missing with reason ``stream_end``.

Missing responses that nothing above closes close at the ledger's timeout: the session's
read timeout (plus a short grace so the SDK's own clock, which starts after the write, acts
first) when it has one, else pairwatch's ``timeout``.

Spans: pairwatch's own (scope ``pairwatch``), beside the SDK's ``MCP send ...`` spans and
nested under them, with ``mcp.method.name``, ``jsonrpc.request.id``, ``gen_ai.tool.name``
for ``tools/call`` and the outcome (``pairwatch.outcome``).

Not supported: the in-process ``Client(server)`` path with a ``DirectDispatcher`` (no
JSON-RPC on any wire) and mcp 1.x's ``BaseSession``.
"""

from __future__ import annotations

import contextvars
import dataclasses
import weakref
from collections.abc import Mapping

from mcp_types import JSONRPCError, JSONRPCNotification, JSONRPCRequest, JSONRPCResponse
from opentelemetry.util.types import AttributeValue

from pairwatch.channel import Channel, Options
from pairwatch.integrations import mcp_raw
from pairwatch.integrations._calls import Args, Around, Kwargs, argument
from pairwatch.integrations._patch import Patches
from pairwatch.pairing.records import Batch, Call

__all__ = ["McpHandle", "install"]

GRACE = 0.5
"""Seconds the ledger's timeout trails the session's read timeout (the SDK closes first)."""

_MAX_TRACKED = 4096

SdkKey = int | str


def _sdk_key(value: object) -> SdkKey | None:
    """The key the SDK's own pending table uses (it turns numeric strings into ints)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            return value
    return value if isinstance(value, int) else None


class _Session:
    """One instrumented session's state: the channel and the requests the SDK awaits."""

    channel: Channel  # set right after, since the channel needs span_attributes

    def __init__(self, transport: str) -> None:
        self.transport = transport
        self.address: str | None = None
        self.requests: dict[SdkKey, Batch] = {}
        # Held weakly: a batch whose span is never made (no recording tracer) must not leak.
        self.tools: weakref.WeakKeyDictionary[Batch, str] = weakref.WeakKeyDictionary()

    # ----------------------------------------------------------------- outgoing
    def outgoing(self, message: object) -> None:
        dump = getattr(message, "model_dump", None)
        if dump is None:
            return
        data = dump(by_alias=True, mode="json", exclude_unset=True)
        batch = self.channel.sent(data)
        params = data.get("params")
        params = params if isinstance(params, dict) else {}
        if isinstance(message, JSONRPCRequest):
            key = _sdk_key(data.get("id"))
            if batch is None or not batch.calls or key is None:
                return
            self._track(key, batch)
            name = params.get("name")
            spans = self.channel.telemetry.spans
            if spans and data.get("method") == "tools/call" and isinstance(name, str):
                self.tools[batch] = name
        elif isinstance(message, JSONRPCNotification) and message.method == (
            "notifications/cancelled"
        ):
            key = _sdk_key(params.get("requestId"))
            found = self.requests.pop(key, None) if key is not None else None
            if found is not None:
                reason = params.get("reason")
                timed_out = isinstance(reason, str) and "timed out" in reason
                self.channel.close_batch(found, "timeout" if timed_out else "cancelled")

    def _track(self, key: SdkKey, batch: Batch) -> None:
        if len(self.requests) >= _MAX_TRACKED:  # closed by the ledger's timeout meanwhile
            self.requests = {k: b for k, b in self.requests.items() if b.open}
        self.requests[key] = batch

    # ----------------------------------------------------------------- incoming
    def incoming(self, item: object, sender_ctx: contextvars.Context | None) -> None:
        raw = mcp_raw.take(item, sender_ctx)
        if raw is not None:
            self._label(raw)
            self.channel.received(raw.data)
        message = getattr(item, "message", None)
        if not isinstance(message, (JSONRPCResponse, JSONRPCError)):
            return
        key = _sdk_key(message.id)
        batch = self.requests.pop(key, None) if key is not None else None
        if batch is None or not batch.open:
            return
        if raw is None:
            text = message.error.message if isinstance(message, JSONRPCError) else ""
            reason = "stream_end" if "stream ended" in text else "body_end"
        else:
            reason = "body_end" if raw.transport == "http" else "client_resolved"
        self.channel.close_batch(batch, reason)

    def _label(self, raw: mcp_raw.Raw) -> None:
        address = raw.address or self.address
        if raw.transport != self.transport or address != self.address:
            self.transport, self.address = raw.transport, address
            self.channel.relabel(raw.transport, integration="mcp", server_address=address)

    def stream_ended(self) -> None:
        self.requests.clear()
        self.channel.close("stream_end")

    # -------------------------------------------------------------------- spans
    def span_attributes(self, call: Call) -> Mapping[str, AttributeValue] | None:
        attrs: dict[str, AttributeValue] = {}
        if call.method is not None:
            attrs["mcp.method.name"] = call.method
        tool = self.tools.pop(call.batch, None) if call.index == 0 else None
        if tool is not None:
            attrs["gen_ai.tool.name"] = tool
            attrs["gen_ai.operation.name"] = "execute_tool"
        return attrs


class McpHandle(Patches):
    """Undoes one session's wrappers; the process-wide taps go with the last session."""

    def __init__(self, state: _Session) -> None:
        super().__init__()
        self.state = state
        self.on_uninstall.append(lambda: state.channel.close("closed"))

    def tap(self) -> None:
        mcp_raw.acquire()
        self.on_uninstall.insert(0, mcp_raw.release)


def _session_of(obj: object) -> object:
    if "_dispatcher" in getattr(obj, "__dict__", {}):
        return obj
    if hasattr(type(obj), "session") and hasattr(obj, "_session"):
        session = getattr(obj, "_session", None)
        if session is None:
            raise TypeError(
                "pairwatch: enter the mcp Client first (async with Client(...) as client), "
                "then instrument(client); or instrument its ClientSession before initialize()"
            )
        return session
    raise TypeError(f"pairwatch does not know {type(obj).__qualname__} (mcp 2.x ClientSession)")


def install(obj: object, options: Options) -> McpHandle:
    """Instrument an MCP ``ClientSession`` (or an entered ``Client``); TypeError at set-up."""
    session = _session_of(obj)
    dispatcher = vars(session)["_dispatcher"]
    if not all(callable(getattr(dispatcher, n, None)) for n in ("_write", "_dispatch")):
        raise TypeError(
            f"pairwatch: {type(dispatcher).__name__} carries no JSON-RPC messages "
            "(an in-process Client(server)); nothing to pair"
        )
    read_timeout = getattr(session, "_session_read_timeout_seconds", None)
    if isinstance(read_timeout, (int, float)) and read_timeout > 0:
        options = dataclasses.replace(options, timeout=float(read_timeout) + GRACE)
    stream = type(getattr(dispatcher, "_read_stream", None)).__name__
    transport = "http" if stream.startswith("Context") else "stdio"  # refined by the first raw
    state = _Session(transport)
    state.channel = Channel(
        transport=transport,
        integration="mcp",
        options=options,
        span_attributes=state.span_attributes,
    )
    handle = McpHandle(state)
    count = state.channel.telemetry.internal_error

    def incoming(args: Args, kwargs: Kwargs) -> None:
        ctx = argument(args, kwargs, 3, "sender_ctx")
        item = argument(args, kwargs, 0, "item")
        state.incoming(item, ctx if isinstance(ctx, contextvars.Context) else None)

    on_write = Around(
        "mcp", count, before=lambda a, k: state.outgoing(argument(a, k, 0, "message"))
    )
    on_dispatch = Around("mcp", count, before=incoming)
    on_closed = Around("mcp", count, finally_=state.stream_ended)

    try:
        handle.wrap(dispatcher, "_write", on_write.wrapper(is_async=True))
        handle.wrap(dispatcher, "_dispatch", on_dispatch.wrapper(is_async=True))
        if callable(getattr(dispatcher, "_fan_out_closed", None)):
            closed = on_closed.wrapper(is_async=False)
            handle.wrap(dispatcher, "_fan_out_closed", closed, always=True)
        handle.tap()
    except Exception:
        handle.uninstall()
        raise
    return handle
