"""The pairwatch alert rules as data, rendered to dashboards/rules/pairwatch-alerts.yaml.

Why the rules are generated instead of hand-written: every alert links to its runbook section,
and the base of that link depends on where an operator hosts the runbook. One option of the
generator (`--runbook-url BASE`) must change the alerts and the dashboard's panel links alike,
and every threshold has to be stated once so the runbook table, the rule and its unit tests
cannot drift apart (tests/dashboards/test_dashboard_rules.py compares them).

How the rules decide (the issue behind them: alerts that paged the wrong side on co-occurring
counters, and paged critical on one event among 10^4 requests):

* Blame comes from pairwatch's per-batch diagnosis (`batch_closed_total{pairwatch_diagnosis}`),
  which is decided from what pairwatch saw on the wire, not from two counters moving together.
  Late replies are the exception: one usually arrives after the batch it belongs to closed at
  its timeout, so it closes no batch; their alert reads `batch_late_response_total`, which
  counts nothing but late replies.
* Every alert needs a share of traffic *and* a minimum number of events in its window, so one
  stray event on a busy job and two timeouts on an idle job page nobody.
* The window (5m) is never longer than `for:`. A burst leaves the window after 5m, so an alert
  whose `for:` is at least the window only fires on faults that keep happening.
* Series are summed per job / transport / server / side and nothing else. `pairwatch_side` does
  not exist yet; grouping by it now keeps client-side and server-side counts apart the day it
  does (a missing label groups as empty). `pairwatch_integration="audit"` series come from
  offline captures (`pairwatch audit --prometheus`), not live traffic, and are left out.

Standard library only; the YAML is written by hand so the committed file keeps its comments
and reads well in review.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# The committed default: the runbook's path in this repository. It is relative on purpose
# (there is no canonical public host); `generate.py --runbook-url BASE` replaces it.
DEFAULT_RUNBOOK_URL = "dashboards/runbook.md"

WINDOW = "5m"
BY_LABELS = ("job", "pairwatch_transport", "server_address", "pairwatch_side")
BY = ", ".join(BY_LABELS)
LIVE = 'pairwatch_integration!="audit"'

TARGET_SUMMARY = "({{ $labels.job }}, {{ $labels.pairwatch_transport }})"
FOR_BY_SEVERITY = {"critical": "5m", "warning": "15m", "info": "30m"}


@dataclass(frozen=True)
class DiagnosisAlert:
    """An alert on the share of closed batches that got one diagnosis."""

    name: str
    diagnosis: str
    severity: str
    min_batches: int
    min_share: float
    summary: str
    meaning: str

    @property
    def for_(self) -> str:
        return FOR_BY_SEVERITY[self.severity]


@dataclass(frozen=True)
class Rule:
    """One rendered alerting rule."""

    name: str
    expr: str
    for_: str
    severity: str
    summary: str
    description: str
    runbook_anchor: str
    comment: str = ""
    extra_labels: dict[str, str] = field(default_factory=dict)


DIAGNOSIS_ALERTS: tuple[DiagnosisAlert, ...] = (
    DiagnosisAlert(
        "PairwatchClientDuplicateIds",
        "client_duplicate_ids",
        "critical",
        min_batches=5,
        min_share=0.001,
        summary="The client sends JSON-RPC ids that are still pending",
        meaning=(
            "the client sent an id that was already pending (or reused the id of a request "
            "that had just timed out), so one caller can receive another caller's result"
        ),
    ),
    DiagnosisAlert(
        "PairwatchMalformedRequestElements",
        "malformed_request_element",
        "warning",
        min_batches=5,
        min_share=0.005,
        summary="The client sends batch elements that are not valid requests",
        meaning=(
            "pairwatch saw an invalid element in the request body and the server answered it "
            "with id null, so the caller of that element gets no result"
        ),
    ),
    DiagnosisAlert(
        "PairwatchIdTypeMismatch",
        "id_type_mismatch",
        "warning",
        min_batches=5,
        min_share=0.005,
        summary="The server echoes JSON-RPC ids with another type",
        meaning=(
            'the server answered a pending id under another JSON type ("0" for 0), so a client '
            "that looks ids up strictly never pairs the reply"
        ),
    ),
    DiagnosisAlert(
        "PairwatchServerNullIds",
        "server_null_id",
        "warning",
        min_batches=5,
        min_share=0.005,
        summary="The server answers valid requests with id null",
        meaning=(
            "every request element was valid, yet the server answered with id null; it failed "
            "to echo the id, so the caller cannot be given its reply"
        ),
    ),
    DiagnosisAlert(
        "PairwatchServerIdEchoFault",
        "server_id_echo_fault",
        "warning",
        min_batches=5,
        min_share=0.005,
        summary="The server answers with ids nobody sent",
        meaning=(
            "replies carried ids that matched nothing pending, with no client duplicate, type "
            "change or timeout to explain them, so the server (or a proxy) rewrote or invented ids"
        ),
    ),
)

# Missing responses as a share of requests sent (any diagnosis): what callers suffer.
MISSING_MIN_SHARE = 0.05
MISSING_MIN_COUNT = 10
# Late replies (for ids a timeout had already closed as missing) as a share of requests sent.
# Not a diagnosis alert: on a stream channel a late reply reaches a batch that is already
# closed, so it is counted in batch_late_response_total (and batch_response_lateness_seconds)
# but closes no batch as late_response; an alert on that diagnosis almost never fired.
LATE_MIN_SHARE = 0.005
LATE_MIN_COUNT = 5
# The two highest finite bounds of batch_response_lateness_seconds (pairwatch.otel.names.
# LATENCY_BUCKETS; a test keeps them equal). histogram_quantile(1, ...) answers the top bound
# both for the last finite bucket and for +Inf, so that answer only says "more than" the one
# below it.
LATENESS_TOP_BOUND = 30.0
LATENESS_BELOW_TOP = 10.0
# Count mismatch: informational, folded under the diagnosis alerts by the inhibit rules.
MISMATCH_MIN_SHARE = 0.01
MISMATCH_MIN_COUNT = 5


def _target_matchers() -> str:
    """PromQL matchers for one alert's target, filled in by the Go template from its labels
    (indexed verbs, so one query can name the target twice)."""
    return ", ".join(f"{label}=%[{i}]q" for i, label in enumerate(BY_LABELS, start=1))


def _template_query(expr: str, fmt: str, *, show: str = "") -> str:
    """A Go-template snippet that runs `expr` (with %q placeholders for the target labels)
    and prints its first value with `fmt`, or with `show` set, the template text `show`
    (`.` is then the first sample): the annotations quote the evidence this way."""
    labels = " ".join(f"$labels.{label}" for label in BY_LABELS)
    body = show or "{{ value . | " + fmt + " }}"
    return (
        "{{ with printf `"
        + expr
        + "` "
        + labels
        + " | query }}{{ with first . }}"
        + body
        + "{{ end }}{{ end }}"
    )


def _increase(metric: str, extra: str = "") -> str:
    matchers = LIVE + (", " + extra if extra else "")
    return f"sum by ({BY}) (increase({metric}{{{matchers}}}[{WINDOW}]))"


def _increase_at_target(metric: str, extra: str = "") -> str:
    matchers = _target_matchers() + ", " + LIVE + (", " + extra if extra else "")
    return f"sum(increase({metric}{{{matchers}}}[{WINDOW}]))"


def _count_and_share(count: str, total: str, min_count: int, min_share: float) -> str:
    """Fires where ``count`` reaches ``min_count`` events and ``min_share`` of ``total``,
    per target: one event on a busy job, or a few on an idle one, pages nobody."""
    return (
        f"(\n  {count}\n  >= {min_count}\n)\n"
        f"and on ({BY})\n"
        f"(\n  {count}\n  /\n  {total}\n  >= {min_share:g}\n)"
    )


def percent(share: float) -> str:
    text = f"{share * 100:.2f}".rstrip("0").rstrip(".")
    return f"{text}%"


def _where() -> str:
    return (
        "(job {{ $labels.job }}, transport {{ $labels.pairwatch_transport }}, server "
        '"{{ $labels.server_address }}"{{ with $labels.pairwatch_side }}, counted on the {{ . }} '
        "side{{ end }})"
    )


def diagnosis_rule(alert: DiagnosisAlert) -> Rule:
    diag = f'pairwatch_diagnosis="{alert.diagnosis}"'
    count = _increase("batch_closed_total", diag)
    total = _increase("batch_closed_total")
    expr = _count_and_share(count, total, alert.min_batches, alert.min_share)
    closed = _template_query(_increase_at_target("batch_closed_total"), 'printf "%.0f"')
    share = _template_query(
        _increase_at_target("batch_closed_total", diag)
        + " / "
        + _increase_at_target("batch_closed_total"),
        "humanizePercentage",
    )
    description = (
        f'{{{{ $value | printf "%.0f" }}}} of {closed} batches closed in the last {WINDOW} '
        f"({share}) were diagnosed {alert.diagnosis} {_where()}: {alert.meaning}. Pages at "
        f"{alert.min_batches} batches and {percent(alert.min_share)} of batches, held for "
        f"{alert.for_}."
    )
    return Rule(
        name=alert.name,
        expr=expr,
        for_=alert.for_,
        severity=alert.severity,
        summary=f"{alert.summary} {TARGET_SUMMARY}",
        description=description,
        runbook_anchor=alert.name.lower(),
        comment=f"Evidence: batch_closed_total{{{diag}}}.",
    )


def missing_rule() -> Rule:
    missing = _increase("batch_missing_response_total")
    requests = _increase("batch_requests_total")
    expr = _count_and_share(missing, requests, MISSING_MIN_COUNT, MISSING_MIN_SHARE)
    sent = _template_query(_increase_at_target("batch_requests_total"), 'printf "%.0f"')
    share = _template_query(
        _increase_at_target("batch_missing_response_total")
        + " / "
        + _increase_at_target("batch_requests_total"),
        "humanizePercentage",
    )
    by_reason = (
        "topk(1, sum by (pairwatch_close_reason) (increase(batch_missing_response_total{"
        + _target_matchers()
        + ", "
        + LIVE
        + f"}}[{WINDOW}])))"
    )
    reason = _template_query(
        by_reason,
        "",
        show='; largest close reason: {{ label "pairwatch_close_reason" . }} '
        '({{ value . | printf "%.0f" }})',
    )
    description = (
        f'{{{{ $value | printf "%.0f" }}}} of {sent} requests sent in the last {WINDOW} '
        f"({share}) got no response before their batch closed {_where()}{reason}. Those "
        f"callers got nothing back. Pages at {MISSING_MIN_COUNT} missing and "
        f"{percent(MISSING_MIN_SHARE)} of requests, held for {FOR_BY_SEVERITY['critical']}; "
        "the close-reason and diagnosis panels say more."
    )
    return Rule(
        name="PairwatchMissingResponses",
        expr=expr,
        for_=FOR_BY_SEVERITY["critical"],
        severity="critical",
        summary="JSON-RPC requests get no response " + TARGET_SUMMARY,
        description=description,
        runbook_anchor="pairwatchmissingresponses",
        comment="Impact, whatever the cause: requests still pending when their batch closed.",
    )


def late_rule(min_count: int = LATE_MIN_COUNT, min_share: float = LATE_MIN_SHARE) -> Rule:
    """Late replies against requests sent, from the late counter itself.

    Why requests and not batches: a late reply is counted where it arrives (often no batch at
    all), so the only denominator every channel shares is what the client sent. The
    thresholds are parameters so a test can move them and watch the threshold tests fail.
    """
    late = _increase("batch_late_response_total")
    requests = _increase("batch_requests_total")
    expr = _count_and_share(late, requests, min_count, min_share)
    sent = _template_query(_increase_at_target("batch_requests_total"), 'printf "%.0f"')
    share = _template_query(
        _increase_at_target("batch_late_response_total")
        + " / "
        + _increase_at_target("batch_requests_total"),
        "humanizePercentage",
    )
    # `>= 0` drops the NaN an empty window gives, so the sentence is left out, never wrong.
    buckets = (
        "histogram_quantile(1, sum by (le) (increase(batch_response_lateness_seconds_bucket{"
        + _target_matchers()
        + ", "
        + LIVE
        + f"}}[{WINDOW}]))) >= 0"
    )
    worst = _template_query(
        buckets,
        "",
        show=f"; the latest came {{{{ if lt (value .) {LATENESS_TOP_BOUND:.1f} }}}}at most "
        "{{ value . | humanizeDuration }}{{ else }}more than "
        f"{LATENESS_BELOW_TOP:g}s{{{{ end }}}} after its timeout",
    )
    description = (
        f'{{{{ $value | printf "%.0f" }}}} late replies to {sent} requests sent in the last '
        f"{WINDOW} ({share}) {_where()}: they came for ids that had already closed as missing "
        f"by timeout{worst}. The server is slower than the client's timeout, and those "
        f"callers already got a timeout. Pages at {min_count} late replies and "
        f"{percent(min_share)} of requests, held for {FOR_BY_SEVERITY['warning']}."
    )
    return Rule(
        name="PairwatchLateResponses",
        expr=expr,
        for_=FOR_BY_SEVERITY["warning"],
        severity="warning",
        summary="The server answers after the client's timeout " + TARGET_SUMMARY,
        description=description,
        runbook_anchor="pairwatchlateresponses",
        comment=(
            "Evidence: batch_late_response_total (a late reply on a stream closes no batch as "
            "late_response)."
        ),
    )


def mismatch_rule() -> Rule:
    mismatch = _increase("batch_response_count_mismatch_total")
    closed = _increase("batch_closed_total")
    expr = _count_and_share(mismatch, closed, MISMATCH_MIN_COUNT, MISMATCH_MIN_SHARE)
    total = _template_query(_increase_at_target("batch_closed_total"), 'printf "%.0f"')
    description = (
        f'{{{{ $value | printf "%.0f" }}}} of {total} batches closed in the last {WINDOW} got '
        f"a number of non-null-id responses different from the requests they sent {_where()}. "
        "pairwatch still pairs by id; a client that pairs by position hands out wrong results "
        f"here. Info only (at {MISMATCH_MIN_COUNT} batches and {percent(MISMATCH_MIN_SHARE)}, "
        f"held for {FOR_BY_SEVERITY['info']}); silenced while a diagnosis alert names the cause."
    )
    return Rule(
        name="PairwatchResponseCountMismatch",
        expr=expr,
        for_=FOR_BY_SEVERITY["info"],
        severity="info",
        summary="JSON-RPC batches answered with the wrong number of responses " + TARGET_SUMMARY,
        description=description,
        runbook_anchor="pairwatchresponsecountmismatch",
        comment="Folded in: the inhibit rules silence it while another pairwatch alert fires.",
    )


def all_rules() -> list[Rule]:
    return [
        *(diagnosis_rule(a) for a in DIAGNOSIS_ALERTS),
        late_rule(),
        missing_rule(),
        mismatch_rule(),
    ]
