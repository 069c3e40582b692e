"""Where the fixed cost's floor is: pairwatch on an httpx exchange, next to the least any
pairing observer could do there, and the least pairwatch's own checks could cost.

Why: the fixed-cost target (one tracked exchange, at most 15 µs above bare) is measured over
loopback, where a difference of two timings of a few hundred µs swings by tens of µs.  In
one process, on httpx's mock transport (no socket, no server), an exchange costs about 90 µs
and what an observer adds stands out.  The ``minimal`` variant (``_observer.py``) does only
what pairing by id cannot do without: the floor of any observer.  The ``guarded`` variant
(``_guarded.py``) makes pairwatch's checks and records pairwatch's metrics in one function:
the floor of anything with pairwatch's guarantees.  So the gap from minimal to guarded is
what the guarantees cost, and from guarded to pairwatch what its arrangement costs.
"""

from __future__ import annotations

import statistics

from _common import Results, Row, interleaved
from _http import CHECKS, LIBRARIES, body

_CASES = (
    ("metrics", "pairwatch, metrics, above bare"),
    ("guarded", "a guarded observer (pairwatch's checks and metrics in one function), above bare"),
    ("minimal", "a minimal observer (decode both bodies, compare ids), above bare"),
)


def run_minimal(results: Results, sizes: tuple[int, ...], repeats: int, per_block: int) -> None:
    for size in sizes:
        variants = LIBRARIES["httpx-mock"]("http://127.0.0.1:9/", body(size))
        timed = {name: variants[name] for name in ("bare", "metrics", "guarded", "minimal")}
        block = max(20, per_block // max(1, size // 10))
        timings = interleaved(timed, repeats, block)
        while CHECKS:  # the guarded observer recorded every exchange, or the run stops
            CHECKS.pop()()
        section = f"floor, {size}-request httpx exchange in-process (mock transport)"
        bare_us = statistics.median(w for w, _ in timings["bare"]) * 1e6
        for name, case in _CASES:
            added = [
                (w - b) * 1e6 for (w, _), (b, _) in zip(timings[name], timings["bare"], strict=True)
            ]
            results.add(
                Row(
                    section,
                    case,
                    "µs",
                    added,
                    None,
                    f"bare {bare_us:.1f} µs per exchange; median per-repeat difference",
                    gated=False,
                )
            )
