"""Every attribute name, bound and bucket boundary pairwatch's telemetry uses, in one place.

Instrument names, kinds, units and Prometheus series live in :mod:`pairwatch.otel.vocabulary`;
``docs/metrics.md`` is the contract both follow, and the dashboards and alert rules query.
"""

from __future__ import annotations

from typing import Final

# Semantic-convention attribute names (opentelemetry.semconv._incubating): kept as literals
# so that an incubating module moving does not break import; a test pins them.
RPC_SYSTEM_NAME: Final = "rpc.system.name"
RPC_METHOD: Final = "rpc.method"
RPC_RESPONSE_STATUS_CODE: Final = "rpc.response.status_code"
JSONRPC_REQUEST_ID: Final = "jsonrpc.request.id"
SERVER_ADDRESS: Final = "server.address"
SERVER_PORT: Final = "server.port"
TRANSPORT: Final = "pairwatch.transport"
INTEGRATION: Final = "pairwatch.integration"
SIDE: Final = "pairwatch.side"
"""Which end kept the books: ``client`` (an instrumented client) or ``server`` (the ASGI/WSGI
middleware).  The same metric names on both ends, told apart by this one bounded attribute,
so a dashboard or rule can set the two views of one server against each other."""
SIDES: Final = ("client", "server")
IS_BATCH: Final = "jsonrpc.batch"
DIAGNOSIS: Final = "pairwatch.diagnosis"
CLOSE_REASON: Final = "pairwatch.close_reason"
REASON: Final = "pairwatch.reason"
DUPLICATE_SCOPE: Final = "pairwatch.duplicate_scope"
ERROR_KIND: Final = "pairwatch.error_kind"
OUTCOME: Final = "pairwatch.outcome"
REPAIR_ACTION: Final = "pairwatch.repair_action"
REQUEST_PAYLOAD: Final = "pairwatch.request.payload"  # only with capture_payloads=True
RESPONSE_PAYLOAD: Final = "pairwatch.response.payload"

OTHER_METHOD: Final = "_OTHER"
"""The overflow value of every capped attribute (``rpc.method``, ``server.address``) and span
name, as the RPC semantic conventions spell it for a method the instrumentation does not know."""
SCOPE: Final = "pairwatch"

SCHEMA_URL: Final = "https://opentelemetry.io/schemas/1.39.0"
"""The semantic-conventions release whose names pairwatch emits: 1.39.0 is the first with
``rpc.system.name``, ``rpc.response.status_code`` and ``jsonrpc.request.id`` (the RPC renames
of semantic-conventions #3176 and #2920, listed in its schema file); none of them changed
through 1.44.0.  Passed to ``get_meter`` and ``get_tracer`` so a backend can translate the names
when the conventions move on."""

DEFERRED_FLUSH: Final = "pairwatch.deferred_flush"
"""An observable gauge that observes nothing, so is never exported: its callback drains the
deferred queue at the start of every collection (see :mod:`pairwatch.otel.deferred`)."""

# Bounds: every value below comes from outside (the client's method names, the URLs it calls,
# the channels it opens), so each has a cap; docs/metrics.md names them and their defaults.
METHOD_CAP: Final = 32
"""Distinct ``rpc.method`` values per meter provider (metric label, span name and span
attribute alike); later ones become ``_OTHER``.  ``instrument(..., method_cap=N)``."""
NAME_MAX_LENGTH: Final = 128
"""Characters a method name or server address may have to be kept; longer ones become
``_OTHER`` without taking a slot (a 100,000-character method name is not a label value)."""
SERVER_ADDRESS_CAP: Final = 64
"""Distinct ``server.address`` values per meter provider; later ones become ``_OTHER``."""
LABEL_SETS_CAP: Final = 256
"""Channel label sets (transport, integration, server address) kept built per meter provider;
the least recently used is rebuilt on its next use, at the cost of a few dicts."""

# RPC latencies: from a loopback millisecond to a 30 s timeout.
LATENCY_BUCKETS: Final = (
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
)  # fmt: skip
SIZE_BUCKETS: Final = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192)
