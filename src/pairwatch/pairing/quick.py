"""The books of one HTTP exchange while it stays healthy: no ledger until something is odd.

Why: an HTTP exchange opens a channel for one batch and closes it at body end.  Almost every
exchange is healthy (well-formed requests with distinct ids, every result back in order
before the deadline), and for those the ledger's general machinery (a pending table, a
deadline queue, the late-reply memory, a lock) is built and torn down around two list
comparisons.  Inside a real round trip that construction, and the garbage collections its
objects bring on, cost several times the pairing itself.

So a bound exchange first keeps only this record.  If the reply pairs whole, in order and in
time, the closed :class:`~pairwatch.pairing.records.Batch` is built here with exactly the
fields the ledger would give it, or, when nothing would read that ``Batch`` (spans off, no
``on_batch_closed`` hook, no capture), the sink queues its metrics from this record itself.
At the first thing that is not that (a second batch, a reply that is partial, reordered,
late, carries an error or an unknown id, a withdraw, a sweep), :meth:`QuickBatch.replay`
feeds what happened so far into a real :class:`~pairwatch.pairing.ledger.Ledger` at the
times it happened, and the ledger decides from there.  Nothing is counted differently: the
replay is the ledger's own path.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pairwatch.pairing import diagnosis
from pairwatch.pairing.limits import Budget, Limits
from pairwatch.pairing.records import Batch
from pairwatch.pairing.wire import Kind, Payload, Plain

if TYPE_CHECKING:
    from pairwatch.pairing.ledger import Ledger

__all__ = ["QuickBatch"]


class QuickBatch:
    """One healthy batch of a bound exchange, from send to close, without a ledger."""

    __slots__ = (
        "_budget", "context", "deadline", "keys", "methods", "payload", "postponed",
        "received_at", "reply", "sent_at", "timeout",
    )  # fmt: skip

    def __init__(
        self,
        payload: Payload,
        plain: Plain,
        now: float,
        context: object,
        timeout: float | None,
        deadline: float,
        budget: Budget,
    ) -> None:
        self.payload = payload
        self.keys = plain.keys
        self.methods: list[str] = plain.methods or []
        self.sent_at = now
        self.context = context
        self.timeout = timeout
        self.deadline = deadline
        self._budget = budget
        self.postponed: tuple[float, float] | None = None  # (at, timeout) of the last push
        self.reply: Payload | None = None
        self.received_at = 0.0

    @classmethod
    def open(
        cls,
        payload: Payload,
        now: float,
        context: object,
        timeout: float | None,
        limits: Limits,
        budget: Budget,
    ) -> QuickBatch | None:
        """The record of a healthy batch, or None when the ledger must keep it from the start
        (not every element a well-formed request, a repeated id, a batch over the caps)."""
        deadline = cls.admit(payload, now, timeout, limits, budget)
        if deadline is None:
            return None
        return cls(payload, payload.plain, now, context, timeout, deadline, budget)  # type: ignore[arg-type]

    @staticmethod
    def admit(
        payload: Payload, now: float, timeout: float | None, limits: Limits, budget: Budget
    ) -> float | None:
        """The deadline of a batch the quick books may keep, its ids charged to ``budget``;
        None (nothing charged) when the ledger must keep it from the start.  Shared with the
        buffered exchanges that keep a quick batch's fields without one
        (:mod:`pairwatch.integrations._healthy`)."""
        plain = payload.plain
        if plain is None or plain.kind is not Kind.REQUEST or plain.methods is None:
            return None
        keys = plain.keys
        n = len(keys)
        if not n or n > limits.max_pending_ids or (n > 1 and len(set(keys)) != n):
            return None
        if not budget.take_all(n):
            return None
        if limits.method_timeouts:
            return now + limits.timeout_for(plain.methods, timeout)
        # Limits.timeout_for without methods of their own, without the call
        return now + (limits.timeout if timeout is None else timeout)

    @staticmethod
    def answers(sent: Payload, deadline: float, reply: Payload, now: float) -> bool:
        """Whether ``reply`` answers every request of ``sent``, in order, by ``deadline``."""
        plain = reply.plain
        return not (
            plain is None
            or plain.kind is not Kind.RESULT
            or reply.is_batch is not sent.is_batch
            or now > deadline
            or plain.keys != sent.plain.keys  # type: ignore[union-attr]
        )

    def postpone(self, now: float, timeout: float) -> None:
        """As :meth:`Ledger.postpone`: the deadline moves to ``now + timeout``, never earlier."""
        deadline = now + timeout
        if deadline > self.deadline:
            self.deadline = deadline
            self.postponed = (now, timeout)

    def pair(self, payload: Payload, now: float) -> bool:
        """Take a reply that answers every request, in order, in time; False for anything
        else (the caller then replays into a ledger, which judges it)."""
        if self.reply is not None or not self.answers(self.payload, self.deadline, payload, now):
            return False
        self.reply = payload
        self.received_at = now
        return True

    @property
    def paired(self) -> bool:
        return self.reply is not None

    def due(self, now: float) -> bool:
        """Past the deadline: the ledger closes such a batch as ``timeout`` even when every
        reply came, so it must judge from here."""
        return now > self.deadline

    def release(self) -> None:
        """Give back the budget this batch holds (withdrawn, forked away, or replayed)."""
        self._budget.release(len(self.keys))

    def close(self, reason: str, now: float) -> Batch:
        """The closed batch of a paired exchange, as the ledger's ``_finish`` leaves it."""
        self.release()
        n = len(self.keys)
        # The payload's own lists, not copies, as the ledger's intake takes them.
        batch = Batch(
            self.payload.is_batch, n, self.keys, self.methods,  # type: ignore[arg-type]
            self.sent_at, self.context, [self.received_at] * n,
        )  # fmt: skip
        batch.timeout = self.deadline - self.sent_at  # Batch.deadline, without a call
        batch.paired = n
        batch.open = False
        # Nothing a diagnosis weighs can be set here: ids were distinct, every one paired,
        # and a fresh exchange has no timed-out ids to reuse.
        batch.ended = (reason, now, diagnosis.OK)  # close_reason, closed_at, diagnosis
        return batch

    def replay(self, ledger: Ledger) -> None:
        """Feed what this exchange saw into ``ledger``, at the times it happened."""
        self.release()  # the ledger takes the same share again
        ledger.sent(self.payload, self.context, self.timeout, at=self.sent_at)
        if self.postponed is not None:
            at, timeout = self.postponed
            ledger.postpone(timeout, at=at)
        if self.reply is not None:
            ledger.received(self.reply, None, at=self.received_at)
