"""The shadow pending table: the books one channel keeps of what was sent and what came back.

A *channel* is whatever responses come back on (one HTTP exchange, one stream, one session).
The ledger mirrors the pending table a correct client would keep, pairs every response by id,
and closes batches when they are complete, when their body or stream ends, at their timeout,
or when a cap evicts them; :func:`~pairwatch.pairing.closing.settle` says what each closed
batch shows, and the sink gets it.  Pure Python, no I/O, no OpenTelemetry, an injected clock:
every rule of the pairing contract is driven deterministically by the tests, and the same
books serve the live path and the audit.

Two modes:

* ``bound`` (HTTP exchanges): each reply belongs to the batch sent on the same exchange, so
  stray responses, count mismatches and replies to notification-only batches are attributed
  to that batch even after it closed.  ``[]`` is held, uncounted, until its reply shows the
  other side speaks JSON-RPC (a REST API that takes an empty list counts nothing).
* stream (sessions, websockets, stdio): responses pair across every open batch.  One that
  pairs with nothing is attributed, in this order, to the batch its siblings in the same
  array paired with; to the open batch holding its id under another JSON type (that batch
  closes as ``id_type_mismatch``); to the batch that held its id until it timed out (a late
  reply: handed to the sink as a stray tally naming that batch); to the oldest open batch
  sent as an array, when the reply is an array; else to no batch.

Most channels hold one batch at a time (an HTTP exchange always does), so the one open batch
is kept as it is (``_single``), and the structures that serve several (the deadline queue,
the table of pending ids) are filled only when a second batch opens or a reply must be
looked up id by id.  Neither costs more with what is outstanding: expiry and eviction read
the deadline queue's front (:mod:`pairwatch.pairing.opened`), never every open batch.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

from pairwatch.pairing import wire
from pairwatch.pairing.closing import LedgerSink, settle
from pairwatch.pairing.intake import read_sent
from pairwatch.pairing.late import TimedOut
from pairwatch.pairing.limits import Budget, Limits
from pairwatch.pairing.opened import OpenBatches
from pairwatch.pairing.records import Batch, Tally, all_distinct
from pairwatch.pairing.shape import judge
from pairwatch.pairing.table import Entry, PendingTable
from pairwatch.pairing.wire import CALL_KINDS, IdKey, IdState, Kind, Payload

__all__ = ["Ledger", "LedgerSink", "Limits"]

ALONE = True
"""Keep a channel's one healthy open batch alone, outside the deadline queue and the table
(see the module docstring).  Off only in the tests that compare the two ways."""
_DEFAULT_LIMITS = Limits()
_NONE_OPEN = OpenBatches()

_CANCELLED: tuple[str, str] = ("withdrawn", "cancelled")
_ENDED: tuple[str, str] = ("withdrawn", "subscription_ended")
"""Every ledger's deadline queue until it queues a batch (most never do): always empty."""


