"""MCP sessions' spans in OpenTelemetry's MCP conventions, on every transport and mode.

Tracing backends build their MCP views on ``mcp.method.name``, the span name
``{mcp.method.name} {target}``, ``mcp.session.id``, ``mcp.protocol.version``, the network
attributes and ``error.type``.  The names are pinned to the ``opentelemetry-semantic-conventions``
package where it has them (its MCP module is marked moved to the GenAI conventions, whose
names are unchanged); ``error.type``, ``network.*`` and ``gen_ai.*`` come from the same package.
"""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_support import sdk_exit_race, sdk_target, targets, text
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as gen_ai
from opentelemetry.semconv._incubating.attributes import mcp_attributes as mcp_attrs
from opentelemetry.semconv._incubating.attributes import network_attributes as network
from opentelemetry.semconv.attributes import error_attributes
from opentelemetry.trace import SpanKind, StatusCode
from otel_support import Otel

import pairwatch

pytestmark = pytest.mark.timeout(60)

NETWORK = {
    "stdio": {network.NETWORK_TRANSPORT: "pipe"},
    "memory": {},
    "http-sse": {network.NETWORK_TRANSPORT: "tcp", network.NETWORK_PROTOCOL_NAME: "http"},
    "http-json": {network.NETWORK_TRANSPORT: "tcp", network.NETWORK_PROTOCOL_NAME: "http"},
    "http-stateless": {network.NETWORK_TRANSPORT: "tcp", network.NETWORK_PROTOCOL_NAME: "http"},
}


async def six_requests(client: Client, otel: Otel) -> tuple[str, object, MCPError]:
    """The session id the server saw, the negotiated version, and the refused prompt."""
    pairwatch.instrument(
        client, meter_provider=otel.meter_provider, tracer_provider=otel.tracer_provider
    )
    session = text(await client.call_tool("session_id", {}))
    assert text(await client.call_tool("add", {"a": 1, "b": 2})) == "3"
    await client.get_prompt("greet", {"name": "Ada"})
    with pytest.raises(MCPError) as refused:
        await client.get_prompt("nope")
    failed = await client.call_tool("nope", {})
    assert failed.is_error
    with pytest.raises(MCPError):
        await client.call_tool("slow", {"seconds": 10}, read_timeout_seconds=0.3)
    version = getattr(client.session, "protocol_version", None)
    pairwatch.uninstrument(client)
    return session, version, refused.value


@pytest.mark.parametrize(("kind", "mode"), targets())
async def test_spans_follow_the_mcp_conventions(kind: str, mode: str) -> None:
    """A tool call, a prompt, a JSON-RPC error, a tool's own error and the SDK's timeout:
    each request's CLIENT span is named and described as the conventions say."""
    otel = Otel()
    with sdk_target(kind) as target:
        try:
            async with Client(target, mode=mode) as client:
                session, version, refused = await six_requests(client, otel)
        except Exception as exc:  # only the SDK's own race at exit is let by
            if not sdk_exit_race(exc):
                raise
    spans: dict[str, Any] = {}
    listed = 0  # the SDK lists the tools to check a call's result against their schema
    for span in otel.spans():
        if span.parent is None:
            continue
        if span.name == "tools/list":
            listed += 1
            assert span.attributes[mcp_attrs.MCP_METHOD_NAME] == "tools/list"
            continue
        assert span.name not in spans, span.name
        spans[span.name] = span
    assert set(spans) == {
        "tools/call session_id",
        "tools/call add",
        "prompts/get greet",
        "prompts/get nope",
        "tools/call nope",
        "tools/call slow",
    }
    stateful = kind in ("http-sse", "http-json") and mode == "legacy"
    assert bool(session) == stateful  # only a stateful HTTP session has an id
    for name, span in spans.items():
        attrs = dict(span.attributes or {})
        assert span.kind is SpanKind.CLIENT
        method, _, target_name = name.partition(" ")
        assert attrs[mcp_attrs.MCP_METHOD_NAME] == method
        for key, value in NETWORK[kind].items():
            assert attrs[key] == value, key
        assert set(NETWORK["http-sse"]) & set(attrs) == set(NETWORK[kind])
        if stateful:
            assert attrs[mcp_attrs.MCP_SESSION_ID] == session
        else:
            assert mcp_attrs.MCP_SESSION_ID not in attrs
        if kind != "memory" or mode == "legacy":  # in-process modern: nothing negotiated
            assert attrs[mcp_attrs.MCP_PROTOCOL_VERSION] == version
        if method == "tools/call":
            assert attrs[gen_ai.GEN_AI_TOOL_NAME] == target_name
            assert attrs[gen_ai.GEN_AI_OPERATION_NAME] == "execute_tool"
            assert gen_ai.GEN_AI_PROMPT_NAME not in attrs
        else:
            assert attrs[gen_ai.GEN_AI_PROMPT_NAME] == target_name
            assert gen_ai.GEN_AI_TOOL_NAME not in attrs
            assert gen_ai.GEN_AI_OPERATION_NAME not in attrs
    for name in ("tools/call session_id", "tools/call add", "prompts/get greet"):
        assert error_attributes.ERROR_TYPE not in (spans[name].attributes or {}), name
        assert spans[name].status.status_code is StatusCode.UNSET, name
    error = refused.error
    refusal = spans["prompts/get nope"]
    assert refusal.attributes[error_attributes.ERROR_TYPE] == str(error.code)
    assert refusal.status.status_code is StatusCode.ERROR
    assert refusal.status.description == error.message
    tool_error = spans["tools/call nope"]
    assert tool_error.attributes[error_attributes.ERROR_TYPE] == "tool_error"
    assert tool_error.status.status_code is StatusCode.ERROR
    timed_out = spans["tools/call slow"]
    assert timed_out.attributes[error_attributes.ERROR_TYPE] == "timeout"
    assert timed_out.attributes["pairwatch.outcome"] == "missing"
    assert timed_out.status.status_code is StatusCode.ERROR
    counters = otel.counters()
    assert counters["batch.requests"] == 6 + listed
    assert counters["batch.missing_response"] == 1
