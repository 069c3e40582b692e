"""Read the demo's counters back from an in-memory reader and say what they point to.

The demo shows what a user would see on a dashboard, so it reads exported metric points
(never pairwatch's internals) and applies the same reading as the dashboards and alert rules:
the batches closed over a recent window, by the diagnosis their evidence named.
"""

from __future__ import annotations

import textwrap
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field

from opentelemetry.sdk.metrics.export import HistogramDataPoint, InMemoryMetricReader

from pairwatch.otel.names import DIAGNOSIS
from pairwatch.otel.vocabulary import BY_KEY, INSTRUMENTS
from pairwatch.pairing import diagnosis

# The live view's rows: the vocabulary's instruments that have words for it, in its order.
COUNTERS = tuple((i.name, i.words) for i in INSTRUMENTS if i.words is not None)
CLOSED = BY_KEY["closed"].name
REQUESTS = BY_KEY["requests"].name
LATENCY = BY_KEY["pair_latency"].name


@dataclass
class Snapshot:
    at: float
    totals: dict[str, float] = field(default_factory=dict)
    diagnoses: dict[str, float] = field(default_factory=dict)
    bounds: tuple[float, ...] = ()
    buckets: list[int] = field(default_factory=list)

    def get(self, name: str) -> float:
        return self.totals.get(name, 0.0)

    def percentile(self, q: float) -> float | None:
        """Latency percentile interpolated within histogram buckets (as PromQL does)."""
        total = sum(self.buckets)
        if not total:
            return None
        rank = q * total
        seen = 0
        lower = 0.0
        for i, count in enumerate(self.buckets):
            upper = self.bounds[i] if i < len(self.bounds) else lower
            if seen + count >= rank and count:
                return lower + (upper - lower) * (rank - seen) / count
            seen += count
            lower = upper
        return lower


def snapshot(reader: InMemoryMetricReader) -> Snapshot:
    snap = Snapshot(at=time.monotonic())
    data = reader.get_metrics_data()
    for rm in data.resource_metrics if data else ():
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                for point in metric.data.data_points:
                    if isinstance(point, HistogramDataPoint):
                        if metric.name == LATENCY:
                            _merge_hist(snap, point)
                        snap.totals[metric.name] = snap.get(metric.name) + point.count
                        continue
                    value = float(getattr(point, "value", 0.0))
                    snap.totals[metric.name] = snap.get(metric.name) + value
                    if metric.name == CLOSED:
                        d = str((point.attributes or {}).get(DIAGNOSIS))
                        snap.diagnoses[d] = snap.diagnoses.get(d, 0.0) + value
    return snap


def _merge_hist(snap: Snapshot, point: HistogramDataPoint) -> None:
    if not snap.buckets:
        snap.bounds = tuple(point.explicit_bounds)
        snap.buckets = [0] * len(point.bucket_counts)
    for i, count in enumerate(point.bucket_counts):
        snap.buckets[i] += count


def reading(old: Snapshot, new: Snapshot) -> str:
    """Name what the batches closed since ``old`` point to, in words.

    Each closed batch carries its own diagnosis (from the evidence pairwatch saw), so the
    reading ranks the diagnoses of the window rather than re-combining totals from batches
    that failed for different reasons.
    """
    moved = {
        name: new.diagnoses.get(name, 0.0) - old.diagnoses.get(name, 0.0)
        for name in diagnosis.ALL
        if name != diagnosis.OK
    }
    failing = sorted(((n, name) for name, n in moved.items() if n > 0), reverse=True)
    if not failing:
        return "no pairing failures"
    count, worst = failing[0]
    others = ", ".join(f"{name} {n:.0f}" for n, name in failing[1:])
    text = f"{worst} ({count:.0f} batches): {diagnosis.EXPLANATION[worst]}"
    return text + (f"; also {others}" if others else "")


class Window:
    """Keeps recent snapshots so rates and readings cover the last few seconds."""

    def __init__(self, seconds: float = 5.0) -> None:
        self.seconds = seconds
        self._snaps: deque[Snapshot] = deque()

    def push(self, snap: Snapshot) -> Snapshot:
        """Add a snapshot; return the oldest one still inside the window."""
        self._snaps.append(snap)
        while len(self._snaps) > 2 and snap.at - self._snaps[1].at >= self.seconds:
            self._snaps.popleft()
        return self._snaps[0]


