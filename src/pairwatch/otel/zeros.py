"""Which series are exported at 0 before anything goes wrong, so healthy reads as 0.

A counter series that first appears at 1 has no increase for ``increase()``/``rate()`` to
see, and a dashboard over a healthy service shows "No data" rather than 0.  So the first
batch on an attribute set exports every pairing counter at 0 under the attributes its
faults will later be counted with, where those are known in advance.  This module only
decides *which* rows; :class:`~pairwatch.otel.telemetry.Telemetry` adds the zeros, once
per new attribute set (the ``Labels`` remember which sets are done), never per batch.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from pairwatch.otel.labels import Labels
from pairwatch.otel.names import CLOSE_REASON, DUPLICATE_SCOPE, REASON, RPC_METHOD, TRANSPORT
from pairwatch.otel.vocabulary import INSTRUMENTS

Row = tuple[str, Mapping[str, str | int]]
"""(instrument key in the vocabulary, attribute set) of one zero series."""

DUPLICATE_SCOPES: Final = ("in_batch", "cross_batch")

MISSING_REASONS: Final[dict[str, tuple[str, ...]]] = {
    "http": ("body_end", "send_failed", "stream_dropped", "timeout"),
    "sse": ("stream_dropped", "stream_end", "timeout"),
    "websocket": ("stream_dropped", "stream_end", "timeout"),
    "stdio": ("stream_dropped", "stream_end", "timeout"),
    "memory": ("stream_end", "timeout"),
}
"""Per transport, every close reason a missing response can be counted under there; the
``batch.missing_response`` series of each method start at 0 with these.  ``evicted`` (the
process's own caps) and ``closed`` (pairwatch gave up) start with the fault: they are not
the peer's, and one zero row per method and such reason would multiply the series."""
MISSING_REASONS_DEFAULT: Final = ("stream_dropped", "stream_end", "timeout")

WITHDRAWN_REASONS: Final = ("cancelled", "switched_off")
"""``batch.withdrawn_request`` starts at 0 with these on every attribute set."""

# duplicate_id is always counted by scope and missing_response by method and reason: they get
# their own rows; every other pairing counter starts at 0 under the batch attributes.
AT_BASE: Final = tuple(
    row.key for row in INSTRUMENTS if row.pairing and row.key not in ("duplicate", "missing")
)


def batch_rows(labels: Labels, is_batch: bool) -> list[Row]:
    """The zero series of a new (channel labels, batch or single) attribute set."""
    labels.zeroed.add(is_batch)
    attrs = labels.by_batch[is_batch]
    rows: list[Row] = [(key, attrs) for key in AT_BASE]
    for scope in DUPLICATE_SCOPES:
        rows.append(("duplicate", labels.extra(is_batch, **{DUPLICATE_SCOPE: scope})))
    for reason in WITHDRAWN_REASONS:
        rows.append(("withdrawn", labels.extra(is_batch, **{REASON: reason})))
    return rows


def method_rows(labels: Labels, is_batch: bool, method: str) -> list[Row]:
    """The zero ``batch.missing_response`` series of a (limited) method new on the set."""
    labels.zeroed_methods.add((is_batch, method))
    reasons = MISSING_REASONS.get(str(labels.base.get(TRANSPORT, "")), MISSING_REASONS_DEFAULT)
    return [
        ("missing", labels.extra(is_batch, **{RPC_METHOD: method, CLOSE_REASON: reason}))
        for reason in reasons
    ]
