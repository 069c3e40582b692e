"""Instructions per exchange, counted by valgrind: what pairwatch adds, nearly without noise.

Why: on a shared 2-core machine two runs of the same code move a wall or CPU ratio by 0.1 to
0.2, which is as large as most changes worth measuring.  An instruction count hardly moves:
callgrind counts every instruction the client process executes (the server runs natively, in
its own process), and the neighbours do not change that.  What is left varies by a few
percent of what pairwatch adds (where garbage collections and socket reads fall).  A count
is not time (cache misses and the memory behaviour are not in it), but it says how much work
pairwatch adds to one exchange, and it is the number to compare between two commits.

Counted: metrics only at every batch size, spans (AlwaysOn, a child span per id) at 100
requests and the ratio sampler (``sampled``) at 1 request, each against the bare client.
Over loopback for httpx, requests and aiohttp; and for httpx in-process too, on a mock
transport (``httpx-mock``: no socket, no server), with more exchanges per count
(``MOCK_SHORT``, ``MOCK_LONG``), where the two floors are counted as well: the guarded and
the minimal observer, at every batch size.
Each count runs a child process under callgrind twice, with ``SHORT`` and ``LONG`` exchanges
after the same warm-up;
``(I(LONG) - I(SHORT)) / (LONG - SHORT)`` is one exchange, with start-up, imports and warm-up
cancelled out.  Opt in with ``--only instructions`` (about 11 minutes per seed: every
child runs about 50 times slower under valgrind); skipped when valgrind is not installed
(``apt install valgrind``).

Every child runs under a fixed hash seed (``PYTHONHASHSEED``), the same for the bare and the
instrumented count: a seed decides how dict and set look-ups collide, and left to chance it
moved a one-request in-process count by about 3,000 instructions, the cost of six Python
calls.  With the seed fixed, an in-process count repeats within a few hundred instructions;
a one-request loopback count (the bare one as much) still moves by up to about 10,000
between runs, where socket reads fall.  Which seed is not neutral (layouts differ, so one
seed can favour one commit by a few hundred), and a seed fixes neither the ratio sampler's
draw nor when the span processor's export thread runs, hence ``--seeds`` for more: each
seed is one paired count, and a row's min, median and max are over seeds.
"""

from __future__ import annotations

import gc
import os
import re
import shutil
import statistics
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from _common import Results, Row, fast_server, flush, server_process

SECTION = "instructions per exchange (callgrind)"
SHORT, LONG = 50, 250
MOCK = "httpx-mock"
MOCK_SHORT, MOCK_LONG = 100, 1100  # in-process exchanges are cheap: more of them per count
SPAN_SIZES = (100,)  # spans (AlwaysOn, one child per id) are counted at this batch size
SAMPLED_SIZES = (1,)  # ParentBased(TraceIdRatioBased(0.01)): 99 batches in 100 dropped
WARM_UP = 100
SEEDS = (1,)  # hash seeds: one paired count each (run.py --seeds)
_COLLECTED = re.compile(r"Collected\s*:\s*(\d+)")


def _child(lib: str, size: int, variant: str, count: int, url: str) -> None:
    """In the child: warm up, then make ``count`` exchanges with one variant.

    Under valgrind a program runs about 50 times slower, so the drain thread's clock-based
    wake-ups (a caller quiet for 0.1 s) would record nearly every batch on its own, which
    natively they do not; the child leaves recording to what does not depend on the clock:
    callers every 256 batches, and the final flush.  A full collection ends the warm-up: the
    first one after start-up falls about a thousand exchanges in, and inside or outside the
    counted window it moved a one-request count by about 15,000 instructions.
    """
    from _http import LIBRARIES, body

    from pairwatch.otel import deferred

    deferred.INTERVAL = deferred.MAX_AGE = 3600.0  # type: ignore[misc]
    run = LIBRARIES[lib](url, body(size))[variant]
    run(WARM_UP)
    flush()
    gc.collect()  # the start-up's first full collection, here rather than inside the count
    run(count)
    flush()


