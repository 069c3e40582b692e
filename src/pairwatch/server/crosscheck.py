"""Join the client's and the server's books of the same batch, where one process has both.

The metrics compare the two sides in aggregate (``pairwatch.side``); traces join them per
batch in a tracing backend (the server's batch span is a child of the caller's
``traceparent``).  This joins them per batch in-process, for a gateway that is both client
and server, for tests, and for the worked example: hand :meth:`Crosscheck.client` and
:meth:`Crosscheck.server` to the two sides' ``on_batch_closed`` and read the verdicts.

Two closed batches are the same batch when they share a trace id and the same request ids
in the same order.  Without trace context (the caller propagated none) only the ids are
left: good enough where ids are unique across callers, wrong where two callers reuse ``1``.
"""

from __future__ import annotations

import threading
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from opentelemetry import trace
from opentelemetry.context import Context

from pairwatch.pairing import diagnosis
from pairwatch.pairing.records import Batch
from pairwatch.pairing.wire import IdKey
from pairwatch.runtime import guard

__all__ = ["Crosscheck", "Verdict"]

UNMATCHED_CAP: Final = 1024
"""Closed batches kept waiting for the other side's books; the oldest go first."""

Key = tuple[int, tuple[IdKey | None, ...]]


@dataclass(frozen=True)
class Verdict:
    """One batch seen from both ends: the diagnosis across sides, and its words."""

    diagnosis: str
    words: str
    client: Batch
    server: Batch
    trace_id: int


def trace_id_of(batch: Batch) -> int:
    """The trace the batch was sent in (0 when none was current or propagated)."""
    ctx = batch.context
    if not isinstance(ctx, Context):
        return 0
    return trace.get_current_span(ctx).get_span_context().trace_id


class Crosscheck:
    """Pairs closed batches of the two sides and keeps the last ``keep`` verdicts.

    ``on_verdict`` (optional) is called with each :class:`Verdict`, shielded like every hook.
    """

    def __init__(
        self,
        on_verdict: Callable[[Verdict], None] | None = None,
        *,
        keep: int = 1024,
        cap: int = UNMATCHED_CAP,
    ) -> None:
        self.on_verdict = on_verdict
        self.verdicts: deque[Verdict] = deque(maxlen=keep)
        self.cap = cap
        self._waiting: dict[str, OrderedDict[Key, Batch]] = {
            "client": OrderedDict(),
            "server": OrderedDict(),
        }
        self._lock = threading.Lock()

    def client(self, batch: Batch) -> None:
        """The client side's ``on_batch_closed``."""
        self._arrive("client", "server", batch)

    def server(self, batch: Batch) -> None:
        """The server side's ``on_batch_closed``."""
        self._arrive("server", "client", batch)

    def _arrive(self, side: str, other: str, batch: Batch) -> None:
        try:
            if not batch.keys:
                return  # notifications only: nothing to answer, nothing to lose
            key = (trace_id_of(batch), tuple(batch.keys))
            with self._lock:
                match = self._waiting[other].pop(key, None)
                if match is None:
                    waiting = self._waiting[side]
                    waiting[key] = batch
                    while len(waiting) > self.cap:
                        waiting.popitem(last=False)
                    return
            client, server = (batch, match) if side == "client" else (match, batch)
            verdict = Verdict(
                diagnosis.across_sides(client, server),
                diagnosis.transit_evidence(client, server),
                client,
                server,
                key[0],
            )
            self.verdicts.append(verdict)
            if self.on_verdict is not None:
                self.on_verdict(verdict)
        except Exception as exc:
            guard.report("crosscheck", exc, None)

    def waiting(self, side: str) -> int:
        """Closed batches of ``side`` still waiting for the other side's books."""
        return len(self._waiting[side])
