"""The shadow pending table: the books one channel keeps of what was sent and what came back.

A *channel* is whatever responses come back on (one HTTP exchange, one stream, one session).
The ledger mirrors the pending table a correct client would keep, pairs every response by id,
and closes batches when they are complete, when their body or stream ends, at their timeout,
or when a cap evicts them.  Each closed batch is handed to a sink with its exact tallies and
its diagnosis (:mod:`pairwatch.pairing.diagnosis`).

Pure Python on purpose: no I/O, no OpenTelemetry, an injected clock.  Every rule of the
pairing contract can therefore be driven deterministically by tests, and the same books serve
the live path and the offline audit.

Two modes cover every transport:

* ``bound`` (HTTP exchanges): each reply belongs to the batch sent on the same exchange, so
  stray responses, count mismatches and replies to notification-only batches are attributed
  to that batch even after it closed.
* stream (sessions, websockets, stdio): responses pair across every open batch of the channel.
  A response that pairs with nothing is attributed, in this order, to the batch its sibling
  responses in the same array paired with; to the open batch holding its id under another
  JSON type (``"2"`` for ``2``: that batch then closes as ``id_type_mismatch``); to the batch
  that held its id until it timed out (a late reply: closed already, so the reply reaches the
  sink as a stray tally naming that batch, and is logged as ``late_response``); to the oldest
  open batch sent as an array, when the reply is an array; else to no batch.

Late replies: the ids a timeout closes as missing are remembered, bounded in count and age
(:mod:`pairwatch.pairing.late`).  A reply to one is still an unknown-id response (the
contract is unchanged) and is also counted in ``late``/``lateness``: on the batch that absorbs
it while open (recorded when that batch closes) or on the stray tally, never both.  A request
that reuses such an id is client duplicate evidence (``reused_timed_out``).

The empty batch ``[]`` on a bound exchange is held, uncounted, until its reply shows the
other side speaks JSON-RPC: a REST API that takes an empty list is not JSON-RPC traffic and
must count nothing.  The spec-required single null-id error is then a null-id response (the
batch closes as ``malformed_request_element``: ``[]`` is an invalid request); any other
JSON-RPC reply is also a protocol violation.  On a stream, ``[]`` closes at once: the stream
is JSON-RPC by construction and its reply is an ordinary null-id response.

How a batch closes (what is missing, its diagnosis, the sink) is
:mod:`pairwatch.pairing.closing`, the ledger's other half.

Costs do not grow with what is outstanding: expiry and eviction read a deadline queue
(:mod:`pairwatch.pairing.deadlines`), never the whole table of open batches.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from pairwatch.pairing import wire
from pairwatch.pairing.closing import Closing, LedgerSink
from pairwatch.pairing.deadlines import Deadlines
from pairwatch.pairing.intake import read_sent
from pairwatch.pairing.late import TimedOut
from pairwatch.pairing.limits import Budget, Limits, process_budget
from pairwatch.pairing.opened import OpenBatches
from pairwatch.pairing.records import Batch, Tally
from pairwatch.pairing.shape import judge
from pairwatch.pairing.table import Entry, PendingTable
from pairwatch.pairing.wire import CALL_KINDS, IdKey, IdState, Kind, Message, Payload

__all__ = ["Ledger", "LedgerSink", "Limits"]


class Ledger(Closing):
    """One channel's books.  Thread-safe: every public method takes the channel's lock."""

    __slots__ = (
        "_bound", "_budget", "_clock", "_deadlines", "_held", "_inbound", "_last", "_lock",
        "_open", "_table", "auto_close", "limits", "sink", "timed_out",
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
        self.limits = limits = limits or Limits()
        self._clock = clock
        self._bound = bound
        self._budget = budget or process_budget()
        # A bound exchange closes at body end so that late extras still count against it.
        self.auto_close = (not bound) if auto_close is None else auto_close
        self._lock = threading.Lock()
        self._open = OpenBatches()
        self._deadlines = Deadlines()
        self._table = PendingTable()
        self._inbound: dict[IdKey, int] = {}  # server-initiated requests awaiting our answer
        self.timed_out = TimedOut(limits.late_ids, limits.late_age)
        self._last: Batch | None = None
        self._held: Batch | None = None  # a bound [] awaiting proof that this is JSON-RPC

    # ------------------------------------------------------------------ sending
    def sent(
        self,
        payload: Payload,
        context: object = None,
        timeout: float | None = None,
        at: float | None = None,
    ) -> Batch | None:
        """Register a payload the client wrote; return the batch it opened, if any
        (``timeout``: this batch's default, e.g. an HTTP client's own read timeout; ``at``:
        when it was sent, for books replayed from :mod:`pairwatch.pairing.quick`)."""
        closed: list[Batch] = []
        with self._lock:
            now = self._clock() if at is None else at
            self._expire(now, closed)
            batch = self._register(payload, now, context, closed, timeout)
        self._emit(closed)
        return batch

    def postpone(self, timeout: float, at: float | None = None) -> None:
        """Push every open batch's deadline to ``timeout`` from now (never earlier): an HTTP
        client restarts its read timeout per chunk, and the books must not give up first."""
        with self._lock:
            deadline = (self._clock() if at is None else at) + timeout
            for batch in self._open:
                if deadline > batch.deadline:
                    batch.deadline = deadline

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
            self._drop_held()  # a [] whose exchange moved on without a reply: nothing
        if not keys:
            batch.expected_nothing = True
            if self._bound and payload.empty_batch:
                self._held = batch  # counted once its reply shows JSON-RPC, or never
                return batch
            self._finish(batch, "no_response_expected", closed)
            return batch
        reused = self.timed_out.reused(keys, now)
        if reused:
            batch.reused_timed_out = reused
        self._admit(batch, closed)
        self._open.add(batch)
        self._deadlines.push(batch, self._open.count)
        self._table.register(batch, payload.plain is not None)
        return batch

    def _admit(self, batch: Batch, closed: list[Batch]) -> None:
        """Make room under the channel's caps and the process budget, evicting if needed.

        Ids that still do not fit are never registered: they close as missing with reason
        ``evicted`` (``batch.evicted_from``), and a reply to one is an unknown id, as for
        any evicted request.  So no table ever exceeds its cap.
        """
        keys = batch.keys
        limits = self.limits
        need = min(len(keys), limits.max_pending_ids)
        opened = self._open
        while opened.count and (
            opened.count >= limits.max_open_batches
            or self._table.count + need > limits.max_pending_ids
        ):
            if not self._evict_oldest(closed):
                break
        budget = self._budget
        granted = budget.take(need)
        while granted < need and opened.count:
            if not self._evict_oldest(closed):
                break
            granted += budget.take(need - granted)
        if granted < len(keys):
            batch.evicted_from = granted
            # A new list: the batch may share its keys with the payload it was sent in.
            batch.keys = list(keys[:granted]) + [None] * (len(keys) - granted)

    def _evict_oldest(self, closed: list[Batch]) -> bool:
        oldest = self._deadlines.oldest()
        if oldest is None:
            return False
        self._finish(oldest, "evicted", closed)
        return True

    # ---------------------------------------------------------------- receiving
    def received(
        self, payload: Payload, is_jsonrpc: bool | None = None, at: float | None = None
    ) -> None:
        """Pair every response in a payload the client read.

        ``is_jsonrpc`` is the caller's structural judgement of the raw reply
        (:func:`pairwatch.pairing.wire.is_jsonrpc`); only a held ``[]`` needs it, and
        without it the classified elements decide.
        """
        closed: list[Batch] = []
        with self._lock:
            now = self._clock() if at is None else at
            self._pair(payload, now, closed, is_jsonrpc)
            self._expire(now, closed)
        self._emit(closed)

    @property
    def holding(self) -> bool:
        """An empty batch awaits its reply to learn whether this is JSON-RPC at all."""
        return self._held is not None

    def _pair(
        self, payload: Payload, now: float, closed: list[Batch], is_jsonrpc: bool | None
    ) -> None:
        target = self._last if self._bound else None
        held = self._held
        spec_reply = False
        if held is not None:  # always the exchange's last batch: see _register
            self._held = None
            if is_jsonrpc is None:
                is_jsonrpc = wire.shows_jsonrpc(payload)
            if not is_jsonrpc:
                held.open = False  # not JSON-RPC traffic after all: it counts nothing
                return
            spec_reply = wire.is_spec_empty_reply(payload)
        judged = judge(payload, target, spec_reply)
        if judged is None:
            return
        tally = judged
        table = self._table
        pending = table.ids
        touched: Batch | None = None
        holder: Batch | None = None  # an open batch holding an unknown id under another type
        late_holder: Batch | None = None  # the batch a late reply's request timed out in
        # The batch whose replies this loop is checking for order, and the highest index
        # paired in it so far: Batch.high_index is a rare field (a call to read or write),
        # so it is read when the loop reaches that batch and written back when it leaves it.
        ordered: Batch | None = None
        high = -1
        done: list[Batch] = []
        RESULT, VALID = Kind.RESULT, IdState.VALID
        plain = payload.plain
        messages: tuple[Message, ...] | None = None
        if plain is not None and plain.kind is RESULT:
            touched = self._table.all_in_order(plain.keys, now)
            if touched is not None:
                done.append(touched)
                messages = ()
        for kind, state, key, _method, problem, code in (
            payload.messages if messages is None else messages
        ):
            if (kind is RESULT or kind is Kind.ERROR) and problem is None and state is VALID:
                entry = pending.pop(key, None)  # type: ignore[arg-type]  # the common case
            else:
                if kind in CALL_KINDS:
                    # Server-initiated: never a response, never unknown.  Remember requests
                    # so the client's answers pair in their own table.
                    # Bounded: a flood of server requests nobody answers must not grow it.
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
                tally.unknown += 1
                if key is None:
                    continue
                if len(tally.unknown_keys) < 16:
                    tally.unknown_keys.append(key)
                found = self.timed_out.take(key, now)
                if found is not None:
                    tally.add_late(key, found[0])
                    late_holder = late_holder or found[1]
                elif holder is None and not self._bound:
                    holder = self._table.holder_retyped(key)
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
            received = batch.received
            if type(received) is not list:  # the shared (None,) of a single request
                received = batch.received = list(received)
            received[index] = now
            if kind is not RESULT:
                if code is not None:
                    if batch.error_codes is None:
                        batch.error_codes = {}
                    batch.error_codes[index] = code
                if problem is not None:
                    if batch.invalid_at is None:
                        batch.invalid_at = set()
                    batch.invalid_at.add(index)
            batch.paired += 1
            if type(entry) is not Batch:  # a single request is never out of order
                if batch is not ordered:
                    _keep_high(ordered, high)
                    ordered, high = batch, batch.high_index
                if index < high:
                    batch.out_of_order = True
                else:
                    high = index
            touched = batch
            if batch.paired == len(batch.keys):
                done.append(batch)  # closed after the loop: strays in this payload belong here
        _keep_high(ordered, high)
        if target is None:
            target = touched or holder or late_holder or self._oldest_array_batch(payload)
        if target is not None and target.open:
            target.absorb(tally)
            if target is held:
                done.append(held)  # its reply came: the held [] is counted now
        elif not tally.empty:
            self.sink_stray(target, tally)
        for batch in done:
            if self.auto_close or batch is held:
                self._finish(batch, "complete", closed)

    def _oldest_array_batch(self, payload: Payload) -> Batch | None:
        if not payload.is_batch:
            return None
        for batch in self._open:
            if batch.is_batch:
                return batch
        return None

    def sink_stray(self, batch: Batch | None, tally: Tally) -> None:
        """Hand over responses that no open batch can absorb (late, or on a bare stream)."""
        if batch is not None:
            batch.late_unknown += tally.unknown
        self.sink.stray(batch, tally)

    @property
    def open_batches(self) -> int:
        return self._open.count

    @property
    def pending_ids(self) -> int:
        return self._table.count

    @property
    def examined(self) -> int:
        """Deadline-queue entries looked at so far (the flat-cost tests read it)."""
        return self._deadlines.examined

    @property
    def inbound_pending(self) -> int:
        """Server-initiated requests received and not yet answered by the client."""
        return sum(self._inbound.values())


def _keep_high(batch: Batch | None, high: int) -> None:
    """Keep the highest index paired for a batch whose later replies must still be checked
    for order (none when every request was answered: nothing more can pair)."""
    if batch is not None and batch.paired < len(batch.keys) and high != batch.high_index:
        batch.high_index = high