class Ledger:
    """One channel's books.  Thread-safe: every public method takes the channel's lock."""

    __slots__ = (
        "_bound", "_budget", "_clock", "_inbound", "_last", "_late", "_lock", "_open", "_single",
        "_table", "_withdrawn", "auto_close", "held", "limits", "sink",
    )  # fmt: skip

    def __init__(
        self,
        sink: LedgerSink,
        *,
        clock: Callable[[], float],
        limits: Limits | None = None,
        bound: bool = False,
        auto_close: bool | None = None,
        budget: Budget | None = None,
    ) -> None:
        self.sink = sink
        self.limits = limits = limits or _DEFAULT_LIMITS
        self._clock = clock
        self._bound = bound
        self._budget = budget or limits.budget
        # A bound exchange closes at body end so that late extras still count against it.
        self.auto_close = (not bound) if auto_close is None else auto_close
        self._lock = threading.Lock()
        # The open batches: the one alone and healthy as it is, or every one in the deadline
        # queue with its ids in the table (made when first needed).
        self._single: Batch | None = None
        self._open = _NONE_OPEN  # replaced by a queue of its own when a batch is queued
        self._table: PendingTable | None = None
        self._inbound: dict[IdKey, int] = {}  # server-initiated requests awaiting our answer
        self._late: TimedOut | None = None  # made when a timeout first leaves ids missing
        self._withdrawn: TimedOut | None = None  # made when the caller first withdraws
        self._last: Batch | None = None
        # A bound [] awaiting its reply, which shows whether this is JSON-RPC at all.
        self.held: Batch | None = None

    # ------------------------------------------------------------------ sending
    def sent(
        self, payload: Payload, context: object = None, timeout: float | None = None
    ) -> Batch | None:
        """Register a payload the client wrote; return the batch it opened, if any
        (``timeout``: this batch's own, e.g. an HTTP client's read timeout)."""
        closed: list[Batch] = []
        lock = self._lock  # taken explicitly, as in replied: see Budget.take
        lock.acquire()
        try:
            now = self._clock()
            if self._single is not None or self._open.count:
                self._expire(now, closed)
            batch = self._register(payload, now, context, closed, timeout)
        finally:
            lock.release()
        if closed:
            self._emit(closed)
        return batch

    def _register(
        self,
        payload: Payload,
        now: float,
        context: object,
        closed: list[Batch],
        timeout: float | None = None,
    ) -> Batch | None:
        keys, methods, notifications, invalid = read_sent(payload, self._inbound)
        if not payload.is_batch and not keys and not notifications and invalid is None:
            return None  # only answers to the server: nothing of ours to track
        batch = Batch(payload.is_batch, payload.size, keys, methods, now, context)
        if notifications:  # the rarer fields are set only when they differ from the default
            batch.notifications = notifications
        if invalid is not None:
            batch.invalid_requests = invalid
        batch.timeout = self.limits.timeout_for(methods, timeout)
        if self._bound:  # only an exchange attributes replies to its last batch; a stream
            self._last = batch  # must not keep a closed batch (and its lists) alive
            if self.held is not None:
                self._drop_held()  # a [] whose exchange moved on without a reply: nothing
        if not keys:
            batch.expected_nothing = True
            if self._bound and payload.empty_batch:
                self.held = batch  # counted once its reply shows JSON-RPC, or never
                return batch
            settle(batch, "no_response_expected", now, ())
            closed.append(batch)
            return batch
        late = self._late
        if late:
            reused = late.reused(keys, now)
            if reused:
                batch.reused_timed_out = reused
        if self._single is not None:
            self._spill()  # a second batch: the first joins the queue and the table
        self._admit(batch, closed, now)
        if (
            ALONE
            and not self._open.count
            and payload.plain is not None
            and batch.rare is None  # nothing evicted, no duplicate to count
            and all_distinct(keys)
        ):
            self._single = batch
        else:
            self._queued(batch, payload.plain is not None)
        return batch

    def _queued(self, batch: Batch, plain: bool) -> None:
        """Open ``batch`` in the deadline queue, its ids in the table."""
        table = self._table
        if table is None:
            table = self._table = PendingTable()
        table.register(batch, plain)
        self._opened().push(batch)

    def _opened(self) -> OpenBatches:
        """The deadline queue, made when the first batch is queued."""
        if self._open is _NONE_OPEN:
            self._open = OpenBatches()
        return self._open

    def _spill(self) -> None:
        """The single open batch joins the queue and the table: another batch opens beside
        it, or a reply must be looked up id by id."""
        single = self._single
        if single is not None:
            self._single = None
            if single.paired:  # it pairs whole or not at all: answered, no id is pending
                self._opened().push(single)
            else:
                self._queued(single, False)

    def _admit(self, batch: Batch, closed: list[Batch], now: float) -> None:
        """Make room under the channel's caps and the process budget, evicting if needed.

        Ids that still do not fit are never registered: they close as missing with reason
        ``evicted`` (``batch.evicted_from``), and a reply to one is an unknown id.
        """
        keys = batch.keys
        limits = self.limits
        need = min(len(keys), limits.max_pending_ids)
        opened = self._open
        while opened.count and (
            opened.count >= limits.max_open_batches
            or self.pending_ids + need > limits.max_pending_ids
        ):
            if not self._evict_oldest(closed, now):
                break
        budget = self._budget
        granted = budget.take(need)
        while granted < need and opened.count:
            if not self._evict_oldest(closed, now):
                break
            granted += budget.take(need - granted)
        if granted < len(keys):
            batch.evicted_from = granted
            # A new list: the batch may share its keys with the payload it was sent in.
            batch.keys = list(keys[:granted]) + [None] * (len(keys) - granted)

    def _evict_oldest(self, closed: list[Batch], now: float) -> bool:
        oldest = self._open.oldest()
        if oldest is None:
            return False
        self._finish(oldest, "evicted", closed, now)
        return True

    # ---------------------------------------------------------------- receiving
    def received(self, payload: Payload, is_jsonrpc: bool | None = None) -> None:
        """Pair every response in a payload the client read.

        ``is_jsonrpc`` is the caller's structural judgement of the raw reply
        (:func:`pairwatch.pairing.wire.is_jsonrpc`); only a held ``[]`` needs it, and
        without it the classified elements decide.
        """
        closed: list[Batch] = []
        with self._lock:
            now = self._clock()
            self._pair(payload, now, closed, is_jsonrpc)
            self._expire(now, closed)
        if closed:
            self._emit(closed)

    def replied(
        self,
        payload: Payload,
        is_jsonrpc: bool | None = None,
        postpone: float | None = None,
        reason: str = "body_end",
    ) -> None:
        """A reply received whole ends the exchange: the deadlines move ``postpone`` seconds
        from now (the client restarted its read timeout with the last chunk), the reply is
        paired, what is past its deadline closes as ``timeout`` and the rest with ``reason``;
        one lock, one clock reading."""
        closed: list[Batch] = []
        lock = self._lock
        lock.acquire()
        try:
            now = self._clock()
            if postpone is not None:
                self._postpone(now + postpone)
            self._pair(payload, now, closed, is_jsonrpc)
            if self._single is not None or self._open.count or self.held is not None:
                self._close_open(reason, closed, now, now)
        finally:
            lock.release()
        self._emit(closed)

    def postpone(self, timeout: float) -> None:
        """Push every open batch's deadline to ``timeout`` from now (never earlier): an HTTP
        client restarts its read timeout per chunk, and the books must not give up first."""
        with self._lock:
            self._postpone(self._clock() + timeout)

    def _postpone(self, deadline: float) -> None:
        single = self._single
        if single is not None:
            single.postpone(deadline)
        elif self._open.count:
            self._open.postpone(deadline)

    def _pair(
        self, payload: Payload, now: float, closed: list[Batch], is_jsonrpc: bool | None
    ) -> None:
        target = self._last if self._bound else None
        held = self.held
        spec_reply = False
        if held is not None:  # always the exchange's last batch: see _register
            self.held = None
            if is_jsonrpc is None:
                is_jsonrpc = wire.shows_jsonrpc(payload)
            if not is_jsonrpc:
                held.open = False  # not JSON-RPC traffic after all: it counts nothing
                return
            spec_reply = wire.is_spec_empty_reply(payload)
        done: list[Batch] = []
        plain = payload.plain
        touched: Batch | None = None
        if plain is not None and plain.kind is Kind.RESULT:
            single = self._single
            if single is not None:
                if single.is_batch is payload.is_batch and single.answered_by(plain.keys, now):
                    touched = single
            elif self._table is not None:
                touched = self._table.all_in_order(plain.keys, now)
        if touched is not None and touched.is_batch is payload.is_batch:
            # Every request of one batch answered at once, in order and in its own shape:
            # nothing about the reply as a whole can be wrong, and nothing else pairs.
            if held is None:
                if self.auto_close:
                    self._finish(touched, "complete", closed, now)
                return
            done.append(touched)
            tally = None
            holder = late_holder = None
        else:
            tally = judge(payload, target, spec_reply) or Tally()
            if touched is not None:
                done.append(touched)
                holder = late_holder = None
            else:
                touched, holder, late_holder = self._pair_each(payload, now, tally, done)
        if target is None:
            target = touched or holder or late_holder or self._oldest_array_batch(payload)
        if target is not None and target.open:
            if tally is not None and not tally.empty:
                target.absorb(tally)
            if target is held:
                done.append(held)  # its reply came: the held [] is counted now
        elif tally is not None and not tally.empty:
            self.sink_stray(target, tally)
        for batch in done:
            if self.auto_close or batch is held:
                self._finish(batch, "complete", closed, now)

    def _pair_each(
        self, payload: Payload, now: float, tally: Tally, done: list[Batch]
    ) -> tuple[Batch | None, Batch | None, Batch | None]:
        """Pair a reply element by element; return the last batch an element paired with,
        the open batch holding an unknown id under another JSON type, and the batch a late
        reply's request timed out in."""
        self._spill()
        table = self._table
        if table is None:
            table = self._table = PendingTable()
        pending = table.ids
        touched: Batch | None = None
        holder: Batch | None = None
        late_holder: Batch | None = None
        # The batch whose replies this loop is checking for order, and the highest index
        # paired in it so far (written back to the batch when the loop leaves it).
        ordered: Batch | None = None
        high = -1
        RESULT, VALID = Kind.RESULT, IdState.VALID
        for kind, state, key, _method, problem, code in payload.messages:
            if (kind is RESULT or kind is Kind.ERROR) and problem is None and state is VALID:
                entry = pending.pop(key, None)  # type: ignore[arg-type]  # the common case
            else:
                if kind in CALL_KINDS:
                    # Server-initiated: never a response, never unknown.  Remember requests
                    # so the client's answers pair in their own table (bounded).
                    inbound = self._inbound
                    if (
                        kind is Kind.REQUEST
                        and key is not None
                        and (key in inbound or len(inbound) < self.limits.max_pending_ids)
                    ):
                        inbound[key] = inbound.get(key, 0) + 1
                    continue
                if kind is Kind.INVALID:
                    tally.add_invalid(problem or "not_jsonrpc")
                    continue
                if problem is not None:
                    tally.add_invalid(problem)
                if state is IdState.NULL or state is IdState.ABSENT:
                    tally.null += 1
                    continue
                entry = pending.pop(key, None) if key is not None else None
            if entry is None:
                if key is not None and self._withdrawn and self._withdrawn.take(key, now):
                    tally.after_withdrawal += 1  # raced the caller's cancellation
                    continue
                tally.unknown += 1
                if key is None:
                    continue
                if len(tally.unknown_keys) < 16:
                    tally.unknown_keys.append(key)
                found = self._late.take(key, now) if self._late else None
                if found is not None:
                    tally.add_late(key, found[0])
                    late_holder = late_holder or found[1]
                elif holder is None and not self._bound:
                    holder = table.holder_retyped(key)
                continue
            if type(entry) is tuple:
                batch, index = entry
            elif type(entry) is Batch:  # a one-request batch: see PendingTable
                batch, index = entry, 0
            else:
                rest: list[Entry] = entry  # type: ignore[assignment]  # a duplicated id: FIFO
                batch, index = rest.pop(0)
                pending[key] = rest[0] if len(rest) == 1 else rest  # type: ignore[index]
            table.count -= 1
            batch.answer(index, now, kind is not RESULT, code, problem is not None)
            if type(entry) is not Batch:  # a single request is never out of order
                if batch is not ordered:
                    _keep_high(ordered, high)
                    ordered, high = batch, batch.high_index
                if index < high:
                    batch.out_of_order = True
                else:
                    high = index
            touched = batch
            if batch.paired == len(batch.keys) or (batch.rare is not None and batch.awaits_nothing):
                done.append(batch)  # closed after the loop: strays in this payload belong here
        _keep_high(ordered, high)
        return touched, holder, late_holder

    def _oldest_array_batch(self, payload: Payload) -> Batch | None:
        if not payload.is_batch:
            return None
        single = self._single
        if single is not None:
            return single if single.is_batch else None
        return self._open.oldest_array() if self._open.count else None

    def sink_stray(self, batch: Batch | None, tally: Tally) -> None:
        """Hand over responses that no open batch can absorb (late, or on a bare stream)."""
        if batch is not None:
            batch.late_unknown += tally.unknown
        self.sink.stray(batch, tally)

    # ------------------------------------------------------------------ closing
    def close(self, reason: str = "closed", excused: str | None = None) -> None:
        """Close every open batch of the channel (body end, stream end, stream dropped...).

        ``excused``: what is still pending is not missing but counted under ``reason`` with
        this sub-reason (``close("unchecked", "body_cap")``: the reply could not be checked).
        """
        closed: list[Batch] = []
        with self._lock:
            if excused is not None:
                self._excuse((reason, excused))
            self._close_open(reason, closed, self._clock())
        if closed:
            self._emit(closed)

    def _excuse(self, excused: tuple[str, str]) -> None:
        for batch in (self._single, *self._open.values()):
            if batch is not None and batch.paired < len(batch.keys):
                batch.excused_as = excused

    def excuse_open(self, kind: str, reason: str) -> None:
        """Whatever the open batches still await will count under (``kind``, ``reason``)
        when they close, not as missing (pairwatch switched off while they were open)."""
        with self._lock:
            self._excuse((kind, reason))

    def cancel(
        self, key: IdKey, timed_out: bool = False, ended: frozenset[str] = frozenset()
    ) -> None:
        """The caller cancelled the pending request ``key`` on the wire (MCP's
        ``notifications/cancelled``): it is withdrawn, and its batch closes once nothing
        else of it is pending.  ``timed_out``: the client cancelled because its own deadline
        passed, which is a timeout (a hung server must still count): a request that is its
        batch's last one pending closes it as missing with reason ``timeout``.  ``ended``:
        methods whose requests are subscriptions, which a cancellation ends rather than
        abandons (``subscription_ended``)."""
        closed: list[Batch] = []
        with self._lock:
            self._spill()
            table = self._table
            found = table.find(key) if table is not None else None
            if found is None or table is None:
                return  # answered, closed, or never sent: the evidence before stands
            batch, index = found
            now = self._clock()
            if timed_out:
                if len(batch.keys) - batch.paired == 1:
                    self._finish(batch, "timeout", closed, now)
            else:
                table.take(key)
                at = batch.excused_at
                if at is None:
                    at = batch.excused_at = {}
                at[index] = _ENDED if batch.methods[index] in ended else _CANCELLED
                self.withdrawn_ids.remember(batch, [key], now)
                # A stream's batch closes once nothing of it is pending; an exchange's at its
                # body's end, so that what else its reply holds still counts against it.
                if not self._bound and batch.awaits_nothing:
                    self._finish(batch, "withdrawn", closed, now)
        if closed:
            self._emit(closed)

    def close_batch(self, batch: Batch, reason: str, excused: str | None = None) -> None:
        """Close one batch now: its caller stopped waiting (a client library's own timeout,
        an error it synthesized).  What is still pending counts as missing with ``reason``;
        with ``excused``, as :meth:`close` says (``close_batch(batch, "withdrawn",
        "cancelled")``: the caller's call was cancelled).  A batch already closed is left
        as it closed."""
        closed: list[Batch] = []
        with self._lock:
            if batch is self.held:
                self._drop_held()
            elif batch.open and not batch.expected_nothing:
                if excused is not None:
                    batch.excused_as = (reason, excused)
                self._finish(batch, reason, closed, self._clock())
        if closed:
            self._emit(closed)

    def expire(self) -> None:
        """Close batches whose timeout passed; called by the sweeper and on every event."""
        closed: list[Batch] = []
        with self._lock:
            self._expire(self._clock(), closed)
        if closed:
            self._emit(closed)

    def withdraw(self) -> None:
        """Forget every open batch uncounted: a 202 or a redirect says its requests are
        answered on another channel, where they are counted (else twice, once as missing)."""
        with self._lock:
            self._drop_held()
            self._spill()
            for batch in self._open.values():
                batch.open = False
                self._budget.release(batch.tracked)
                if self._table is not None:
                    self._table.release(batch)
            self._open.clear()

    def forget(self) -> None:
        """Mark every open batch closed, uncounted, and keep nothing: for a forked child,
        whose fresh books must not take the parent's batches back (the parent counts them).

        Without the lock: in a child only the forking thread runs, and the lock may have
        been copied held by a thread that no longer exists.
        """
        self._drop_held()
        self._spill()
        self._open.forget()

    def _drop_held(self) -> None:
        if self.held is not None:
            self.held.open = False
            self.held = None

    def _expire(self, now: float, closed: list[Batch]) -> None:
        single = self._single
        if single is not None:
            if single.deadline <= now:
                self._finish(single, "timeout", closed, now)
        elif self._open.count:
            for batch in self._open.due(now):
                self._finish(batch, "timeout", closed, now)

    def _close_open(
        self, reason: str, closed: list[Batch], now: float, due: float | None = None
    ) -> None:
        """Close every open batch with ``reason``; those whose deadline is not after ``due``
        close as ``timeout`` instead."""
        if self.held is not None:
            self._drop_held()
        single = self._single
        if single is not None:
            late = due is not None and single.deadline <= due
            self._finish(single, "timeout" if late else reason, closed, now)
        elif self._open.count:
            if due is not None:
                self._expire(due, closed)
            for batch in self._open.values():
                self._finish(batch, reason, closed, now)
            self._open.clear()

    def _finish(self, batch: Batch, reason: str, closed: list[Batch], now: float) -> None:
        """Close one open batch: its ids leave the books and the budget, and what it shows
        is settled (:func:`settle`)."""
        if not batch.open:
            return
        keys = batch.keys
        # Registered (open, budget, table) unless it expected nothing: a held [] or a batch
        # without ids closes without ever being.  An open batch is always this ledger's: a
        # forked child's fresh books forget the inherited ones (see :meth:`forget`).
        if batch.rare is None or not batch.expected_nothing:
            if batch is self._single:
                self._single = None
            else:
                self._open.closed()
            self._budget.release(batch.tracked)
        missing_keys: Sequence[IdKey] = ()
        if batch.paired < len(keys):
            if self._table is None:
                missing_keys = [key for _, key in batch.unanswered()]
            else:
                missing_keys = self._table.release(batch)
        settle(batch, reason, now, missing_keys)
        if reason == "timeout" and missing_keys:
            self.timed_out.remember(batch, missing_keys, now)
        if batch.rare is not None and batch.excused:
            self._remember_withdrawn(batch, now)
        closed.append(batch)

    def _remember_withdrawn(self, batch: Batch, now: float) -> None:
        """The ids a closing batch leaves withdrawn: a reply for one moments later raced the
        caller's withdrawal (a reply after withdrawal, not an unknown id)."""
        withdrawn: list[IdKey] = []
        for index, (key, received) in enumerate(zip(batch.keys, batch.received, strict=True)):
            if received is None and key is not None:
                why = batch.excused_for(index)
                if why is not None and why[0] == "withdrawn":
                    withdrawn.append(key)
        if withdrawn:
            self.withdrawn_ids.remember(batch, withdrawn, now)

    def _emit(self, closed: list[Batch]) -> None:
        for batch in closed:
            self.sink.batch_closed(batch)

    # ------------------------------------------------------------------- reading
    @property
    def withdrawn_ids(self) -> TimedOut:
        """The memory of ids the caller withdrew (made on first use): a reply for one is a
        reply after withdrawal, which MCP allows (it raced the cancellation)."""
        found = self._withdrawn
        if found is None:
            found = self._withdrawn = TimedOut(self.limits.late_ids, self.limits.late_age)
        return found

    @property
    def timed_out(self) -> TimedOut:
        """The memory of ids closed as missing by timeout (made on first use)."""
        late = self._late
        if late is None:
            late = self._late = TimedOut(self.limits.late_ids, self.limits.late_age)
        return late

    @property
    def open_batches(self) -> int:
        return self._open.count + (self._single is not None)

    @property
    def pending_ids(self) -> int:
        """Requests awaiting a reply, duplicates included."""
        single = self._single
        found = 0 if single is None else len(single.keys) - single.paired
        return found if self._table is None else found + self._table.count

    @property
    def examined(self) -> int:
        """Deadline-queue entries looked at so far (the flat-cost tests read it)."""
        return self._open.examined

    @property
    def inbound_pending(self) -> int:
        """Server-initiated requests received and not yet answered by the client."""
        return sum(self._inbound.values())


def _keep_high(batch: Batch | None, high: int) -> None:
    """Keep the highest index paired for a batch whose later replies must still be checked
    for order (none when every request was answered: nothing more can pair)."""
    if batch is not None and batch.paired < len(batch.keys) and high != batch.high_index:
        batch.high_index = high
