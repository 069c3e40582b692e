"""How an MCP session follows the SDK's own life of each request.

Split from :mod:`pairwatch.integrations.mcp.session` (which pairs what a session writes and
reads) because these wrappers are about the SDK's calls, not about messages:

* :func:`following` wraps ``send_raw_request``: the request its write opens is noted in
  :data:`REQUEST` (the write runs in the caller's task), and when the call ends without
  pairwatch having paired a reply, the session closes that batch with the reason
  :func:`call_ended_reason` reads from how the call ended.  pairwatch so keeps no clock of
  its own for a session: the SDK's read timeouts (per session and per request) decide.
* :class:`Spans` keeps what the SDK's calls say of each request that the wire does not (the
  tool or prompt addressed, a tool's own failure), for spans in OpenTelemetry's MCP
  conventions; both the wire session and the in-process dispatcher use it.

The session's HTTP traffic is claimed where the transports make it, not here
(:func:`pairwatch.integrations.mcp.raw.claim_targets`): marking the writer's context instead
would also reach an in-process server's handlers, which run in that context, and hide their
own JSON-RPC calls from the HTTP integrations.
"""

from __future__ import annotations

import contextvars
import weakref
from collections.abc import Callable, Mapping
from typing import Any

import anyio
from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT
from opentelemetry.util.types import AttributeValue

from pairwatch.integrations._kit.calls import Args, Kwargs
from pairwatch.integrations._kit.patch import Wrapper
from pairwatch.otel.span_policy import Details
from pairwatch.pairing.records import Batch, Call
from pairwatch.runtime import guard

__all__ = ["REQUEST", "Request", "Spans", "call_ended_reason", "following"]


class Request:
    """One ``send_raw_request`` in flight: the batch its write opened, once written, and
    the HTTP transport that sends it (whose broken connection ends the call)."""

    __slots__ = ("batch", "transport")

    def __init__(self) -> None:
        self.batch: Batch | None = None
        self.transport: object = None


REQUEST: contextvars.ContextVar[Request | None] = contextvars.ContextVar(
    "pairwatch_mcp_request", default=None
)


def call_ended_reason(exc: BaseException | None) -> str:
    """Why the SDK stopped waiting for a reply, as a close reason, from how its call ended."""
    if exc is None:
        return "client_resolved"  # the SDK resolved it from something pairwatch did not pair
    if isinstance(exc, anyio.get_cancelled_exc_class()):
        return "cancelled"
    error = getattr(exc, "error", None)
    code = getattr(error, "code", None)
    if code == REQUEST_TIMEOUT:
        return "timeout"
    if code == CONNECTION_CLOSED:
        return "stream_end"
    return "send_failed" if isinstance(exc, (TimeoutError, OSError)) else "client_resolved"


def following(
    call_ended: Callable[[Request, BaseException | None], None], count: guard.ErrorCounter
) -> Wrapper:
    """Around ``send_raw_request``: note the batch its write opens; close it when the call
    ends without pairwatch having paired it."""

    async def send_raw_request(wrapped: Any, instance: Any, args: Args, kwargs: Kwargs) -> Any:
        request = Request()
        token = REQUEST.set(request)
        failure: BaseException | None = None
        try:
            return await wrapped(*args, **kwargs)
        except BaseException as exc:
            failure = exc
            raise
        finally:
            REQUEST.reset(token)
            guard.shielded("mcp", call_ended, request, failure, count=count)

    return send_raw_request


_NETWORK: dict[str, dict[str, AttributeValue]] = {
    "stdio": {"network.transport": "pipe"},
    "http": {"network.transport": "tcp", "network.protocol.name": "http"},
    "sse": {"network.transport": "tcp", "network.protocol.name": "http"},
}
"""The conventions' network attributes of each transport label (in memory: none apply)."""

_TARGETS = {"tools/call": "gen_ai.tool.name", "prompts/get": "gen_ai.prompt.name"}
"""The methods whose span is named after what they address, and the attribute that says it."""


class Spans:
    """What an MCP session knows of each request beyond the wire, for its span in
    OpenTelemetry's MCP conventions: the tool or prompt it addresses, and how the SDK saw
    its reply fail (the error's message, a tool's ``isError``).  Held weakly by batch: a
    batch whose span is never written must not leak.  One per session, both kinds."""

    __slots__ = ("failures", "targets")

    def __init__(self) -> None:
        self.targets: weakref.WeakKeyDictionary[Batch, str] = weakref.WeakKeyDictionary()
        self.failures: weakref.WeakKeyDictionary[Batch, tuple[str, str]] = (
            weakref.WeakKeyDictionary()
        )

    def sent(self, batch: Batch, method: object, params: object) -> None:
        """A request went out: remember the tool or prompt its span is named after."""
        if method in _TARGETS and isinstance(params, Mapping):
            name = params.get("name")
            if isinstance(name, str):
                self.targets[batch] = name

    def replied(self, batch: Batch, result: object, error: object) -> None:
        """The SDK read a reply: remember an error's message, or a tool's own failure."""
        if error is not None:
            message = error.get("message") if isinstance(error, Mapping) else None
            message = getattr(error, "message", message)
            if isinstance(message, str):
                self.failures[batch] = ("", message)  # error.type is the code, on the span
        elif isinstance(result, Mapping) and result.get("isError") is True:
            self.failures[batch] = ("tool_error", "tool_error")

    def details(
        self, call: Call, transport: str, version: object = None, session_id: object = None
    ) -> Details:
        """One request's span in the MCP conventions, the same for every transport and mode:
        named ``{mcp.method.name} {target}``, with the session, protocol version, network,
        tool or prompt, and ``error.type`` when it failed (its JSON-RPC code, ``tool_error``,
        or the close reason of a reply that never came)."""
        batch, method = call.batch, call.method
        attrs: dict[str, AttributeValue] = dict(_NETWORK.get(transport, ()))
        name = None
        if method is not None:
            attrs["mcp.method.name"] = method
            target = self.targets.pop(batch, None) if call.index == 0 else None
            if target is not None:
                attrs[_TARGETS[method]] = target
                name = f"{method} {target}"
                if method == "tools/call":
                    attrs["gen_ai.operation.name"] = "execute_tool"
        if isinstance(version, str):
            attrs["mcp.protocol.version"] = version
        if isinstance(session_id, str):
            attrs["mcp.session.id"] = session_id
        failure = self.failures.pop(batch, None) if call.index == 0 else None
        error = None
        if call.error_code is not None:
            attrs["error.type"] = str(call.error_code)
            error = failure[1] if failure is not None else f"JSON-RPC error {call.error_code}"
        elif failure is not None and failure[0]:
            attrs["error.type"], error = failure
        elif call.received_at is None and not batch.open and batch.excused_for(call.index) is None:
            attrs["error.type"] = batch.close_reason  # missing: why it stopped being awaited
        return Details(attrs, name, error)
