"""The pending table of one channel: id -> the request awaiting it, with exact counts.

Split from the ledger so that the one structure every rule reads has one home: how ids are
registered (duplicates counted, never overwritten), how a healthy reply is paired in one
step, and how a closing batch's unanswered ids leave the table.  The ledger's pairing loop
reads :attr:`PendingTable.ids` directly: it is the per-response hot path, and a method call
per id would cost more than the lookup.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import repeat

from pairwatch.pairing.intake import retyped
from pairwatch.pairing.records import Batch, all_distinct
from pairwatch.pairing.wire import IdKey

__all__ = ["Entry", "PendingTable"]

Entry = tuple[Batch, int]
# What ``ids`` maps an id to: the batch itself for a one-request batch (index 0: most of what
# a stream holds pending is single requests, and a (batch, 0) tuple would cost a tuple
# each), (batch, index) for a request of a larger batch, or a list of such tuples when the
# id is pending more than once (first in, first out).
Slot = Batch | Entry | list[Entry]


def entry_of(slot: Batch | Entry) -> Entry:
    """A slot that is not a list, as (batch, index)."""
    return (slot, 0) if type(slot) is Batch else slot  # type: ignore[return-value]


class PendingTable:
    """``ids``: id -> :data:`Slot`; ``count``: pending requests, duplicates included."""

    __slots__ = ("count", "ids")

    def __init__(self) -> None:
        self.ids: dict[IdKey, Slot] = {}
        self.count = 0

    def register(self, batch: Batch, plain: bool) -> None:
        """Add a batch's ids; an id already pending is a duplicate, kept, never overwritten."""
        keys = batch.keys
        ids = self.ids
        tracked = batch.tracked == len(keys)
        if len(keys) == 1 and plain and tracked:
            key = keys[0]
            if key not in ids:
                ids[key] = batch  # type: ignore[index]
                self.count += 1
                return
        elif plain and tracked and ids.keys().isdisjoint(keys) and all_distinct(keys):
            # No id already pending and none repeated: register them all in C.
            entries = zip(repeat(batch), range(len(keys)))
            ids.update(zip(keys, entries, strict=False))  # type: ignore[arg-type]
            self.count += len(keys)
            return
        registered = 0
        for index, key in enumerate(keys):
            if key is None:
                continue  # null, unusable or evicted id: can never pair, closes as missing
            registered += 1
            prior = ids.get(key)
            if prior is None:
                ids[key] = (batch, index) if index or len(keys) > 1 else batch
                continue
            if batch.duplicate_at is None:
                batch.duplicate_at = set()
            batch.duplicate_at.add(index)
            first_batch = prior[0][0] if isinstance(prior, list) else entry_of(prior)[0]
            first_batch.shared = True  # its ids can no longer be released wholesale
            if first_batch is batch:
                batch.duplicates_in += 1
            else:
                batch.duplicates_cross += 1
            if isinstance(prior, list):
                prior.append((batch, index))
            else:
                ids[key] = [entry_of(prior), (batch, index)]
        self.count += registered

    def all_in_order(self, keys: Sequence[IdKey], now: float) -> Batch | None:
        """Pair a healthy reply in one step: every result, in request order, of one batch
        (:meth:`Batch.answered_by`); None for anything else, which takes the loop."""
        ids = self.ids
        first = ids.get(keys[0])
        if type(first) is tuple:
            batch = first[0]
        elif type(first) is Batch:
            batch = first
        else:
            return None
        if not batch.answered_by(keys, now):
            return None
        n = len(keys)
        if len(ids) == n:
            ids.clear()
        else:
            for key in keys:
                del ids[key]
        self.count -= n
        return batch

    def holder_retyped(self, key: IdKey) -> Batch | None:
        """The batch whose pending id ``key`` is, written as another JSON type."""
        ids = self.ids
        for alt in retyped(key):
            slot = ids.get(alt)
            if slot is not None:
                return slot[0][0] if isinstance(slot, list) else entry_of(slot)[0]
        return None

    def find(self, key: IdKey) -> Entry | None:
        """The oldest pending request under ``key``, as (batch, index), left in place."""
        slot = self.ids.get(key)
        if slot is None:
            return None
        return slot[0] if isinstance(slot, list) else entry_of(slot)

    def take(self, key: IdKey) -> Entry | None:
        """Remove the oldest pending request under ``key``; return it as (batch, index)."""
        slot = self.ids.pop(key, None)
        if slot is None:
            return None
        if isinstance(slot, list):
            entry = slot.pop(0)
            self.ids[key] = slot[0] if len(slot) == 1 else slot
        else:
            entry = entry_of(slot)
        self.count -= 1
        return entry

    def release(self, batch: Batch) -> list[IdKey]:
        """A closing batch's unanswered requests leave the table, counted as missing
        (:meth:`Batch.unanswered`); return their ids."""
        ids = self.ids
        missing_keys: list[IdKey] = []
        for index, key in batch.unanswered():
            missing_keys.append(key)
            entry = ids.get(key)
            if entry is None:
                continue
            if not isinstance(entry, list):
                if entry_of(entry)[0] is batch:
                    del ids[key]
                    self.count -= 1
            else:
                kept = [e for e in entry if e[0] is not batch or e[1] != index]
                if len(kept) != len(entry):
                    self.count -= 1
                    if not kept:
                        del ids[key]
                    else:
                        ids[key] = kept[0] if len(kept) == 1 else kept
        return missing_keys
