"""Which side an alert blames, from a batch's diagnosis or a missing reply's close reason.

Written once here because three things must agree on it: the rules (every alert carries a
``blame`` label an Alertmanager routes on), the runbook (which says who to call) and the
tests. The close-reason column follows the table in DESIGN.md: a body or stream that ended
with ids pending means the server answered without them; a dropped stream, a timeout or a
failed send means the server hung or could not be reached, which the client's books alone
cannot tell apart from the network; a reply the server's own books show as sent but the
client never got is the network's (``lost_in_transit``, both sides instrumented).
"""

from __future__ import annotations

from typing import Final

from pairwatch.pairing import diagnosis as d

CLIENT: Final = "client"
SERVER: Final = "server"
NETWORK: Final = "network"
SERVER_OR_NETWORK: Final = "server_or_network"
NONE: Final = "none"
"""Nobody's JSON-RPC fault: pairwatch itself, its scrape, or a job that went away."""
BLAMES: Final = (CLIENT, SERVER, NETWORK, SERVER_OR_NETWORK, NONE)

BY_CLOSE_REASON: Final[dict[str, str]] = {
    "body_end": SERVER,  # the reply body ended without these ids: the server left them out
    "stream_end": SERVER,  # the stream or session ended in order with ids pending
    "app_error": SERVER,  # server side only: the application raised before it answered
    # MCP: the SDK handed the caller a reply pairwatch could not pair (an id it coerced)
    "client_resolved": SERVER,
    "stream_dropped": SERVER_OR_NETWORK,  # the connection broke or the server process died
    "timeout": SERVER_OR_NETWORK,  # a hung (or slow) server, or packets that never came
    # a refused or reset connection, and also a server that accepts and never answers
    "send_failed": SERVER_OR_NETWORK,
    "evicted": NONE,  # pairwatch's own caps
    "closed": NONE,  # pairwatch gave up on the exchange
}
"""The side a missing reply points at, per ``pairwatch_close_reason``."""

BY_DIAGNOSIS: Final[dict[str, str]] = {
    d.CLIENT_DUPLICATE_IDS: CLIENT,
    d.MALFORMED_REQUEST: CLIENT,
    d.ID_TYPE_MISMATCH: SERVER,
    d.SERVER_NULL_ID: SERVER,
    d.LATE_RESPONSE: SERVER,  # it answered, after the client's timeout: slow, not wrong
    d.ID_ECHO_FAULT: SERVER,
    d.LOST_IN_TRANSIT: NETWORK,
}
"""The side a batch diagnosis points at. ``responses_missing`` is not here: its side is the
close reason's (:data:`BY_CLOSE_REASON`)."""

BUDGET_SPENDERS: Final = (SERVER, SERVER_OR_NETWORK)
"""The blames whose missing replies spend the availability budget: a client bug has its own
alerts, and pairwatch's own caps are nobody's outage."""


def close_reasons(blame: str) -> tuple[str, ...]:
    """The close reasons that point at ``blame``, in table order."""
    return tuple(reason for reason, side in BY_CLOSE_REASON.items() if side == blame)