def window_label(old: Snapshot, new: Snapshot) -> str:
    """The span a reading covers, said out loud: rates and readings are not totals."""
    return f"last {max(new.at - old.at, 0.0):.0f} s"


def wrap(label: str, text: str, width: int) -> list[str]:
    """``label text`` wrapped at word boundaries, continuation lines indented under the text."""
    indent = " " * len(label)
    return textwrap.wrap(
        text,
        width=max(width, len(label) + 20),
        initial_indent=label,
        subsequent_indent=indent,
        break_long_words=False,
        break_on_hyphens=False,
    ) or [label.rstrip()]


def fit(lines: list[str], width: int) -> list[str]:
    """Lines no wider than ``width``, broken between words and indented like their first
    part, so that the terminal never wraps one mid-word (which would also break the
    in-place redraw's line count)."""
    out: list[str] = []
    for line in lines:
        if len(line) <= width:
            out.append(line)
            continue
        indent = line[: len(line) - len(line.lstrip())]
        out.extend(
            textwrap.wrap(
                line.strip(),
                width=max(width, len(indent) + 24),
                initial_indent=indent,
                subsequent_indent=indent + "    ",
                break_long_words=False,
                break_on_hyphens=False,
            )
        )
    return out


def clock(elapsed: float, duration: float) -> str:
    """Elapsed and remaining time; a run without a duration has no remaining time."""
    text = f"elapsed {elapsed:5.1f} s"
    if duration:
        text += f"   remaining {max(duration - elapsed, 0.0):5.1f} s"
    return text


def render(first: Snapshot, old: Snapshot, new: Snapshot, *, title: str, width: int = 100) -> str:
    span = max(new.at - old.at, 1e-9)
    lines = [title, ""]
    lines.append(
        f"  batches/s {(new.get(CLOSED) - old.get(CLOSED)) / span:8.1f}"
        f"    requests/s {(new.get(REQUESTS) - old.get(REQUESTS)) / span:8.1f}"
        f"    (rates over the {window_label(old, new)})"
    )
    lines.append("")
    lines.append(f"  {'counter':28} {'total':>9} {'per s':>8}")
    for name, label in COUNTERS:
        rate = (new.get(name) - old.get(name)) / span
        lines.append(f"  {label:28} {new.get(name) - first.get(name):9.0f} {rate:8.1f}")
    lines.append("")
    quantiles = []
    for q in (0.5, 0.95, 0.99):
        value = new.percentile(q)
        quantiles.append(f"p{int(q * 100)} " + ("-" if value is None else f"{value * 1000:.1f} ms"))
    lines.append("  pair latency   " + "   ".join(quantiles))
    lines.append("")
    lines.append("  batches by diagnosis (total):")
    for name in diagnosis.ALL:
        count = new.diagnoses.get(name, 0.0)
        if count:
            lines.append(f"    {name:28} {count:7.0f}")
    lines.append("")
    lines.extend(wrap(f"  reading, {window_label(old, new)}: ", reading(old, new), width))
    return "\n".join(lines)


def check_table(
    first: Snapshot, final: Snapshot, expected: Mapping[str, float], *, marks: tuple[str, str]
) -> tuple[str, bool]:
    """Counted against the server's record, one row per counter; True when every row agrees.

    ``marks`` is the pair of symbols for agreeing and disagreeing rows (a terminal that
    cannot print a check mark gets words).
    """
    labels = dict(COUNTERS)
    good, bad = marks
    lines = [f"  {'counter':28} {'server wrote':>12} {'counted':>9}"]
    agree = True
    for name, want in expected.items():
        got = final.get(name) - first.get(name)
        same = got == want
        agree = agree and same
        label = labels.get(name, name)
        lines.append(f"  {label:28} {want:12.0f} {got:9.0f}  {good if same else bad}")
    return "\n".join(lines), agree
