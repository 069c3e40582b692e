"""Fault specs, fault plans and the function that bends a correct reply.

Faults act on the *reply* a correct server would have written, never on the
request, so a test always knows what the right answer was and what was changed.
Everything random goes through a `random.Random` owned by the plan, so a seed
reproduces the same sequence of faults run after run.
"""

from __future__ import annotations

import copy
import random
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
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

#: Every fault kind, in the order a `FaultMix` applies them within one reply:
#: element edits first, then the shape of the reply, then how it is written.
KINDS: tuple[str, ...] = get_args(FaultKind)

DEFAULT_GARBAGE = b"\xff\xfe<html>502 chaos</html>\x00{[,"
_NUMERIC = re.compile(r"-?[0-9]+")
WRONG_ID_OFFSET = 1_000_000_007


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
    data: bytes = DEFAULT_GARBAGE

    def __post_init__(self) -> None:
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
        step = next(self._it, None)
        if step is None and self._cycle:
            self._it = iter(self._cycle)
            step = next(self._it, None)
        if step is None:
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


def _ids(elements: Sequence[Element], picks: Iterable[int]) -> tuple[Any, ...]:
    return tuple(_id_of(elements[i].value) for i in picks)


def _id_of(value: Any) -> Any:
    return value.get("id") if isinstance(value, dict) else None


def _targets(fault: Fault, eligible: list[int], n: int, rng: random.Random) -> list[int]:
    if fault.indices is not None:
        wanted = {i % n for i in fault.indices if -n <= i < n} if n else set()
        return sorted(wanted.intersection(eligible))
    if fault.fraction is not None:
        k = max(1, round(fault.fraction * len(eligible))) if fault.fraction > 0 else 0
    else:
        k = fault.count
    return sorted(rng.sample(eligible, min(k, len(eligible))))


def _id_type_swap(value: Any) -> tuple[bool, Any]:
    if isinstance(value, bool):
        return False, value
    if isinstance(value, (int, float)):
        return True, str(value)
    if isinstance(value, str) and _NUMERIC.fullmatch(value):
        return True, int(value)
    return False, value


def _wrong(value: Any) -> Any:
    if isinstance(value, str):
        return value + "-wrong"
    if isinstance(value, float):
        return value + 0.5
    if isinstance(value, int) and not isinstance(value, bool):
        return value + WRONG_ID_OFFSET
    return WRONG_ID_OFFSET