def _count(lib: str, size: int, variant: str, count: int, url: str, seed: int) -> int:
    cmd = [
        "valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
        sys.executable, str(Path(__file__).resolve()), lib, str(size), variant, str(count), url,
    ]  # fmt: skip
    env = {**os.environ, "PYTHONHASHSEED": str(seed)}
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900, check=False, env=env)
    found = _COLLECTED.search(done.stderr)
    if done.returncode != 0 or found is None:
        raise RuntimeError(f"callgrind run failed ({done.returncode}): {done.stderr[-500:]}")
    return int(found.group(1))


def _per_exchange(
    lib: str, size: int, variant: str, url: str, pool: ThreadPoolExecutor, seeds: tuple[int, ...]
) -> list[float]:
    """Instructions per exchange, one count per seed (both runs of a count share its seed)."""
    counts = (MOCK_SHORT, MOCK_LONG) if lib == MOCK else (SHORT, LONG)
    found = []
    for seed in seeds:
        jobs = [pool.submit(_count, lib, size, variant, n, url, seed) for n in counts]
        short, long = (job.result() for job in jobs)
        found.append((long - short) / (counts[1] - counts[0]))
    return found


def run_instructions(
    results: Results,
    libraries: tuple[str, ...],
    sizes: tuple[int, ...],
    seeds: tuple[int, ...] = SEEDS,
) -> None:
    if shutil.which("valgrind") is None:
        results.skip(SECTION, "all", "valgrind is not installed (apt install valgrind)")
        return
    with server_process(fast_server()) as url, ThreadPoolExecutor(max_workers=2) as pool:
        for lib in libraries:
            for size in sizes:
                try:
                    bare = _per_exchange(lib, size, "bare", url, pool, seeds)
                    metrics = _per_exchange(lib, size, "metrics", url, pool, seeds)
                except (RuntimeError, subprocess.TimeoutExpired) as exc:
                    results.skip(SECTION, f"{lib} {size}-request batch", str(exc)[:200])
                    continue
                _add(results, lib, size, "metrics", bare, metrics, seeds)
                for variant in _more_variants(lib, size):
                    try:
                        found = _per_exchange(lib, size, variant, url, pool, seeds)
                    except (RuntimeError, subprocess.TimeoutExpired) as exc:
                        label = f"{lib} {size}-request batch, {variant}"
                        results.skip(SECTION, label, str(exc)[:200])
                        continue
                    _add(results, lib, size, variant, bare, found, seeds)


def _more_variants(lib: str, size: int) -> list[str]:
    """Spans (one child per id) at the spans target's batch size; the ratio sampler where a
    batch's own cost shows most (a dropped batch's cost is per batch, not per id); and
    in-process, the two floors pairwatch is set against (``_guarded.py``, ``_observer.py``)."""
    return (
        (["spans"] if size in SPAN_SIZES else [])
        + (["sampled"] if size in SAMPLED_SIZES else [])
        + (["guarded", "minimal"] if lib == MOCK else [])
    )


def _add(
    results: Results,
    lib: str,
    size: int,
    variant: str,
    bare: list[float],
    found: list[float],
    seeds: tuple[int, ...],
) -> None:
    """One row: the ratio per seed (each seed's instrumented count over its own bare one)."""
    added = [f - b for f, b in zip(found, bare, strict=True)]
    extra = statistics.median(added)
    where = "in-process (mock transport)" if lib == MOCK else "plain server"
    name = "httpx" if lib == MOCK else lib
    spread = f"; added per seed {min(added):,.0f} to {max(added):,.0f}" if len(seeds) > 1 else ""
    who = f"the {variant} observer" if variant in ("guarded", "minimal") else "pairwatch"
    note = (
        f"bare {statistics.median(bare):,.0f}, {variant} {statistics.median(found):,.0f} "
        f"instructions; {who} adds {extra:,.0f} per exchange ({extra / size:,.0f} per "
        f"request id); hash seed{'s' if len(seeds) > 1 else ''} "
        f"{', '.join(map(str, seeds))}{spread}"
    )
    results.add(
        Row(
            SECTION,
            f"{name} {size}-request batch, {where}: {variant} / bare",
            "x",
            [f / b for f, b in zip(found, bare, strict=True)],
            note=note,
            gated=False,
        )
    )


if __name__ == "__main__":  # the child: lib size variant count url
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    _child(sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), sys.argv[5])
