"""The pure ledger, driven by hand: no OpenTelemetry, a hand-moved clock, a recording sink."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from jsonrpc_build import dumps
from otel_support import FakeClock

from pairwatch.pairing import wire
from pairwatch.pairing.ledger import Ledger
from pairwatch.pairing.limits import Budget, Limits
from pairwatch.pairing.records import Batch, Tally


@dataclass
class Recorder:
    """Everything the ledger hands its sink, in order."""

    closed: list[Batch] = field(default_factory=list)
    strays: list[tuple[Batch | None, Tally]] = field(default_factory=list)

    def batch_closed(self, batch: Batch) -> None:
        self.closed.append(batch)

    def stray(self, batch: Batch | None, tally: Tally) -> None:
        self.strays.append((batch, tally))

    def only(self) -> Batch:
        assert len(self.closed) == 1, [b.diagnosis for b in self.closed]
        return self.closed[0]


@dataclass
class Books:
    """One channel's ledger with its sink and clock; ``sent``/``received`` take JSON values."""

    ledger: Ledger
    sink: Recorder
    clock: FakeClock

    def sent(self, value: Any) -> Batch | None:
        return self.ledger.sent(wire.parse(dumps(value), wire.Kind.REQUEST))

    def received(self, value: Any) -> None:
        raw = value if isinstance(value, bytes) else dumps(value)
        self.ledger.received(wire.parse(raw, wire.Kind.RESULT), wire.is_jsonrpc(raw))

    def close(self, reason: str = "body_end") -> None:
        self.ledger.close(reason)


def books(
    *,
    bound: bool = False,
    timeout: float = 5.0,
    budget: Budget | None = None,
    **limits: Any,
) -> Books:
    sink, clock = Recorder(), FakeClock()
    ledger = Ledger(
        sink,
        clock=clock,
        limits=Limits(timeout=timeout, **limits),
        bound=bound,
        budget=budget or Budget(),
    )
    return Books(ledger, sink, clock)


def counts(batch: Batch) -> dict[str, int]:
    """A closed batch's numbers, all at once, so a test states every one of them."""
    return {
        "requests": batch.requests,
        "paired": batch.paired,
        "missing": batch.missing,
        "unknown": batch.unknown,
        "null": batch.null,
        "late": batch.late,
        "duplicates": batch.duplicates_in + batch.duplicates_cross,
        "reused_timed_out": batch.reused_timed_out,
        "type_mismatch": batch.type_mismatch,
    }


def numbers(**nonzero: int) -> dict[str, int]:
    """The expected :func:`counts`: every field not named is zero."""
    base = dict.fromkeys(
        (
            "requests", "paired", "missing", "unknown", "null", "late", "duplicates",
            "reused_timed_out", "type_mismatch",
        ),
        0,
    )  # fmt: skip
    base.update(nonzero)
    return base
