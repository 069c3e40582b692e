"""Shared pieces of the benchmark: result rows, interleaved timing, server processes.

Why interleaved and paired: the machine is shared and noisy.  Each repeat times every
variant once, in a shuffled order, and the ratio of a repeat is taken against the bare run
*of the same repeat*; min / median / max are over those paired ratios.  Deferred work is
never left out: every timed block ends with ``pairwatch.flush()``, so whatever pairwatch
queued during the block is paid for inside it.
"""

from __future__ import annotations

import os
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pairwatch

HERE = Path(__file__).resolve().parent


@dataclass
class Row:
    """One line of the table: a ratio (or absolute value) with its spread over repeats."""

    section: str
    case: str
    unit: str  # "x" for ratios instrumented / bare, else the unit of an absolute value
    values: list[float]
    target: float | None = None  # the same unit; a ratio target of 1.10 means +10 %
    note: str = ""
    skipped: str = ""
    # The --short failure threshold: twice the target, or twice the known current median
    # where a target is missed by a documented gap (docs/performance.md), so that CI
    # catches regressions and not the gap itself.
    known: float | None = None
    gated: bool = True  # absolute times swing with machine load: those are shown, not gated

    @property
    def median(self) -> float:
        return statistics.median(self.values) if self.values else float("nan")

    @property
    def met(self) -> bool | None:
        if self.target is None or not self.values:
            return None
        return self.median <= self.target

    @property
    def gross(self) -> bool:
        """A regression far beyond noise: the median above twice the target."""
        if not self.gated:
            return False
        limit = (
            max(x for x in (self.target, self.known) if x is not None)
            if (self.target is not None or self.known is not None)
            else None
        )
        return limit is not None and bool(self.values) and self.median > 2 * limit


@dataclass
class Results:
    rows: list[Row] = field(default_factory=list)

    def add(self, row: Row) -> Row:
        self.rows.append(row)
        # Progress on stderr, so that a long or interrupted run still shows what it measured.
        print(f"  {row.section} / {row.case}: median {row.median:.3f} {row.unit}", file=sys.stderr)
        return row

    def skip(self, section: str, case: str, why: str) -> None:
        self.rows.append(Row(section, case, "", [], skipped=why))


def flush() -> None:
    """Drain pairwatch's deferred telemetry, when this version defers any."""
    fn = getattr(pairwatch, "flush", None)
    if fn is not None:
        fn()


def interleaved(
    variants: dict[str, Callable[[int], object]], repeats: int, per_block: int
) -> dict[str, list[tuple[float, float]]]:
    """Time each variant ``per_block`` calls at a time, shuffled per repeat.

    Returns per variant a list of (wall, cpu) seconds per call, one pair per repeat.  CPU is
    the whole process (every thread), so work moved to a background thread still counts.
    """
    out: dict[str, list[tuple[float, float]]] = {name: [] for name in variants}
    names = list(variants)
    for fn in variants.values():  # warm-up: connections, caches, first-use paths
        fn(max(1, per_block // 4))
        flush()
    for _ in range(repeats):
        random.shuffle(names)
        for name in names:
            fn = variants[name]
            w0, c0 = time.perf_counter(), time.process_time()
            fn(per_block)
            flush()
            w1, c1 = time.perf_counter(), time.process_time()
            out[name].append(((w1 - w0) / per_block, (c1 - c0) / per_block))
    return out


def ratios(
    timings: dict[str, list[tuple[float, float]]], name: str, base: str = "bare", cpu: bool = False
) -> list[float]:
    i = 1 if cpu else 0
    return [v[i] / b[i] for v, b in zip(timings[name], timings[base], strict=True)]


def median_us(timings: dict[str, list[tuple[float, float]]], name: str) -> float:
    return statistics.median(v[0] for v in timings[name]) * 1e6


@contextmanager
def server_process(args: list[str], env: dict[str, str] | None = None) -> Iterator[str]:
    """Start a server in its own process (its own GIL); yield the URL it prints first."""
    proc = subprocess.Popen(
        args,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, **(env or {})},
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        if not line.startswith("http"):
            raise RuntimeError(f"server {args} printed {line!r} instead of its URL")
        yield line.split()[-1]
    finally:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()


def fast_server() -> list[str]:
    return [sys.executable, str(HERE / "fastserver.py")]


def chaos_server() -> list[str]:
    return [sys.executable, "-m", "pairwatch.chaos", "http", "--port", "0"]
