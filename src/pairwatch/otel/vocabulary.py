"""The metric vocabulary: every instrument pairwatch exports, in one table.

One row per instrument holds everything any part of pairwatch needs to know about it: the
OpenTelemetry name, kind, unit and description that :mod:`pairwatch.otel.telemetry` creates
the instrument with, the Prometheus series name that :mod:`pairwatch.otel.exposition`, the
audit's text file and the dashboards use, and the short names the audit report and the live
view print.  Before this table the names were typed out in four modules and translated to
Prometheus by two functions that could drift apart; now a rename is one edit here, and
``docs/metrics.md`` (the contract the dashboards and alert rules query) is checked against it
by a test.

It imports only :mod:`pairwatch.otel.names` (no OpenTelemetry), so every layer above it can
read it without an import cycle (``tests/test_layers.py`` keeps it so).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final, Literal

from pairwatch.otel.names import LATENCY_BUCKETS, SIZE_BUCKETS

__all__ = [
    "BY_KEY",
    "BY_NAME",
    "INSTRUMENTS",
    "Instrument",
    "label_name",
    "prometheus_name",
]

Kind = Literal["counter", "histogram"]

_INVALID: Final = re.compile(r"[^a-zA-Z0-9_:]")
_UNIT_SUFFIX: Final = {"s": "seconds", "ms": "milliseconds", "By": "bytes", "1": "ratio"}


def prometheus_name(name: str, unit: str = "") -> str:
    """The Prometheus family name of an OpenTelemetry instrument (no ``_total``).

    The OpenTelemetry-to-Prometheus rules, as the OpenTelemetry Prometheus exporter applies
    them, so the series are the same whichever of the two serves them: characters Prometheus
    does not allow become ``_``, and a unit with a Prometheus spelling (``s`` -> ``seconds``)
    is appended unless the name already ends with it.  Annotations in braces
    (``{request}``) carry no unit and add nothing.
    """
    base = _INVALID.sub("_", name)
    suffix = _UNIT_SUFFIX.get(unit, "")
    if suffix and not base.endswith("_" + suffix):
        base = f"{base}_{suffix}"
    return base


def label_name(key: str) -> str:
    """The Prometheus label for an attribute key: ``rpc.method`` -> ``rpc_method``."""
    label = _INVALID.sub("_", key)
    return "_" + label if label[:1].isdigit() else label


@dataclass(frozen=True)
class Instrument:
    """One exported instrument.

    ``key`` is the attribute of :class:`~pairwatch.otel.telemetry.Telemetry` that holds it.
    ``pairing`` marks the fault counters that read 0 on a healthy service: they are exported
    at zero from the first batch on an attribute set.  ``short`` is the row name of the audit
    report (and of ``--fail-on``), ``words`` the row of the live view; ``None`` leaves the
    instrument out of that display.
    """

    key: str
    name: str
    kind: Kind
    unit: str
    description: str
    buckets: tuple[float, ...] = ()
    pairing: bool = False
    short: str | None = None
    words: str | None = None

    @property
    def family(self) -> str:
        """The Prometheus family name (histograms add ``_bucket``/``_sum``/``_count``)."""
        return prometheus_name(self.name, self.unit)

    @property
    def series(self) -> str:
        """The Prometheus sample name of a counter, or the family name of a histogram."""
        return self.family + "_total" if self.kind == "counter" else self.family


def _counter(
    key: str,
    name: str,
    unit: str,
    description: str,
    *,
    pairing: bool = False,
    short: str | None = None,
    words: str | None = None,
) -> Instrument:
    return Instrument(
        key, name, "counter", unit, description, pairing=pairing, short=short, words=words
    )


INSTRUMENTS: Final[tuple[Instrument, ...]] = (
    Instrument(
        "size", "batch.size", "histogram", "{element}", "Elements per batch sent",
        buckets=tuple(float(b) for b in SIZE_BUCKETS),
    ),
    _counter(
        "closed", "batch.closed", "{batch}", "Batches closed, by diagnosis and close reason",
        short="batches", words="batches closed",
    ),
    _counter(
        "requests", "batch.requests", "{request}", "Requests (elements with an id) sent",
        short="requests", words="requests sent",
    ),
    Instrument(
        "pair_latency", "batch.pair_latency", "histogram", "s",
        "Time from sending a request to pairing its response, per id",
        buckets=LATENCY_BUCKETS,
    ),
    _counter(
        "missing", "batch.missing_response", "{request}",
        "Requests with no response when their batch closed",
        pairing=True, short="missing", words="missing responses",
    ),
    _counter(
        "withdrawn", "batch.withdrawn_request", "{request}",
        "Requests the caller withdrew (cancelled, ended, or read while switched off), by reason",
    ),
    _counter(
        "after_withdrawal", "batch.reply_after_withdrawal", "{response}",
        "Replies for ids the caller had withdrawn moments before (not unknown ids)",
        pairing=True,
    ),
    _counter(
        "unchecked", "batch.unchecked_request", "{request}",
        "Requests whose reply pairwatch could not check (past its body caps), by reason",
    ),
    _counter(
        "unknown", "batch.unknown_id_response", "{response}",
        "Responses whose id matched nothing pending",
        pairing=True, short="unknown_id", words="unknown-id responses",
    ),
    _counter(
        "null", "batch.null_id_response", "{response}", "Responses with a null or absent id",
        pairing=True, short="null_id", words="null-id responses",
    ),
    _counter(
        "mismatch", "batch.response_count_mismatch", "{batch}",
        "Batches whose non-null-id response count != requests",
        pairing=True, short="count_mismatch", words="count-mismatch batches",
    ),
    _counter(
        "duplicate", "batch.duplicate_id", "{request}",
        "Requests sent with an id that was already pending",
        pairing=True, short="duplicate_id", words="duplicate ids sent",
    ),
    _counter(
        "invalid", "batch.invalid_response", "{response}",
        "Received elements that break the response rules",
        pairing=True, short="invalid_response", words="invalid responses",
    ),
    _counter(
        "invalid_request", "batch.invalid_request", "{request}",
        "Sent elements that break or bend the request rules",
        pairing=True, short="invalid_request",
    ),
    _counter(
        "out_of_order", "batch.out_of_order", "{batch}",
        "Batches answered in another order than sent",
        pairing=True, short="out_of_order", words="out-of-order batches",
    ),
    _counter(
        "violation", "batch.protocol_violation", "{event}",
        "Replies where none was allowed, and similar",
        pairing=True, short="protocol_violation", words="protocol violations",
    ),
    _counter(
        "late", "batch.late_response", "{response}",
        "Replies for ids that closed as missing by timeout",
        pairing=True,
    ),
    Instrument(
        "lateness", "batch.response_lateness", "histogram", "s",
        "How long after its timeout a late reply came",
        buckets=LATENCY_BUCKETS,
    ),
    _counter(
        "repaired", "batch.repaired", "{change}",
        "Changes repair mode made to a batch reply, by action",
    ),
    _counter(
        "internal_errors", "pairwatch.internal_errors", "{error}",
        "Failures inside pairwatch, kept from the client",
        short="internal_errors",
    ),
)  # fmt: skip

BY_KEY: Final = {i.key: i for i in INSTRUMENTS}
BY_NAME: Final = {i.name: i for i in INSTRUMENTS}
