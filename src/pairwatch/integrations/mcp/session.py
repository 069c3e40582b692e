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
  withdraws that request (the channel reads it in what was sent); one it writes after its
  own read timeout closes the request as missing with reason ``timeout``.
* ``session._dispatcher._dispatch`` (per instance): every incoming item, already parsed, with
  the sender's context.  The SDK has by then dropped what it could not parse, coerced ids
  (``"07"`` pairs with 7) and, over streamable HTTP, rewritten a POST stream's response id
  to the POST's request id or replaced a reply by an error of its own.  So pairing uses the
  raw text (:mod:`pairwatch.integrations.mcp.raw`): the stdio line, the SSE event data, the
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
* ``session._dispatcher.send_raw_request`` (per instance): the SDK's own life of one request.
  A request whose call ends while pairwatch still waits for its reply closes then: reason
  ``timeout`` when the SDK's clock ran out (the session's ``read_timeout_seconds`` or the
  call's own), ``cancelled`` when the caller was cancelled, ``stream_end`` when the SDK
  reported the connection closed.  pairwatch therefore keeps no clock of its own for a
  session: a 60 s tool call without any read timeout waits, as the SDK does, for its reply
  or the stream's end, and is never "missing, then late".

Where the replies arrive
------------------------
Pairing is per session, wherever the reply comes from: the stdio pipe, the SSE stream of the
legacy transport (whose POSTs are only acknowledged with ``202 Accepted``), a streamable-HTTP
POST's own stream, a GET stream, or a resumed stream.  The transports' HTTP requests are
marked as tracked exchanges (:func:`pairwatch.integrations.mcp.raw.claim_targets`), so an HTTP
integration that is on as well (the global instrumentor) leaves them to the session instead
of counting a ``202`` as a missing reply and ``Accepted`` as an unparseable one.

Sessions over in-memory streams (``Client(server, mode="legacy")``,
``create_client_server_memory_streams``, a hand-made anyio stream pair) carry the server's
message objects themselves, with no text behind them: those objects are what the client
reads, and they pair as such under ``pairwatch.transport="memory"``.  A session over an
in-process ``DirectDispatcher`` (``Client(server)`` in any other mode) has no JSON-RPC at all;
:mod:`pairwatch.integrations.mcp.direct` pairs its calls.

Spans: pairwatch's own (scope ``pairwatch``), beside the SDK's ``MCP send ...`` spans and
nested under them, with ``mcp.method.name``, ``jsonrpc.request.id``, ``gen_ai.tool.name``
for ``tools/call`` and the outcome (``pairwatch.outcome``).

Not supported: mcp 1.x's ``BaseSession``.  With the global instrumentor on, every
``ClientSession`` created is instrumented with its settings (:func:`targets`); an explicit
``instrument(session)`` then takes over with its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import json
import math
import os
import weakref
from collections.abc import Callable, Mapping
from typing import Any

from mcp_types import (
    JSONRPCError,
    JSONRPCNotification,
    JSONRPCRequest,
    JSONRPCResponse,
)
from opentelemetry.util.types import AttributeValue

from pairwatch.channel import Channel, Options
from pairwatch.integrations import Handle
from pairwatch.integrations._kit.calls import Args, Around, Kwargs, argument
from pairwatch.integrations._kit.patch import Patches, Wrapper
from pairwatch.integrations.mcp import raw as mcp_raw
from pairwatch.integrations.mcp.follow import (
    REQUEST,
    Request,
    Spans,
    call_ended_reason,
    following,
)
from pairwatch.pairing.records import Batch, Call
from pairwatch.runtime import guard

