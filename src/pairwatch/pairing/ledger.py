"""The shadow pending table: the books one channel keeps of what was sent and what came back.

A *channel* is whatever responses come back on (one HTTP exchange, one stream, one session).
The ledger mirrors the pending table a correct client would keep, pairs every response by id,
and closes batches when they are complete, when their body or stream ends, at their timeout,
or when a cap evicts them.  Each closed batch is handed to a sink with its exact tallies.

Pure Python on purpose: no I/O, no OpenTelemetry, an injected clock.  Every rule of the
pairing contract can therefore be driven deterministically by tests, and the same books serve
the live path and the offline audit.

Two modes cover every transport:

* ``bound`` (HTTP exchanges): each reply belongs to the batch sent on the same exchange, so
  stray responses, count mismatches and replies to notification-only batches are attributed
  to that batch even after it closed.
* stream (sessions, websockets, stdio): responses pair across every open batch of the channel;
  an unknown id is attributed to the batch its sibling responses in the same array paired with.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from itertools import repeat
from typing import Protocol

from pairwatch.pairing import diagnosis
from pairwatch.pairing.records import Batch, Tally
from pairwatch.pairing.wire import (
    CALL_KINDS,
    RESPONSE_KINDS,
    IdKey,
    IdState,
    Kind,
    Message,
    Payload,
)

__all__ = ["Ledger", "LedgerSink", "Limits"]

Entry = tuple[Batch, int]


class LedgerSink(Protocol):
    """Where closed batches and unattributed responses go (telemetry, audit, tests)."""

    def batch_closed(self, batch: Batch) -> None: ...

    def stray(self, batch: Batch | None, tally: Tally) -> None: ...


class Limits:
    """Caps that keep memory bounded; what they evict is counted as missing, never leaked."""

    __slots__ = ("max_open_batches", "max_pending_ids", "timeout")

    def __init__(
        self, timeout: float = 30.0, max_open_batches: int = 1024, max_pending_ids: int = 65536
    ) -> None:
        self.timeout = timeout
        self.max_open_batches = max_open_batches
        self.max_pending_ids = max_pending_ids


class Ledger:
    """One channel's books.  Thread-safe: every public method takes the channel's lock."""

    __slots__ = (
        "_bound",
        "_clock",
        "_inbound",
        "_last",
        "_lock",
        "_open",
        "_pending",
        "_pending_count",
        "_seq",
        "auto_close",
        "limits",
        "sink",
    )

    def __init__(
        self,
        sink: LedgerSink,
        *,
        clock: Callable[[], float],
        limits: Limits | None = None,
        bound: bool = False,
        auto_close: bool | None = None,
    ) -> None:
        self.sink = sink
        self.limits = limits or Limits()
        self._clock = clock
        self._bound = bound
        # A bound exchange closes at body end so that late extras still count against it.
        self.auto_close = (not bound) if auto_close is None else auto_close
        self._lock = threading.Lock()
        self._open: dict[int, Batch] = {}
        # id -> (batch, index), or a list of them when the id is pending more than once.
        self._pending: dict[IdKey, Entry | list[Entry]] = {}
        self._pending_count = 0
        self._inbound: dict[IdKey, int] = {}  # server-initiated requests awaiting our answer
        self._seq = 0
        self._last: Batch | None = None

    # ------------------------------------------------------------------ sending
    def sent(self, payload: Payload, context: object = None) -> Batch | None:
        """Register a payload the client wrote; return the batch it opened, if any."""
        closed: list[Batch] = []
        with self._lock:
            now = self._clock()
            self._expire(now, closed)
            batch = self._register(payload, now, context, closed)
        self._emit(closed)
        return batch

    def _register(
        self, payload: Payload, now: float, context: object, closed: list[Batch]
    ) -> Batch | None:
        keys: list[IdKey | None] = []
        methods: list[str | None] = []
        notifications = 0
        invalid: dict[str, int] | None = None
        REQUEST, VALID = Kind.REQUEST, IdState.VALID
        plain = payload.plain
        if plain is not None and plain.kind is REQUEST and plain.methods is not None:
            keys = list(plain.keys)  # every element a well-formed request: no loop needed
            methods = list(plain.methods)
        for kind, state, key, method, problem, _code in () if keys else payload.messages:
            if kind is REQUEST and problem is None and state is VALID and type(key) is not float:
                keys.append(key)  # the common case, kept as short as possible
                methods.append(method)
                continue
            reason = problem
            if kind is Kind.RESPONSE_INVALID and problem == "no_result_or_error":
                # An id but no method: a request that lost its method.  The caller still
                # awaits that id, so it is registered (and will likely close as missing).
                reason = "no_method"
                keys.append(key if state is VALID else None)
                methods.append(None)
            elif kind in RESPONSE_KINDS:
                # The client answering a server-initiated request: pair in the inbound table.
                left = self._inbound.get(key, 0) if key is not None else 0
                if left > 1:
                    self._inbound[key] = left - 1  # type: ignore[index]
                elif left:
                    del self._inbound[key]  # type: ignore[arg-type]
                continue
            elif kind is REQUEST:
                keys.append(key if state is VALID else None)
                methods.append(method)
                if state is IdState.NULL:
                    reason = reason or "null_id"
                elif type(key) is float:
                    reason = reason or "fractional_id"
            elif kind is Kind.NOTIFICATION:
                notifications += 1
            elif kind is Kind.INVALID:
                reason = reason or "not_jsonrpc"
            if reason is not None:
                invalid = invalid or {}
                invalid[reason] = invalid.get(reason, 0) + 1
        if not payload.is_batch and not keys and not notifications and invalid is None:
            return None  # only answers to the server: nothing of ours to track
        self._seq += 1
        batch = Batch(self._seq, payload.is_batch, payload.size, keys, methods, now, context)
        batch.notifications = notifications
        batch.invalid_requests = invalid
        batch.deadline = now + self.limits.timeout
        if self._bound:  # only an exchange attributes replies to its last batch; a stream
            self._last = batch  # must not keep a closed batch (and its lists) alive
        if not keys:
            batch.expected_nothing = True
            self._finish(batch, "no_response_expected", closed)
            return batch
        cap = self.limits.max_pending_ids
        if len(keys) > cap:
            # One batch alone is over the cap: the ids past it are evicted at once (never
            # registered; missing at close with reason "evicted"; a reply to one is an
            # unknown id, as for any evicted request), so the table never exceeds the cap.
            batch.evicted_from = cap
            keys[cap:] = [None] * (len(keys) - cap)
        self._make_room(min(len(keys), cap), closed)
        pending = self._pending
        if (
            plain is not None
            and batch.evicted_from < 0
            and pending.keys().isdisjoint(keys)
            and len(set(keys)) == len(keys)
        ):
            # No id already pending and none repeated: register them all in C.
            entries = zip(repeat(batch), range(len(keys)))
            pending.update(zip(keys, entries, strict=False))  # type: ignore[arg-type]
            self._pending_count += len(keys)
            self._open[batch.seq] = batch
            return batch
        registered = 0
        for index, key in enumerate(keys):
            if key is None:
                continue  # null or unusable id: can never pair, closes as missing
            registered += 1
            prior = pending.get(key)
            if prior is None:
                pending[key] = (batch, index)
                continue
            if batch.duplicate_at is None:
                batch.duplicate_at = set()
            batch.duplicate_at.add(index)
            first_batch = prior[0] if isinstance(prior, tuple) else prior[0][0]
            first_batch.shared = True  # its ids can no longer be released wholesale
            if first_batch is batch:
                batch.duplicates_in += 1
            else:
                batch.duplicates_cross += 1
            if isinstance(prior, tuple):
                pending[key] = [prior, (batch, index)]
            else:
                prior.append((batch, index))
        self._pending_count += registered
        self._open[batch.seq] = batch
        return batch

    def _make_room(self, incoming: int, closed: list[Batch]) -> None:
        limits = self.limits
        while self._open and (
            len(self._open) >= limits.max_open_batches
            or self._pending_count + incoming > limits.max_pending_ids
        ):
            oldest = next(iter(self._open.values()))
            self._finish(oldest, "evicted", closed)

    # ---------------------------------------------------------------- receiving
    def received(self, payload: Payload) -> None:
        """Pair every response in a payload the client read."""
        closed: list[Batch] = []
        with self._lock:
            now = self._clock()
            self._pair(payload, now, closed)
            self._expire(now, closed)
        self._emit(closed)

    def _pair(self, payload: Payload, now: float, closed: list[Batch]) -> None:
        target = self._last if self._bound else None
        tally = Tally()
        if payload.unparseable is not None:
            if payload.unparseable != "empty":
                tally.add_invalid("unparseable")
            elif target is None or not target.expected_nothing:
                return
        elif payload.empty_batch and (target is None or not target.expected_nothing):
            tally.add_violation("empty_array_reply")
        if target is not None and payload.unparseable is None:
            if target.is_batch and not payload.is_batch and not target.expected_nothing:
                tally.add_violation("single_reply_to_batch")
            elif payload.is_batch and not target.is_batch:
                tally.add_violation("batch_reply_to_single")
        if target is not None and target.expected_nothing and (payload.size or payload.empty_batch):
            tally.add_violation(
                "reply_to_empty_batch" if target.size == 0 else "reply_to_notifications"
            )
        pending = self._pending
        touched: Batch | None = None
        done: list[Batch] = []
        RESULT, VALID = Kind.RESULT, IdState.VALID
        plain = payload.plain
        messages: tuple[Message, ...] | None = None
        if plain is not None and plain.kind is RESULT:
            touched = self._all_in_order(plain.keys, now)
            if touched is not None:
                done.append(touched)
                messages = ()
        for kind, state, key, _method, problem, code in (
            payload.messages if messages is None else messages
        ):
            if (kind is RESULT or kind is Kind.ERROR) and problem is None and state is VALID:
                entry = pending.pop(key, None)  # type: ignore[arg-type]  # the common case
                if entry is None:
                    tally.unknown += 1
                    if len(tally.unknown_keys) < 16:
                        tally.unknown_keys.append(key)  # type: ignore[arg-type]
                    continue
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
                    if key is not None and len(tally.unknown_keys) < 16:
                        tally.unknown_keys.append(key)
                    continue
            if not isinstance(entry, tuple):
                rest = entry  # duplicated id: first in, first out
                entry = rest.pop(0)
                pending[key] = rest[0] if len(rest) == 1 else rest  # type: ignore[index]
            self._pending_count -= 1
            batch, index = entry
            batch.received[index] = now
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
            if index < batch.high_index:
                batch.out_of_order = True
            else:
                batch.high_index = index
            touched = batch
            if batch.paired == len(batch.keys):
                done.append(batch)  # closed after the loop: strays in this payload belong here
        if target is None:
            target = touched or self._oldest_array_batch(payload)
        if target is not None and target.open:
            target.absorb(tally)
        elif not tally.empty:
            self.sink_stray(target, tally)
        if self.auto_close:
            for batch in done:
                self._finish(batch, "complete", closed)

    def _all_in_order(self, keys: list[IdKey], now: float) -> Batch | None:
        """Pair a healthy reply in one step: every result, in request order, of one batch.

        Checked with C-level comparisons; anything else (a reorder, a missing or extra
        reply, an id shared with another batch) returns None and takes the loop.
        """
        pending = self._pending
        first = pending.get(keys[0])
        if not isinstance(first, tuple):
            return None
        batch = first[0]
        if batch.paired or batch.shared or batch.duplicate_at is not None or batch.keys != keys:
            return None
        n = len(keys)
        if len(pending) == n:
            pending.clear()
        else:
            for key in keys:
                del pending[key]
        self._pending_count -= n
        batch.received = [now] * n
        batch.paired = n
        batch.high_index = n - 1
        return batch

    def _oldest_array_batch(self, payload: Payload) -> Batch | None:
        if not payload.is_batch:
            return None
        for batch in self._open.values():
            if batch.is_batch:
                return batch
        return None

    def sink_stray(self, batch: Batch | None, tally: Tally) -> None:
        """Hand over responses that no open batch can absorb (late, or on a bare stream)."""
        if batch is not None:
            batch.late_unknown += tally.unknown
        self.sink.stray(batch, tally)

    # ------------------------------------------------------------------ closing
    def close(self, reason: str = "closed") -> None:
        """Close every open batch of the channel (body end, stream end, stream dropped...)."""
        closed: list[Batch] = []
        with self._lock:
            for batch in list(self._open.values()):
                self._finish(batch, reason, closed)
        self._emit(closed)

    def close_batch(self, batch: Batch, reason: str) -> None:
        """Close one batch now: its caller stopped waiting (a client library's own timeout,
        an error it synthesized).  What is still pending counts as missing with ``reason``."""
        closed: list[Batch] = []
        with self._lock:
            if self._open.get(batch.seq) is batch:
                self._finish(batch, reason, closed)
        self._emit(closed)

    def expire(self) -> None:
        """Close batches whose timeout passed; called by the sweeper and on every event."""
        closed: list[Batch] = []
        with self._lock:
            self._expire(self._clock(), closed)
        self._emit(closed)

    @property
    def open_batches(self) -> int:
        return len(self._open)

    @property
    def pending_ids(self) -> int:
        return self._pending_count

    @property
    def inbound_pending(self) -> int:
        """Server-initiated requests received and not yet answered by the client."""
        return sum(self._inbound.values())

    def _expire(self, now: float, closed: list[Batch]) -> None:
        if not self._open:
            return
        for batch in list(self._open.values()):
            if batch.deadline > now:
                break  # batches open in send order and share one timeout
            self._finish(batch, "timeout", closed)

    def _finish(self, batch: Batch, reason: str, closed: list[Batch]) -> None:
        if not batch.open:
            return
        batch.open = False
        batch.close_reason = reason
        batch.closed_at = self._clock()
        self._open.pop(batch.seq, None)
        pending = self._pending
        missing_keys: list[IdKey] = []
        received = batch.received
        # A complete batch (the common case) has nothing to release: skip the pass.
        for index, key in enumerate(batch.keys if batch.paired < len(batch.keys) else ()):
            if received[index] is not None:
                continue
            batch.missing += 1
            if key is None:
                continue
            missing_keys.append(key)
            entry = pending.get(key)
            if isinstance(entry, tuple):
                if entry[0] is batch:
                    del pending[key]
                    self._pending_count -= 1
            elif entry is not None:
                kept = [e for e in entry if e[0] is not batch or e[1] != index]
                if len(kept) != len(entry):
                    self._pending_count -= 1
                    if not kept:
                        del pending[key]
                    else:
                        pending[key] = kept[0] if len(kept) == 1 else kept
        mismatch = False
        if not batch.expected_nothing:
            mismatch = batch.paired + batch.unknown != len(batch.keys)
        batch.count_mismatch = mismatch
        type_mismatch = bool(batch.unknown_keys and missing_keys) and _type_changed(
            batch.unknown_keys, missing_keys
        )
        batch.diagnosis = diagnosis.diagnose(
            unknown=batch.unknown,
            missing=batch.missing,
            null=batch.null,
            duplicates=batch.duplicates_in + batch.duplicates_cross,
            type_mismatch=type_mismatch,
        )
        closed.append(batch)

    def _emit(self, closed: list[Batch]) -> None:
        for batch in closed:
            self.sink.batch_closed(batch)


def _type_changed(unknown: list[IdKey], missing: list[IdKey]) -> bool:
    """True when an unknown id is a missing id written as another JSON type ("0" for 0)."""
    wanted = {str(k) for k in missing}
    return any(str(k) in wanted for k in unknown)
