"""How an MCP session follows the SDK's own life of each request.

Split from :mod:`pairwatch.integrations.mcp.session` (which pairs what a session writes and
reads) because these wrappers are about the SDK's calls, not about messages:

* :func:`following` wraps ``send_raw_request``: the request its write opens is noted in
  :data:`REQUEST` (the write runs in the caller's task), and when the call ends without
  pairwatch having paired a reply, the session closes that batch with the reason
  :func:`call_ended_reason` reads from how the call ended.  pairwatch so keeps no clock of
  its own for a session: the SDK's read timeouts (per session and per request) decide.

The session's HTTP traffic is claimed where the transports make it, not here
(:func:`pairwatch.integrations.mcp.raw.claim_targets`): marking the writer's context instead
would also reach an in-process server's handlers, which run in that context, and hide their
own JSON-RPC calls from the HTTP integrations.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from typing import Any

import anyio
from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT
from opentelemetry.util.types import AttributeValue

from pairwatch.integrations._kit.calls import Args, Kwargs
from pairwatch.integrations._kit.patch import Wrapper
from pairwatch.pairing.records import Batch
from pairwatch.runtime import guard

__all__ = ["REQUEST", "Request", "call_ended_reason", "following"]


class Request:
    """One ``send_raw_request`` in flight: the batch its write opened, once written."""

    __slots__ = ("batch",)

    def __init__(self) -> None:
        self.batch: Batch | None = None


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


def span_attributes(
    method: str | None, tool: str | None, version: object
) -> dict[str, AttributeValue]:
    """One MCP request's span attributes in OpenTelemetry's MCP and GenAI conventions
    (``mcp.method.name``, ``mcp.protocol.version``, ``gen_ai.tool.name``,
    ``gen_ai.operation.name``), the same for every transport and mode."""
    attrs: dict[str, AttributeValue] = {}
    if method is not None:
        attrs["mcp.method.name"] = method
    if isinstance(version, str):
        attrs["mcp.protocol.version"] = version
    if tool is not None:
        attrs["gen_ai.tool.name"] = tool
        attrs["gen_ai.operation.name"] = "execute_tool"
    return attrs