__all__ = ["McpHandle", "install", "targets"]

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
        self.on_end: list[Callable[[], None]] = []  # run once the read stream has ended
        self.address: str | None = None
        self.port: int | None = None
        self.requests: dict[SdkKey, Batch] = {}
        # Requests sent with a resumption token: their reply is an earlier request's, replayed
        # on a GET stream under that request's id, which the SDK maps onto this one's.
        self.resumed: set[SdkKey] = set()
        self.spans = Spans()  # what the MCP conventions' spans need beyond the wire
        self.session_id: str | None = None  # streamable HTTP's Mcp-Session-Id, once given
        self.process: object = None  # stdio: the server process, once a line names it
        self.session: weakref.ReferenceType[Any] | None = None  # for its protocol version
        self.exit_pending = False  # its stdout ended; how it exited is not known yet

    # ----------------------------------------------------------------- outgoing
    def outgoing(self, message: object, metadata: object = None) -> None:
        dump = getattr(message, "model_dump", None)
        if dump is None:
            return
        data = dump(by_alias=True, mode="json", exclude_unset=True)
        params = data.get("params")
        params = params if isinstance(params, dict) else {}
        if isinstance(message, JSONRPCNotification) and message.method == (
            "notifications/cancelled"
        ):
            self._cancelled_by_a_break(params.get("requestId"))
        batch = self.channel.sent(data)
        if isinstance(message, JSONRPCRequest):
            key = _sdk_key(data.get("id"))
            if batch is None or not batch.calls or key is None:
                return
            self._track(key, batch)
            if getattr(metadata, "resumption_token", None) is not None:
                self.resumed.add(key)
            request = REQUEST.get()
            if request is not None and request.batch is None:
                request.batch = batch
            if self.channel.telemetry.spans:
                self.spans.sent(batch, data.get("method"), params)
        elif isinstance(message, JSONRPCNotification) and message.method == (
            "notifications/cancelled"
        ):
            # The channel read the cancellation in what was sent (withdrawn, or the SDK's
            # own timeout): the session only stops following that request.
            key = _sdk_key(params.get("requestId"))
            if key is not None:
                self.requests.pop(key, None)

    def _cancelled_by_a_break(self, request_id: object) -> None:
        """The SDK cancels a call whose transport's connection broke, and tells the server so:
        that request ended with the connection (``stream_dropped``), it was not withdrawn."""
        request = REQUEST.get()  # the cancelled call's own task sends the notification
        key = _sdk_key(request_id)
        if request is None or request.transport is None or key is None:
            return
        batch = self.requests.get(key)
        reason = mcp_raw.broken(request.transport)
        if reason is not None and batch is not None and batch is request.batch and batch.open:
            self.channel.close_batch(batch, reason)

    def _resumed_reply(self, data: object, message: object) -> object:
        """A replayed reply to a resumed request, read under the id it answers here.

        A resumption request is sent as a GET with ``Last-Event-ID``; what comes back is the
        reply the server stored for the request the token belongs to (an earlier session's,
        under its id).  The SDK hands it to this request's caller; pairwatch pairs it with
        this request the same way.  Every other reply is read exactly as it came.
        """
        if not self.resumed or not isinstance(message, (JSONRPCResponse, JSONRPCError)):
            return data
        key = _sdk_key(message.id)
        if key not in self.resumed:
            return data
        self.resumed.discard(key)
        try:
            decoded = json.loads(data) if isinstance(data, (str, bytes, bytearray)) else data
        except ValueError:
            return data
        if not isinstance(decoded, dict) or "id" not in decoded:
            return data
        return {**decoded, "id": message.id}

    def _probe_reply(self, data: object, message: object) -> object:
        """A legacy server's refusal of the 2026-07-28 version probe, read as its answer.

        ``Client(url)`` first sends ``server/discover``; a server that predates it answers
        that POST with an error whose id is null (HTTP 400, before it parses the request),
        and the SDK falls back to ``initialize``.  That error is the reply to the probe, the
        only request of its POST: it pairs with it (as an error) instead of counting a null-id
        reply and a missing probe on every connect.  Every other reply is read as it came.
        """
        if not isinstance(message, JSONRPCError):
            return data
        batch = self.requests.get(_sdk_key(message.id))  # type: ignore[arg-type]
        if batch is None or not batch.open or len(batch.keys) != 1:
            return data
        if batch.methods[0] != DISCOVER:
            return data
        try:
            decoded = json.loads(data) if isinstance(data, (str, bytes, bytearray)) else data
        except ValueError:
            return data
        if not isinstance(decoded, dict) or decoded.get("id", None) is not None:
            return data
        return {**decoded, "id": batch.keys[0]}

    def _track(self, key: SdkKey, batch: Batch) -> None:
        if len(self.requests) >= _MAX_TRACKED:  # closed by the ledger's timeout meanwhile
            self.requests = {k: b for k, b in self.requests.items() if b.open}
        self.requests[key] = batch

    # ----------------------------------------------------------------- incoming
    def incoming(self, item: object, sender_ctx: contextvars.Context | None) -> None:
        raw = mcp_raw.take(item, sender_ctx)
        message = getattr(item, "message", None)
        is_reply = isinstance(message, (JSONRPCResponse, JSONRPCError))
        key = _sdk_key(message.id) if is_reply else None  # type: ignore[union-attr]
        if self.channel.telemetry.spans and key is not None:
            replied = self.requests.get(key)
            if replied is not None:
                self.spans.replied(
                    replied, getattr(message, "result", None), getattr(message, "error", None)
                )
        if raw is not None:
            self._label(raw)
            if raw.session_id is not None:
                self.session_id = raw.session_id
            if raw.process is not None and self.process is None:
                self.process = raw.process
            self.channel.received(
                self._probe_reply(self._resumed_reply(raw.data, message), message)
            )
        elif (
            message is not None
            and hasattr(message, "model_dump")
            and not mcp_raw.from_wire(item, sender_ctx)
        ):
            # In memory: the server's own message object is what the client reads.
            if self.transport != "memory":
                self.transport = "memory"
                self.channel.relabel("memory", integration="mcp")
            dump = message.model_dump(by_alias=True, mode="json", exclude_unset=True)
            self.channel.received(dump)
        if not is_reply:
            return
        batch = self.requests.pop(key, None) if key is not None else None
        if batch is None or not batch.open:
            return
        if raw is None:
            text = message.error.message if isinstance(message, JSONRPCError) else ""
            reason = "stream_end" if "stream ended" in text else "body_end"
            if mcp_raw.dropped(sender_ctx):
                reason = "stream_dropped"  # the SDK says "ended" of a stream that broke
        else:
            reason = "body_end" if raw.transport == "http" else "client_resolved"
        self.channel.close_batch(batch, reason)

    def _label(self, raw: mcp_raw.Raw) -> None:
        address = raw.address or self.address
        port = raw.port if raw.address else self.port
        if raw.transport != self.transport or address != self.address or port != self.port:
            self.transport, self.address, self.port = raw.transport, address, port
            self.channel.relabel(
                raw.transport, integration="mcp", server_address=address, server_port=port
            )

    def stream_ended(self) -> None:
        if self.exit_pending:
            return  # already waiting for the server process's end
        self.requests.clear()
        process = self.process
        if (
            process is not None
            and self.channel.open_batches
            and exit_status(process) is None
            and self._after_exit(process)
        ):
            return  # closed once the server process's end is known
        self._ended(ending(process))

    def _ended(self, reason: str) -> None:
        self.exit_pending = False
        self.channel.close(reason)
        while self.on_end:
            self.on_end.pop()()

    def _after_exit(self, process: object) -> bool:
        """A stdio server's stdout ended before its exit is known (its status reaches the
        event loop a moment later): close then, as a drop if it was killed or failed, as
        an orderly end otherwise (at most a second later).  False without an asyncio loop."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return False
        self.exit_pending = True
        deadline = loop.time() + 1.0

        def check() -> None:
            if not self.exit_pending:
                return
            if exit_status(process) is None and loop.time() < deadline:
                loop.call_later(0.01, check)
                return
            guard.shielded("mcp_exit", self._ended, ending(process))

        loop.call_soon(check)
        return True

    def settle_exit(self) -> None:
        """Close now what waits for the server process's end (pairwatch is taken off)."""
        if self.exit_pending:
            self._ended(ending(self.process))

    def call_ended(self, request: Request, exc: BaseException | None) -> None:
        """The SDK's call returned or raised: a batch still open is one it stopped awaiting."""
        batch = request.batch
        if batch is not None and batch.open:
            reason = call_ended_reason(exc)
            if reason == "cancelled" and request.transport is not None:
                # The SDK cancels the calls in flight when its transport's connection broke:
                # that is the connection's end, not the caller's withdrawal.
                reason = mcp_raw.broken(request.transport) or reason
            if reason == "stream_end" and self.process is not None:
                self.stream_ended()  # the connection is gone: how the server ended decides
                return
            self.channel.close_batch(batch, reason)

    # -------------------------------------------------------------------- spans
    def span_attributes(self, call: Call) -> Mapping[str, AttributeValue] | None:
        session = self.session() if self.session is not None else None
        version = getattr(session, "protocol_version", None)
        return self.spans.details(call, self.transport, version, self.session_id)


