"""What a batch becomes when it closes: its missing requests, count mismatch, re-typed ids
and diagnosis, settled once, whatever closed it (a complete reply, body or stream end, a
timeout, an eviction, a caller that stopped waiting).

Split from :mod:`pairwatch.pairing.ledger`, which decides *when* a batch closes and keeps
the channel's bookkeeping; this is the rule of *what* a closed batch says.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from pairwatch.pairing import diagnosis
from pairwatch.pairing.intake import count_retyped
from pairwatch.pairing.records import Batch, Tally
from pairwatch.pairing.wire import IdKey

__all__ = ["LedgerSink", "settle"]


class LedgerSink(Protocol):
    """Where closed batches and unattributed responses go (telemetry, audit, tests)."""

    def batch_closed(self, batch: Batch) -> None: ...

    def stray(self, batch: Batch | None, tally: Tally) -> None: ...


def settle(batch: Batch, reason: str, now: float, missing_keys: Sequence[IdKey]) -> None:
    """Close ``batch`` with ``reason`` at ``now``.  Its unanswered requests are counted in
    ``batch.missing`` already; ``missing_keys`` are their ids."""
    batch.open = False
    if batch.rare is None:  # nothing unusual was written: every request answered, once
        batch.ended = (reason, now, diagnosis.OK)
        return
    # Withdrawn and unchecked requests expect no counted reply: they are left out.
    if (
        not batch.expected_nothing
        and batch.paired + batch.unknown != len(batch.keys) - batch.excused_total
    ):
        batch.count_mismatch = True
    retyped = count_retyped(batch.unknown_keys, missing_keys)
    if retyped:
        batch.type_mismatch = retyped
    batch.ended = (reason, now, diagnosis.diagnose_batch(batch))
