"""Every attribute name and bucket boundary pairwatch's telemetry uses, in one place.

Instrument names are created in :mod:`pairwatch.otel.telemetry`; ``docs/metrics.md`` is the
contract both follow, and the dashboards and alert rules query.
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
TRANSPORT: Final = "pairwatch.transport"
INTEGRATION: Final = "pairwatch.integration"
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
SCOPE: Final = "pairwatch"

# RPC latencies: from a loopback millisecond to a 30 s timeout.
LATENCY_BUCKETS: Final = (
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
)  # fmt: skip
SIZE_BUCKETS: Final = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 5000, 10000)