class McpHandle(Patches):
    """Undoes one session's wrappers; the process-wide taps go with the last session."""

    def __init__(self, state: _Session) -> None:
        super().__init__()
        self.state = state
        self.on_uninstall.append(state.settle_exit)  # before the close: the hooks run in order
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


_AUTO: weakref.WeakKeyDictionary[object, Handle] = weakref.WeakKeyDictionary()
"""Sessions the global instrumentor instrumented, so that an explicit instrument() replaces
its handle instead of stacking a second one."""


DISCOVER = "server/discover"
"""MCP 2026-07-28's version probe (see ``_Session._probe_reply``)."""


def exit_status(process: object) -> int | None:
    """How a stdio server process ended: its status, minus the signal that killed it, or
    None while unknown.  The status reaches the event loop a moment after the process ends;
    until then it is peeked at with ``waitid(WNOWAIT)``, leaving the process to its owner
    (the SDK's transport) to reap."""
    code = getattr(process, "returncode", None)
    if code is not None:
        return int(code)
    pid = getattr(process, "pid", None)
    if not isinstance(pid, int) or not hasattr(os, "waitid"):
        return None
    try:
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except OSError:  # reaped already, or not our child
        return None
    if info is None:
        return None
    return info.si_status if info.si_code == os.CLD_EXITED else -info.si_status


