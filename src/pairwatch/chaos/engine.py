"""Where a reply source (backend or upstream) meets the fault plan.

Every transport goes through one `Engine`, so the record of what was injected
is the same whatever the wire: tests and the demo read `Engine.injected` and
compare it with what the client saw. The fault step for an exchange is taken
when the request *arrives*, with its own RNG derived from the plan, so that
concurrent requests finishing in any order still get the faults the seed says.
"""

from __future__ import annotations

import random
import threading
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from .faults import Fault, FaultPlan, Injected, Outgoing, Reply, Step, apply_faults, as_plan

ReplySource = Callable[[bytes], Awaitable[Reply]]


@dataclass(frozen=True)
class Turn:
    """The faults decided for one exchange, taken before its reply exists."""

    exchange: int
    faults: tuple[Fault, ...]
    rng: random.Random


class Engine:
    """Thread-safe: a test thread may change the plan or read the record at any time."""

    def __init__(
        self, source: ReplySource, faults: FaultPlan | Fault | Sequence[Step] | None = None
    ) -> None:
        self.source = source
        self._lock = threading.Lock()
        self._plan = as_plan(faults)
        self._injected: list[Injected] = []
        self._exchanges = 0

    def set_faults(self, faults: FaultPlan | Fault | Sequence[Step] | None) -> None:
        """Replace the plan; exchanges already in flight keep the faults they drew."""
        with self._lock:
            self._plan = as_plan(faults)

    @property
    def injected(self) -> list[Injected]:
        with self._lock:
            return list(self._injected)

    @property
    def counts(self) -> Counter[str]:
        with self._lock:
            return Counter(i.kind for i in self._injected)

    @property
    def exchanges(self) -> int:
        with self._lock:
            return self._exchanges

    def reset(self) -> None:
        """Forget the record (not the plan), e.g. between phases of a demo."""
        with self._lock:
            self._injected.clear()
            self._exchanges = 0

    def take_turn(self) -> Turn:
        with self._lock:
            n = self._exchanges
            self._exchanges += 1
            if self._plan is None:
                return Turn(n, (), random.Random(n))
            faults = tuple(self._plan.next_step())
            return Turn(n, faults, random.Random(self._plan.rng.getrandbits(64)))

    def apply(self, turn: Turn, reply: Reply) -> Outgoing:
        out, done = apply_faults(reply, turn.faults, turn.rng, turn.exchange)
        if done:
            with self._lock:
                self._injected.extend(done)
        return out

    async def exchange(self, body: bytes) -> Outgoing:
        turn = self.take_turn()
        reply = await self.source(body)
        return self.apply(turn, reply)
