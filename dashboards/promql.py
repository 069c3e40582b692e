"""The PromQL the dashboard sends: selectors, recording-rule names and the batch-size quantile.

Kept apart from the panel layout (panels.py) so the expressions can be checked on their own:
tests/dashboards/test_dashboard_promql.py runs the batch-size quantile through promtool.
Standard library only.
"""

from __future__ import annotations

# Label matchers every query carries (the template variables). instance is a scrape label,
# present on every series, so it can filter every panel.
TARGET_SEL = 'job=~"$job", instance=~"$instance"'
SIDE = 'pairwatch_side=~"$side"'
SEL = TARGET_SEL + ', pairwatch_transport=~"$transport", server_address=~"$server", ' + SIDE
# The SLO recording rules (src/pairwatch/alerting/rules.py) are per job, server and side only:
# instance and transport are summed away there, so those two variables cannot apply to them.
SLO_SEL = 'job=~"$job", server_address=~"$server", ' + SIDE
# The labels the recording rules keep: the alerts sum pairwatch_transport away as well (one
# page per fault, src/pairwatch/alerting/rules.py); a line here names one transport of it.
BY = "job, pairwatch_transport, server_address, server_port, pairwatch_side"
# The top row's grouping: one line per job and side (the issue: "a top row per job and side").
JOB_SIDE = "job, pairwatch_side"

# Recording rule names (dashboards/rules/pairwatch-recording.yaml).
R_REQUESTS = "target:batch_requests:rate5m"
R_UNKNOWN = "target:batch_unknown_id_response:rate5m"
R_NULL = "target:batch_null_id_response:rate5m"
R_LATE = "target:batch_late_response:rate5m"
R_MISSING = "target_method_reason:batch_missing_response:rate5m"
R_WITHDRAWN = "target_reason:batch_withdrawn_request:rate5m"
R_MISMATCH = "target:batch_response_count_mismatch:rate5m"
R_OUT_OF_ORDER = "target:batch_out_of_order:rate5m"
R_CLOSED = "target_diagnosis_reason:batch_closed:rate5m"
R_DUPLICATE = "target_scope:batch_duplicate_id:rate5m"
R_INVALID = "target_reason:batch_invalid_response:rate5m"
R_SIZE = "target_le:batch_size_bucket:rate5m"
R_LATENCY = "target_method_le:batch_pair_latency_seconds_bucket:rate5m"
R_LATENESS = "target_le:batch_response_lateness_seconds_bucket:rate5m"
R_LOST = "server_address:batch_lost_in_transit:increase5m"
R_LOST_SHARE = "server_address:batch_lost_in_transit_share:ratio5m"
# Raw series, read where a recording rule cannot serve: exemplars are stored on scraped
# series only, never on a rule's output.
LATENCY_BUCKET = "batch_pair_latency_seconds_bucket"
LIVE = 'pairwatch_integration!="audit"'

NOT_OK = 'pairwatch_diagnosis!="ok"'
METHOD = 'rpc_method=~"$method"'

# Batch-size boundaries the quantile looks for. Batch sizes are mostly powers of two, so the
# wanted layout of `batch.size` is 1, 2, 4, ... 8192; the 1-2-5 layout pairwatch exported
# before is listed too, so the panel is right with either (a boundary an exporter does not
# have selects nothing and drops out of the `or` chain).
POWERS_OF_TWO = tuple(2**k for k in range(14))
ONE_TWO_FIVE = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 5000, 10000)
SIZE_BOUNDS = tuple(sorted(set(POWERS_OF_TWO) | set(ONE_TWO_FIVE)))


def sel(extra: str = "", base: str = SEL) -> str:
    """The template-variable matchers, plus `extra` matchers if given."""
    return "{" + base + (", " + extra if extra else "") + "}"


def le_value(bound: float) -> str:
    """How exporters write a boundary in `le`: the Python/Go float text ("8.0")."""
    return repr(float(bound))


def bucket_upper_bound_quantile(q: float, series: str, matchers: str = SEL) -> str:
    """The upper boundary of the bucket holding quantile `q`.

    Why not histogram_quantile: it interpolates inside the bucket, so batches that are
    always 8 elements (bucket 5..10) showed a p50 of 7.5. A batch size is a count, and the
    honest statement a histogram supports is "q of the batches had at most N elements" for
    N a boundary. Each term below keeps its boundary only where the share of observations at
    or under it reaches q; `or` keeps the leftmost present term, and the terms go up, so the
    result is the smallest such boundary: 8 for always-8 batches when 8 is a boundary.
    """
    total = f'sum by () ({series}{{{matchers}, le="+Inf"}})'
    terms = [
        f'(sum by () ({series}{{{matchers}, le="{le_value(b)}"}}) / {total} >= {q:g}) * 0 + {b}'
        for b in SIZE_BOUNDS
    ]
    return "\n or ".join(terms)


# One server seen from both ends (panels_sides.py): the client's books against its own.
SIDE_BY = "server_address, pairwatch_side"
