"""Write an audit's counters in the Prometheus text exposition format.

For a Pushgateway (``curl --data-binary @file``) or a node-exporter textfile collector.  The
metric names are those of ``docs/metrics.md`` (``batch_unknown_id_response_total``...), with
the OpenTelemetry attributes as labels plus ``capture`` (the file audited), so audit series
sit next to live series on the same dashboards and only differ by ``pairwatch_integration``
(``audit``) and ``capture``.  Uses prometheus_client's own registry and atomic
``write_to_textfile`` so a collector never reads a half-written file.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from prometheus_client import CollectorRegistry, write_to_textfile
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from pairwatch.audit.feed import FileAudit
from pairwatch.audit.metrics import points
from pairwatch.otel.vocabulary import BY_NAME, label_name, prometheus_name


def _family(instrument: str) -> str:
    """The family name through the vocabulary's one translation (with the row's unit)."""
    row = BY_NAME.get(instrument)
    return row.family if row is not None else prometheus_name(instrument)


class AuditCollector(Collector):
    """Exposes the exported OpenTelemetry points of audited files as Prometheus families."""

    def __init__(self, audits: Sequence[FileAudit]) -> None:
        self._audits = audits

    def collect(self) -> Iterable[Metric]:
        families: dict[str, Metric] = {}
        for audit in self._audits:
            for p in points(audit.reader):
                labels = {
                    **{label_name(k): v for k, v in p.attrs.items()},
                    "capture": audit.path,
                }
                name = _family(p.name)
                if p.histogram is not None:
                    fam = families.get(name)
                    if fam is None:
                        fam = families[name] = Metric(name, p.help or p.name, "histogram")
                    h = p.histogram
                    cumulative = 0
                    bounds = [*map(float, h.explicit_bounds), float("inf")]
                    for bound, n in zip(bounds, h.bucket_counts, strict=True):
                        cumulative += n
                        le = {**labels, "le": _le(bound)}
                        fam.add_sample(name + "_bucket", le, float(cumulative))
                    fam.add_sample(name + "_count", labels, float(h.count))
                    fam.add_sample(name + "_sum", labels, float(h.sum))
                else:
                    fam = families.get(name)
                    if fam is None:
                        fam = families[name] = Metric(name, p.help or p.name, "counter")
                    fam.add_sample(name + "_total", labels, p.value)
        return [families[k] for k in sorted(families)]


def _le(bound: float) -> str:
    """Prometheus spelling of a bucket bound: ``+Inf``, ``0.25``, ``1.0``."""
    return "+Inf" if bound == float("inf") else repr(float(bound))


def write(path: str, audits: Sequence[FileAudit]) -> None:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(AuditCollector(audits))
    write_to_textfile(path, registry)
