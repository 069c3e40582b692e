"""Fault specs, fault plans and the reply shapes faults work on.

Faults act on the *reply* a correct server would have written, never on the
request, so a test always knows what the right answer was and what was changed
(`inject.apply_faults` does the bending).
Everything random goes through a `random.Random` owned by the plan, so a seed
reproduces the same sequence of faults run after run.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

FaultKind = Literal[
    "drop",
    "duplicate",
    "null_id",
    "wrong_id",
    "id_type",
    "both_result_error",
    "bad_version",
    "reorder",
    "single_for_batch",
    "reply_to_notifications",
    "delay",
    "cut",
    "unparseable",
]

#: What each fault kind does to the reply a correct server would have written (`--help`).
FAULT_HELP: dict[str, str] = {
    "drop": "leave out `count` replies (or `indices`, or a `fraction`)",
    "duplicate": "send a reply twice",
    "null_id": 'answer with "id": null',
    "wrong_id": "answer under an id nobody sent",
    "id_type": 'echo the id with another JSON type ("7" for 7)',
    "both_result_error": "put both result and error in a reply",
    "bad_version": 'answer with "jsonrpc": "1.0" (`version=`)',
    "reorder": "answer a batch out of order (`mode=reverse|shuffle|rotate`)",
    "single_for_batch": "answer a batch with one object (`mode=error|first`)",
    "reply_to_notifications": "answer notifications too (`mode=empty|error`)",
    "delay": "hold the reply `seconds` (default 0.05)",
    "cut": "cut the body (or the event stream) short",
    "unparseable": "send bytes that are not JSON",
}

#: Every fault kind, in the order a `FaultMix` applies them within one reply:
#: element edits first, then the shape of the reply, then how it is written.
KINDS: tuple[str, ...] = get_args(FaultKind)

DEFAULT_GARBAGE = b"\xff\xfe<html>502 chaos</html>\x00{[,"


@dataclass(frozen=True)
class Fault:
    """One fault to inject into one reply.

    Which elements a per-element fault touches: ``indices`` if given (positions
    in the reply, negative allowed), else ``fraction`` of the eligible elements
    (at least one), else ``count`` of them; chosen with the plan's seeded RNG.
    ``mode`` picks a variant: reorder ``reverse``/``shuffle``/``rotate``,
    single_for_batch ``error``/``first``, reply_to_notifications ``empty``/``error``.
    """

    kind: FaultKind
    count: int = 1
    fraction: float | None = None
    indices: tuple[int, ...] | None = None
    mode: str | None = None
    seconds: float = 0.05
    delays: tuple[float, ...] | None = None
    version: str | None = "1.0"
    data: bytes = field(default=DEFAULT_GARBAGE, repr=False)

    def __post_init__(self) -> None:
        # Lists are accepted for convenience; tuples keep the frozen spec hashable.
        for name in ("indices", "delays"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, tuple):
                object.__setattr__(self, name, tuple(value))
        if self.kind not in KINDS:
            raise ValueError(f"unknown fault kind {self.kind!r}; expected one of {KINDS}")
        if self.count < 0:
            raise ValueError("count must be >= 0")
        if self.fraction is not None and not 0.0 <= self.fraction <= 1.0:
            raise ValueError("fraction must be within [0, 1]")
        if self.seconds < 0 or any(d < 0 for d in self.delays or ()):
            raise ValueError("delays must be >= 0")
        modes = _MODES.get(self.kind)
        if self.mode is not None and (modes is None or self.mode not in modes):
            raise ValueError(f"mode {self.mode!r} is not valid for {self.kind}")


_MODES: dict[str, tuple[str, ...]] = {
    "reorder": ("reverse", "shuffle", "rotate"),
    "single_for_batch": ("error", "first"),
    "reply_to_notifications": ("empty", "error"),
}


@dataclass(frozen=True)
class Injected:
    """What was actually done to one reply; ``ids`` are the original ids touched."""

    exchange: int
    kind: str
    ids: tuple[Any, ...] = ()
    detail: str = ""


@dataclass
class Element:
    """One response object on its way out, with its delay from reply-ready time."""

    value: Any
    delay: float = 0.0


@dataclass
class Reply:
    """The correct reply, before faults: what a spec-following server would send.

    ``batch`` means the reply is a JSON array. An empty ``responses`` list means
    no reply at all (notifications only). ``raw`` carries an upstream body that
    could not be parsed, so a proxy can still pass it on.
    """

    responses: list[Any]
    batch: bool
    raw: bytes | None = None


@dataclass
class Outgoing:
    """The reply after faults, in a transport-neutral form."""

    elements: list[Element]
    as_array: bool
    expected_silence: bool = False
    raw: bytes | None = None
    cut_fraction: float | None = None
    cut_events: int | None = None

    @property
    def silent(self) -> bool:
        return self.raw is None and not self.as_array and not self.elements

    @property
    def cut(self) -> bool:
        return self.cut_fraction is not None

    @property
    def max_delay(self) -> float:
        return max((e.delay for e in self.elements), default=0.0)

    def value(self) -> Any:
        """The JSON value of the whole reply (array or single object)."""
        if self.as_array:
            return [e.value for e in self.elements]
        return self.elements[0].value if self.elements else None


class FaultPlan:
    """Decides which faults hit each successive exchange.

    Subclasses implement `next_step`; the RNG is shared so that choosing faults
    and choosing their targets are both reproduced by the seed.
    """

    def __init__(self, seed: int | None = 0) -> None:
        self.seed = seed
        self.rng = random.Random(seed)

    def next_step(self) -> list[Fault]:
        raise NotImplementedError


Step = Fault | Sequence[Fault] | None
_END: Any = object()


class FaultScript(FaultPlan):
    """Faults for successive exchanges, in order: one step per exchange.

    A step is a `Fault`, a sequence of faults applied in the given order, or
    ``None`` for a clean reply. When the steps run out replies are clean, unless
    ``cycle`` is set.
    """

    def __init__(self, steps: Iterable[Step], *, seed: int | None = 0, cycle: bool = False) -> None:
        super().__init__(seed)
        self._cycle: list[Step] | None = list(steps) if cycle else None
        self._it: Iterator[Step] = iter(self._cycle if self._cycle is not None else steps)

    def next_step(self) -> list[Fault]:
        step = next(self._it, _END)
        if step is _END and self._cycle:
            self._it = iter(self._cycle)
            step = next(self._it, _END)
        if step is None or step is _END:
            return []
        if isinstance(step, Fault):
            return [step]
        return list(step)


class FaultMix(FaultPlan):
    """Each fault kind hits each exchange independently with its probability.

    ``FaultMix(reorder=0.2, drop=0.1, seed=1)``; ``templates`` give the
    parameters a kind is injected with (default: ``Fault(kind)``).
    """

    def __init__(
        self,
        probabilities: Mapping[str, float] | None = None,
        *,
        seed: int | None = 0,
        templates: Mapping[str, Fault] | None = None,
        **kinds: float,
    ) -> None:
        super().__init__(seed)
        probs = {**(probabilities or {}), **kinds}
        for kind, p in probs.items():
            if kind not in KINDS:
                raise ValueError(f"unknown fault kind {kind!r}")
            if not 0.0 <= p <= 1.0:
                raise ValueError(f"probability for {kind} must be within [0, 1]")
        self.probabilities = {k: probs[k] for k in KINDS if k in probs}
        self.templates = dict(templates or {})

    def next_step(self) -> list[Fault]:
        # One draw per configured kind, always, so the stream of draws does not
        # depend on which faults fired before.
        chosen = [k for k, p in self.probabilities.items() if self.rng.random() < p]
        return [self.templates.get(k) or Fault(k) for k in chosen]  # type: ignore[arg-type]


def as_plan(faults: FaultPlan | Fault | Sequence[Step] | None) -> FaultPlan | None:
    """A single `Fault` applies to every exchange; a sequence is a one-shot script."""
    if faults is None or isinstance(faults, FaultPlan):
        return faults
    if isinstance(faults, Fault):
        return FaultScript([faults], cycle=True)
    return FaultScript(faults)


def parse_fault(text: str) -> Fault:
    """Parse ``kind[:key=value,...]``, the CLI spelling of a `Fault`."""
    kind, _, rest = text.strip().partition(":")
    kw: dict[str, Any] = {}
    for item in filter(None, (p.strip() for p in rest.split(","))):
        key, sep, val = item.partition("=")
        if not sep:
            raise ValueError(f"expected key=value in {text!r}")
        if key == "count":
            kw[key] = int(val)
        elif key in ("fraction", "seconds"):
            kw[key] = float(val)
        elif key == "indices":
            kw[key] = tuple(int(v) for v in val.split("/") if v)
        elif key == "delays":
            kw[key] = tuple(float(v) for v in val.split("/") if v)
        elif key == "version":
            kw[key] = None if val in ("", "none", "missing") else val
        elif key == "mode":
            kw[key] = val
        elif key == "data":
            kw[key] = val.encode()
        else:
            raise ValueError(f"unknown fault parameter {key!r} in {text!r}")
    return Fault(kind.strip(), **kw)  # type: ignore[arg-type]


__all__ = [
    "FAULT_HELP",
    "KINDS",
    "Element",
    "Fault",
    "FaultKind",
    "FaultMix",
    "FaultPlan",
    "FaultScript",
    "Injected",
    "Outgoing",
    "Reply",
    "as_plan",
    "parse_fault",
]
