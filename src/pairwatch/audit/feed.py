"""Drive the live path's channels from a capture, on the capture's own clock.

Every step goes through :func:`pairwatch.open_channel` and the channel's public calls, with
an injected clock set to the step's capture time and an in-memory OpenTelemetry meter
provider per file.  The counters the report reads are therefore produced by exactly the
ledger and telemetry a live client would use.  Per-batch detail that metrics cannot carry
(which ids went missing, where in the file the batch was sent) comes from the documented
``Options(on_batch_closed=...)`` hook, not from the ledger's internals.
"""

from __future__ import annotations

import heapq
import itertools
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Final

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.trace import NoOpTracerProvider

from pairwatch import Channel, Options, open_channel
from pairwatch.audit.base import ReadStats, Step, StepReader
from pairwatch.pairing import diagnosis, wire
from pairwatch.pairing.records import Batch

MAX_CHANNELS: Final = 4096  # open channels per file; the least recently used is evicted
MAX_IDS: Final = 10  # ids listed per kind for one batch in the report


class CaptureClock:
    """The ledger's clock, moved by the feeder to each step's capture time."""

    __slots__ = ("now",)

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@dataclass
class BatchDetail:
    """One closed batch as the report shows it: where it was sent and the ids involved."""

    where: str
    channel: str
    transport: str
    diagnosis: str
    close_reason: str
    size: int
    requests: int
    paired: int
    missing: int
    unknown: int
    null: int
    duplicates: int
    out_of_order: bool
    missing_ids: list[Any]
    unknown_ids: list[Any]
    duplicate_ids: list[Any]
    problems: dict[str, int]

    @property
    def score(self) -> int:
        """How bad: every response or request that went wrong counts one."""
        return (
            self.missing
            + self.unknown
            + self.null
            + self.duplicates
            + sum(self.problems.values())
            + (self.diagnosis != diagnosis.OK)
            + self.out_of_order
        )


def _ids(keys: list[Any]) -> list[Any]:
    return keys[:MAX_IDS]


class BatchLog:
    """The ``on_batch_closed`` observer: keeps the ``keep`` worst batches, nothing more.

    A bounded heap, so a capture with millions of faulty batches still costs constant memory.
    Locked because the channel sweeper may close a stream channel's batch on its own thread.
    """

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self.current: Step | None = None
        self._where: dict[int, Step] = {}
        self._heap: list[tuple[int, int, BatchDetail]] = []
        self._order = itertools.count()
        self._lock = threading.Lock()

    def opened(self, batch: Batch) -> None:
        if batch.open and self.current is not None:
            with self._lock:
                self._where[id(batch)] = self.current

    def closed(self, batch: Batch) -> None:
        with self._lock:
            step = self._where.pop(id(batch), None) or self.current
            if step is None or self.keep <= 0:
                return
            detail = _detail(batch, step)
            score = detail.score
            if not score:
                return
            item = (score, -next(self._order), detail)  # ties: the earlier batch stays
            if len(self._heap) < self.keep:
                heapq.heappush(self._heap, item)
            elif item[:2] > self._heap[0][:2]:
                heapq.heapreplace(self._heap, item)

    def worst(self) -> list[BatchDetail]:
        with self._lock:
            return [d for _, _, d in sorted(self._heap, key=lambda t: t[:2], reverse=True)]


def _detail(batch: Batch, step: Step) -> BatchDetail:
    problems: dict[str, int] = {}
    for name, tally in (
        ("invalid_response", batch.invalid),
        ("invalid_request", batch.invalid_requests),
        ("protocol_violation", batch.violations),
    ):
        if tally:
            problems[name] = sum(tally.values())
    calls = batch.calls
    return BatchDetail(
        where=step.where,
        channel=step.channel,
        transport=step.transport,
        diagnosis=batch.diagnosis,
        close_reason=batch.close_reason,
        size=batch.size,
        requests=len(calls),
        paired=batch.paired,
        missing=batch.missing,
        unknown=batch.unknown,
        null=batch.null,
        duplicates=batch.duplicates_in + batch.duplicates_cross,
        out_of_order=batch.out_of_order,
        missing_ids=_ids([c.key for c in calls if c.outcome == "missing"]),
        unknown_ids=_ids(list(batch.unknown_keys)),
        duplicate_ids=_ids([c.key for c in calls if c.duplicate]),
        problems=problems,
    )


@dataclass
class FileAudit:
    """Everything the report needs about one capture file."""

    path: str
    format: str
    stats: ReadStats
    reader: InMemoryMetricReader
    worst: list[BatchDetail] = field(default_factory=list)
    clock_went_back: int = 0
    steps: int = 0


def audit_steps(
    path: str,
    fmt: str,
    steps: StepReader,
    stats: ReadStats,
    *,
    timeout: float = 30.0,
    keep_worst: int = 5,
) -> FileAudit:
    """Feed a reader's steps through fresh channels and return the file's books."""
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader], shutdown_on_exit=False)
    clock = CaptureClock()
    log = BatchLog(keep_worst)
    options = Options(
        timeout=timeout,
        spans=False,
        meter_provider=provider,
        tracer_provider=NoOpTracerProvider(),
        clock=clock,
        on_batch_closed=log.closed,
    )
    result = FileAudit(path, fmt, stats, reader)
    # HAR entries are independent exchanges whose times overlap; streams share one timeline.
    one_timeline = fmt != "har"
    channels: OrderedDict[str, Channel] = OrderedDict()
    for step in steps:
        result.steps += 1
        ts = step.ts
        if ts is not None:
            if one_timeline and ts < clock.now:
                result.clock_went_back += 1  # keep time monotonic: latencies never negative
            else:
                clock.now = ts
        channel = channels.get(step.channel)
        if channel is None:
            if step.direction == "closed":
                continue
            channel = open_channel(
                transport=step.transport,
                integration="audit",
                server_address=step.server,
                bound=step.bound,
                options=options,
            )
            channels[step.channel] = channel
            if len(channels) > MAX_CHANNELS:
                _, oldest = channels.popitem(last=False)
                oldest.close("evicted")
        else:
            channels.move_to_end(step.channel)
        log.current = step
        channel.expire()  # timeouts fall where the capture's clock puts them
        if step.direction == "sent":
            batch = channel.sent(step.payload)
            if batch is not None:
                log.opened(batch)
        elif step.direction == "received":
            if isinstance(step.payload, wire.Payload):
                channel.received_parsed(step.payload)  # already shaped by the reader
            else:
                channel.received(step.payload)
        else:
            channel.close(str(step.payload))
            del channels[step.channel]
    for channel in channels.values():
        channel.expire()
        channel.close("stream_end")
    result.worst = log.worst()
    return result