def _error_object(message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": message}}


def apply_faults(
    reply: Reply, faults: Sequence[Fault], rng: random.Random, exchange: int = 0
) -> tuple[Outgoing, list[Injected]]:
    """Turn the correct reply into the faulty one; report only what took effect."""
    out = Outgoing(
        elements=[Element(copy.deepcopy(r)) for r in reply.responses],
        as_array=reply.batch and bool(reply.responses),
        expected_silence=not reply.responses and reply.raw is None,
        raw=reply.raw,
    )
    done: list[Injected] = []
    for fault in faults:
        note = _apply_one(out, fault, rng)
        if note is not None:
            ids, detail = note
            done.append(Injected(exchange, fault.kind, ids, detail))
    return out, done


def _apply_one(out: Outgoing, f: Fault, rng: random.Random) -> tuple[tuple[Any, ...], str] | None:
    els = out.elements
    n = len(els)
    dicts = [i for i, e in enumerate(els) if isinstance(e.value, dict)]
    kind = f.kind
    if out.raw is not None and kind not in ("unparseable", "cut", "delay"):
        return None  # an unparsed upstream body has no elements to edit
    if kind == "drop":
        picks = _targets(f, list(range(n)), n, rng)
        if not picks:
            return None
        ids = _ids(els, picks)
        out.elements = [e for i, e in enumerate(els) if i not in picks]
        return ids, f"dropped positions {picks}"
    if kind == "duplicate":
        picks = _targets(f, list(range(n)), n, rng)
        if not picks:
            return None
        ids = _ids(els, picks)
        new: list[Element] = []
        for i, e in enumerate(els):
            new.append(e)
            if i in picks:
                new.append(Element(copy.deepcopy(e.value), e.delay))
        out.elements = new
        return ids, f"duplicated positions {picks}"
    if kind in ("null_id", "wrong_id", "id_type"):
        if kind == "null_id":
            eligible = [i for i in dicts if els[i].value.get("id") is not None]
        elif kind == "wrong_id":
            eligible = dicts
        else:
            eligible = [i for i in dicts if _id_type_swap(els[i].value.get("id"))[0]]
        picks = _targets(f, eligible, n, rng)
        if not picks:
            return None
        ids = _ids(els, picks)
        for i in picks:
            old = els[i].value.get("id")
            if kind == "null_id":
                els[i].value["id"] = None
            elif kind == "wrong_id":
                els[i].value["id"] = _wrong(old)
            else:
                els[i].value["id"] = _id_type_swap(old)[1]
        return ids, f"{kind} at positions {picks}"
    if kind == "both_result_error":
        picks = _targets(f, dicts, n, rng)
        for i in picks:
            v = els[i].value
            if "result" in v:
                v["error"] = {"code": -32603, "message": "chaos: result and error"}
            else:
                v["result"] = None
        return (_ids(els, picks), f"positions {picks}") if picks else None
    if kind == "bad_version":
        picks = _targets(f, dicts, n, rng)
        for i in picks:
            if f.version is None:
                els[i].value.pop("jsonrpc", None)
            else:
                els[i].value["jsonrpc"] = f.version
        return (_ids(els, picks), f"jsonrpc={f.version!r} at {picks}") if picks else None
    if kind == "reorder":
        return _reorder(out, f, rng)
    if kind == "single_for_batch":
        if not out.as_array:
            return None
        ids = _ids(els, range(n))
        if (f.mode or "error") == "first" and els:
            out.elements = [els[0]]
        else:
            out.elements = [Element(_error_object("chaos: single object for a batch"))]
        out.as_array = False
        return ids, f"mode={f.mode or 'error'}"
    if kind == "reply_to_notifications":
        if not out.expected_silence or out.elements or out.as_array:
            return None
        if (f.mode or "empty") == "empty":
            out.as_array = True
        else:
            out.elements = [Element(_error_object("chaos: reply to notifications"))]
        return (), f"mode={f.mode or 'empty'}"
    if kind == "delay":
        for i, e in enumerate(els):
            if f.delays is not None:
                e.delay = f.delays[i] if i < len(f.delays) else 0.0
            else:
                e.delay = f.seconds * (i + 1)
        return _ids(els, range(n)), "delays " + ",".join(f"{e.delay:g}" for e in els)
    if kind == "cut":
        if out.silent:
            out.cut_fraction, out.cut_events = 0.0, 0
            return (), "closed without reply"
        out.cut_fraction = 0.5 if f.fraction is None else f.fraction
        out.cut_events = f.count
        return (), f"fraction={out.cut_fraction:g} events={f.count}"
    # unparseable
    out.raw = f.data
    return _ids(els, range(n)), f"{len(f.data)} garbage bytes"


def _reorder(out: Outgoing, f: Fault, rng: random.Random) -> tuple[tuple[Any, ...], str] | None:
    els = out.elements
    if len(els) < 2:
        return None
    mode = f.mode or "reverse"
    before = list(els)
    if mode == "reverse":
        els.reverse()
    elif mode == "rotate":
        els.append(els.pop(0))
    else:
        rng.shuffle(els)
        if all(a is b for a, b in zip(before, els, strict=True)):
            els.append(els.pop(0))  # a shuffle that changes nothing is not a fault
    where = {id(e): i for i, e in enumerate(before)}
    order = [where[id(e)] for e in els]
    return _ids(before, range(len(before))), f"{mode} -> positions {order}"


__all__ = [
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
    "apply_faults",
    "as_plan",
    "parse_fault",
]