def ending(process: object) -> str:
    """A stdio stream's close reason: a server killed by a signal or failing mid-call
    dropped it; one that exited in order (or is not known to have ended) ended it."""
    status = exit_status(process) if process is not None else None
    return "stream_dropped" if status not in (None, 0) else "stream_end"


def install(obj: object, options: Options) -> Handle:
    """Instrument an MCP ``ClientSession`` (or an entered ``Client``); TypeError at set-up."""
    session = _session_of(obj)
    auto = _AUTO.pop(session, None)
    if auto is not None:
        auto.uninstall()
    dispatcher = vars(session)["_dispatcher"]
    if not all(callable(getattr(dispatcher, n, None)) for n in ("_write", "_dispatch")):
        if callable(getattr(dispatcher, "send_raw_request", None)):
            from pairwatch.integrations.mcp import direct as mcp_direct

            return mcp_direct.install(dispatcher, options)
        raise TypeError(
            f"pairwatch: {type(dispatcher).__name__} carries no JSON-RPC messages; nothing to pair"
        )
    follows_sdk = callable(getattr(dispatcher, "send_raw_request", None))
    if follows_sdk:  # the SDK's clock decides when a request stops waiting (see above)
        options = dataclasses.replace(options, timeout=math.inf)
    # A first guess, refined by the first message: its raw text names stdio, http or sse,
    # a message with none and from no transport's task is memory.
    stream = type(getattr(dispatcher, "_read_stream", None)).__name__
    state = _Session("http" if stream.startswith("Context") else "stdio")
    with contextlib.suppress(TypeError):
        state.session = weakref.ref(session)
    state.channel = Channel(
        transport=state.transport,
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
        "mcp",
        count,
        before=lambda a, k: state.outgoing(
            argument(a, k, 0, "message"), argument(a, k, 1, "metadata")
        ),
    )
    on_dispatch = Around("mcp", count, before=incoming)
    on_closed = Around("mcp", count, finally_=state.stream_ended)

    try:
        handle.wrap(dispatcher, "_write", on_write.wrapper(is_async=True))
        handle.wrap(dispatcher, "_dispatch", on_dispatch.wrapper(is_async=True))
        if follows_sdk:
            handle.wrap(dispatcher, "send_raw_request", following(state.call_ended, count))
        if callable(getattr(dispatcher, "_fan_out_closed", None)):
            closed = on_closed.wrapper(is_async=False)
            handle.wrap(dispatcher, "_fan_out_closed", closed, always=True)
        handle.tap()
    except Exception:
        handle.uninstall()
        raise
    return handle


def targets(options: Callable[[], Options]) -> list[tuple[Any, str, Wrapper]]:
    """For the global instrumentor: every ``ClientSession`` is instrumented as it is made,
    and the transports' HTTP requests are the sessions' from the start (never counted by an
    HTTP integration on their own, see :mod:`pairwatch.integrations.mcp.raw`)."""
    from mcp.client.session import ClientSession

    def init(wrapped: Any, instance: Any, args: Args, kwargs: Kwargs) -> Any:
        result = wrapped(*args, **kwargs)
        guard.shielded("mcp_auto", _auto, instance, options())
        return result

    return [(ClientSession, "__init__", init), *mcp_raw.claim_targets()]


def _auto(session: object, options: Options) -> None:
    """Instrument a session the global instrumentor saw being made, until its stream ends:
    then its wrappers come off and the process-wide taps are released with the last one."""
    if session in _AUTO:
        return
    handle = _AUTO[session] = install(session, options)
    state = getattr(handle, "state", None)
    if isinstance(state, _Session):
        ref = weakref.ref(session)

        def ended() -> None:
            alive = ref()
            mine = _AUTO.pop(alive, None) if alive is not None else None
            if mine is not None:
                mine.uninstall()

        state.on_end.append(ended)
