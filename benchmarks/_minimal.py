"""Where the fixed cost's floor is: pairwatch on an httpx exchange, next to the least any
pairing observer could do there.

Why: the fixed-cost target (one tracked exchange, at most 15 µs above bare) is measured over
loopback, where a difference of two timings of a few hundred µs swings by tens of µs.  In
one process, on httpx's mock transport (no socket, no server), an exchange costs about 70 µs
and what an observer adds stands out.  The ``minimal`` variant (``_observer.py``) does only
what pairing by id cannot do without, so the gap between the two rows is what pairwatch's
guarantees cost, and the minimal row is the floor.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable

from _common import Results, Row, interleaved
from _http import HEADERS, LIBRARIES, body
from _observer import minimal_observer


def _minimal_client(size: int) -> Callable[[int], object]:
    import httpx

    ids = [element["id"] for element in json.loads(body(size))]
    reply = json.dumps([{"jsonrpc": "2.0", "id": i, "result": [i]} for i in ids]).encode()
    payload = body(size)

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=reply, headers=HEADERS)

    client = minimal_observer(httpx.Client(transport=httpx.MockTransport(answer)))

    def run(n: int) -> None:
        for _ in range(n):
            _ = client.post("http://127.0.0.1:9/", content=payload, headers=HEADERS).json()

    return run


def run_minimal(results: Results, sizes: tuple[int, ...], repeats: int, per_block: int) -> None:
    for size in sizes:
        variants = LIBRARIES["httpx-mock"]("http://127.0.0.1:9/", body(size))
        timed = {
            "bare": variants["bare"],
            "metrics": variants["metrics"],
            "minimal": _minimal_client(size),
        }
        block = max(20, per_block // max(1, size // 10))
        timings = interleaved(timed, repeats, block)
        section = f"floor, {size}-request httpx exchange in-process (mock transport)"
        bare_us = statistics.median(w for w, _ in timings["bare"]) * 1e6
        for name, case in (
            ("metrics", "pairwatch, metrics, above bare"),
            ("minimal", "a minimal observer (decode both bodies, compare ids), above bare"),
        ):
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
