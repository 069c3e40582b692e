"""Everything that knows OpenTelemetry and Prometheus: instrument and span names, bounded
label sets, span building, the SDK fast path, deferred recording and the exposition.

It reads the pairing core's closed-batch records (:mod:`pairwatch.pairing.records`) and
never the other way round.  The modules are internal, except
:mod:`~pairwatch.otel.exposition` (serve the metrics for Prometheus), the instrument table in
:mod:`~pairwatch.otel.vocabulary` and the attribute names and bounds in
:mod:`~pairwatch.otel.names`, which are the contract that ``docs/metrics.md``, the dashboards
and the alert rules read.
"""
