"""The pairwatch alert and SLO recording rules as data, for one configuration.

Why generated instead of hand-written: the rules depend on choices only the operator can make
(which series, which grouping labels, which objective, where the runbook and dashboard live),
so `pairwatch dashboards export` renders them per configuration like a monitoring mixin, and
every threshold is stated once here so the runbook, the rules and their promtool tests cannot
drift apart (tests/dashboards/test_dashboard_rules.py compares them). Standard library only,
so a pip-installed pairwatch can export without the dashboard extras.

How the rules decide:

* **Missing replies are an SLO.** Requests answered over requests sent minus withdrawn and
  unchecked ones (neither is missing), with multi-window multi-burn-rate alerts (the Google
  SRE workbook's 14.4x 1h/5m and 6x 6h/30m pages, 3x 1d/2h and 1x 3d/6h tickets). The
  missing counter carries the close reason, not the batch diagnosis, so the budget is split
  by the side each close reason blames (blame.py), and a client's duplicate ids are taken
  off the server's share: a reused id the server answers once leaves one reply missing at
  body or stream end, and each duplicate can explain at most one. A quiet job that loses
  every reply pages through its own rule, since a burn rate needs traffic to be trusted.
* **Blame comes from evidence**: per-batch diagnoses (`batch_closed_total{pairwatch_diagnosis}`)
  and close reasons, never from two counters moving together. Every alert carries a `blame`
  label an Alertmanager routes on, and its name and summary speak only of that side.
* **One fault, one page**: series are summed per grouping labels (job by default, plus e.g.
  cluster and namespace), server and side, never per transport or instance.
* **Liveness** only for jobs that exported pairwatch series in the last day, so a job that
  never had pairwatch never pages.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from pairwatch.alerting import blame as b

# The committed default: the runbook's path in this repository. It is relative on purpose
# (there is no canonical public host); `dashboards export --runbook-url URL` replaces it.
DEFAULT_RUNBOOK_URL = "dashboards/runbook.md"

WINDOW = "5m"
LIVE = 'pairwatch_integration!="audit"'
DEFAULT_GROUP_BY = ("job",)
DEFAULT_OBJECTIVE = 0.999
FOR_BY_SEVERITY = {"critical": "5m", "warning": "15m", "info": "30m"}

_UNITS = (("d", 86400), ("h", 3600), ("m", 60), ("s", 1))


def seconds(duration: str) -> int:
    """``"1h"`` -> 3600: the Prometheus durations these rules use (one unit each)."""
    for unit, size in _UNITS:
        if duration.endswith(unit):
            return int(duration[: -len(unit)]) * size
    raise ValueError(f"not a duration: {duration!r}")


def duration(total: float) -> str:
    """3600 -> ``"1h"``: the largest unit that divides ``total`` (rounded to a second)."""
    whole = max(1, round(total))
    for unit, size in _UNITS:
        if whole % size == 0:
            return f"{whole // size}{unit}"
    raise AssertionError(whole)  # pragma: no cover  (seconds always divide)


@dataclass(frozen=True)
class Config:
    """What an operator chooses, as the flags of `pairwatch dashboards export` give it.

    ``selector`` is extra PromQL matchers for every pairwatch series (``job=~"api.*"``);
    ``group_by`` the labels a fault is one page per, always ending with ``job`` (cluster and
    namespace keep two clusters with one job name apart); ``time_scale`` shrinks every window
    and ``for:`` by the same factor, only so the end-to-end test can watch the real rules
    fire in minutes (the recording rule names keep their nominal windows).
    """

    selector: str = ""
    group_by: tuple[str, ...] = DEFAULT_GROUP_BY
    objective: float = DEFAULT_OBJECTIVE
    runbook_url: str | None = DEFAULT_RUNBOOK_URL
    dashboard_url: str | None = None
    scrape_alert: bool = True
    time_scale: float = 1.0

    @property
    def by_labels(self) -> tuple[str, ...]:
        """One page per (grouping labels, server, side): not per transport or instance."""
        return (*self.group_by, "server_address", "pairwatch_side")

    @property
    def by(self) -> str:
        return ", ".join(self.by_labels)

    @property
    def group(self) -> str:
        return ", ".join(self.group_by)

    @property
    def budget(self) -> float:
        """The share of requests allowed to go unanswered (0.001 for 99.9%)."""
        return round(1.0 - self.objective, 12)

    def matchers(self, extra: str = "") -> str:
        """Every selector of these rules: live series, the operator's selector, ``extra``."""
        return ", ".join(part for part in (LIVE, self.selector, extra) if part)

    def window(self, nominal: str) -> str:
        """A window or ``for:`` as evaluated: ``nominal`` times ``time_scale``."""
        if self.time_scale == 1.0:
            return nominal
        return duration(seconds(nominal) * self.time_scale)

    def window_seconds(self, nominal: str) -> int:
        return seconds(self.window(nominal))


def group_by_labels(extra: Sequence[str]) -> tuple[str, ...]:
    """The grouping labels for ``--group-by cluster,namespace``: those, then ``job``."""
    labels = [label for label in extra if label and label != "job"]
    return (*dict.fromkeys(labels), "job")


DEFAULT = Config()


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

    @property
    def blame(self) -> str:
        return b.BY_DIAGNOSIS[self.diagnosis]


@dataclass(frozen=True)
class Rule:
    """One rendered alerting rule."""

    name: str
    expr: str
    for_: str
    severity: str
    blame: str
    summary: str
    description: str
    runbook_anchor: str
    comment: str = ""
    extra_labels: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Record:
    """One recording rule."""

    record: str
    expr: str
    labels: dict[str, str] = field(default_factory=dict)


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
# lost_in_transit (client's missing minus the server's own, both sides instrumented).
TRANSIT_MIN_SHARE = 0.005
TRANSIT_MIN_COUNT = 5


@dataclass(frozen=True)
class Burn:
    """One multi-window burn-rate condition: the error ratio above ``factor`` times the
    budget over both the long and the short window (the short one makes it stop soon after
    the fault does)."""

    factor: float
    long: str
    short: str


# The Google SRE workbook's multiwindow, multi-burn-rate alerts (as Sloth and Pyrra
# generate them): a page spends 2% of a 30-day budget in 1h or 5% in 6h; a ticket 10% in 3d.
PAGE_BURNS = (Burn(14.4, "1h", "5m"), Burn(6, "6h", "30m"))
TICKET_BURNS = (Burn(3, "1d", "2h"), Burn(1, "3d", "6h"))
SLO_WINDOWS = ("5m", "30m", "1h", "2h", "6h", "1d", "3d")
PAGE_FOR = "2m"
TICKET_FOR = "15m"
# A burn rate from a handful of requests is noise: two timeouts among 72 requests in an hour
# read as 2.8%. The long window must also hold this many missing replies.
BURN_MIN_ERRORS = 10
# A quiet job that loses everything: no reply paired and at least this many missing in the
# window, whatever its request rate.
QUIET_WINDOW = "30m"
QUIET_MIN_MISSING = 3
QUIET_FOR = "5m"
# Liveness.
PRESENT_WINDOW = "1d"  # a job that exported pairwatch series within it is expected to
ABSENT_FOR = "10m"
DROP_WINDOW = "1h"
DROP_BASELINE = "1d"
DROP_SHARE = 0.5  # under half of both the same hour yesterday and the last day's mean
DROP_MIN_BASELINE_PER_HOUR = 60  # jobs quieter than a request a minute are left alone
DROP_FOR = "30m"
SCRAPE_FOR = "5m"
INTERNAL_WINDOW = "30m"
INTERNAL_FOR = "5m"

# Recording rule names (Prometheus level:metric:operations). Issue 43's dashboard reads them.
LEVEL = "job_server_side"
REQUESTS_RATE = LEVEL + ":pairwatch_slo_requests:rate{w}"
ERRORS_RATE = LEVEL + "_blame:pairwatch_slo_errors:rate{w}"
ERRORS_RATIO = LEVEL + "_blame:pairwatch_slo_errors:ratio_rate{w}"
TOTAL_RATIO = LEVEL + ":pairwatch_slo_errors:ratio_rate{w}"
OBJECTIVE_RATIO = LEVEL + ":pairwatch_slo_objective:ratio"
# The dashboard's "error budget left" reads the longest window recorded: a 30-day budget
# would need 30 days of rate() per evaluation, which these rules do not pay for.
BUDGET_WINDOW = SLO_WINDOWS[-1]

# What each budget-spending side's alerts are called and say.
SLO_SIDES: dict[str, tuple[str, str, str]] = {
    # blame: (name stem, summary, what it means)
    b.SERVER: (
        "PairwatchServerOmitsReplies",
        "The server leaves requests unanswered",
        "the server ended its reply body or stream without answering them",
    ),
    b.SERVER_OR_NETWORK: (
        "PairwatchServerOrNetworkLosesReplies",
        "Requests get no reply: the server hangs or cannot be reached",
        "their connection broke, timed out or failed before any reply, so the server hung, "
        "died or was unreachable (the client's books cannot tell which)",
    ),
}


def _target_matchers(cfg: Config) -> str:
    """PromQL matchers for one alert's target, filled in by the Go template from its labels
    (indexed verbs, so one query can name the target twice)."""
    return ", ".join(f"{label}=%[{i}]q" for i, label in enumerate(cfg.by_labels, start=1))


def _template_query(cfg: Config, expr: str, fmt: str, *, show: str = "") -> str:
    """A Go-template snippet that runs `expr` (with %q placeholders for the target labels)
    and prints its first value with `fmt`, or with `show` set, the template text `show`
    (`.` is then the first sample): the annotations quote the evidence this way."""
    labels = " ".join(f"$labels.{label}" for label in cfg.by_labels)
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


def _increase(cfg: Config, metric: str, extra: str = "") -> str:
    return f"sum by ({cfg.by}) (increase({metric}{{{cfg.matchers(extra)}}}[{cfg.window(WINDOW)}]))"


def _increase_at_target(cfg: Config, metric: str, extra: str = "") -> str:
    matchers = _target_matchers(cfg) + ", " + cfg.matchers(extra)
    return f"sum(increase({metric}{{{matchers}}}[{cfg.window(WINDOW)}]))"


def _count_and_share(by: str, count: str, total: str, min_count: int, min_share: float) -> str:
    """Fires where ``count`` reaches ``min_count`` events and ``min_share`` of ``total``,
    per target: one event on a busy job, or a few on an idle one, pages nobody."""
    return (
        f"(\n  {count}\n  >= {min_count}\n)\n"
        f"and on ({by})\n"
        f"(\n  {count}\n  /\n  {total}\n  >= {min_share:g}\n)"
    )


def percent(share: float) -> str:
    text = f"{share * 100:.3f}".rstrip("0").rstrip(".")
    return f"{text}%"


def _job(cfg: Config) -> str:
    """The grouping labels of a page, in words (``job api`` or ``cluster eu, job api``)."""
    return ", ".join(f"{label} {{{{ $labels.{label} }}}}" for label in cfg.group_by)


def _where(cfg: Config) -> str:
    return (
        f'({_job(cfg)}, server "{{{{ $labels.server_address }}}}"'
        "{{ with $labels.pairwatch_side }}, counted on the {{ . }} side{{ end }})"
    )


TARGET_SUMMARY = "({{ $labels.job }}, {{ $labels.server_address }})"


def diagnosis_rule(alert: DiagnosisAlert, cfg: Config = DEFAULT) -> Rule:
    diag = f'pairwatch_diagnosis="{alert.diagnosis}"'
    count = _increase(cfg, "batch_closed_total", diag)
    total = _increase(cfg, "batch_closed_total")
    expr = _count_and_share(cfg.by, count, total, alert.min_batches, alert.min_share)
    closed = _template_query(cfg, _increase_at_target(cfg, "batch_closed_total"), 'printf "%.0f"')
    share = _template_query(
        cfg,
        _increase_at_target(cfg, "batch_closed_total", diag)
        + " / "
        + _increase_at_target(cfg, "batch_closed_total"),
        "humanizePercentage",
    )
    description = (
        f'{{{{ $value | printf "%.0f" }}}} of {closed} batches closed in the last {WINDOW} '
        f"({share}) were diagnosed {alert.diagnosis} {_where(cfg)}: {alert.meaning}. Pages at "
        f"{alert.min_batches} batches and {percent(alert.min_share)} of batches, held for "
        f"{alert.for_}."
    )
    return Rule(
        name=alert.name,
        expr=expr,
        for_=cfg.window(alert.for_),
        severity=alert.severity,
        blame=alert.blame,
        summary=f"{alert.summary} {TARGET_SUMMARY}",
        description=description,
        runbook_anchor=alert.name.lower(),
        comment=f"Evidence: batch_closed_total{{{diag}}}.",
    )


def late_rule(
    cfg: Config = DEFAULT, min_count: int = LATE_MIN_COUNT, min_share: float = LATE_MIN_SHARE
) -> Rule:
    """Late replies against requests sent, from the late counter itself.

    Why requests and not batches: a late reply is counted where it arrives (often no batch at
    all), so the only denominator every channel shares is what the client sent. The
    thresholds are parameters so a test can move them and watch the threshold tests fail.
    """
    late = _increase(cfg, "batch_late_response_total")
    requests = _increase(cfg, "batch_requests_total")
    expr = _count_and_share(cfg.by, late, requests, min_count, min_share)
    sent = _template_query(cfg, _increase_at_target(cfg, "batch_requests_total"), 'printf "%.0f"')
    share = _template_query(
        cfg,
        _increase_at_target(cfg, "batch_late_response_total")
        + " / "
        + _increase_at_target(cfg, "batch_requests_total"),
        "humanizePercentage",
    )
    # `>= 0` drops the NaN an empty window gives, so the sentence is left out, never wrong.
    buckets = (
        "histogram_quantile(1, sum by (le) (increase(batch_response_lateness_seconds_bucket{"
        + _target_matchers(cfg)
        + ", "
        + cfg.matchers()
        + f"}}[{cfg.window(WINDOW)}]))) >= 0"
    )
    worst = _template_query(
        cfg,
        buckets,
        "",
        show=f"; the latest came {{{{ if lt (value .) {LATENESS_TOP_BOUND:.1f} }}}}at most "
        "{{ value . | humanizeDuration }}{{ else }}more than "
        f"{LATENESS_BELOW_TOP:g}s{{{{ end }}}} after its timeout",
    )
    description = (
        f'{{{{ $value | printf "%.0f" }}}} late replies to {sent} requests sent in the last '
        f"{WINDOW} ({share}) {_where(cfg)}: they came for ids that had already closed as "
        f"missing by timeout{worst}. The server is slower than the client's timeout, and those "
        f"callers already got a timeout. Pages at {min_count} late replies and "
        f"{percent(min_share)} of requests, held for {FOR_BY_SEVERITY['warning']}."
    )
    return Rule(
        name="PairwatchLateResponses",
        expr=expr,
        for_=cfg.window(FOR_BY_SEVERITY["warning"]),
        severity="warning",
        blame=b.BY_DIAGNOSIS["late_response"],
        summary="The server answers too late, after the timeout " + TARGET_SUMMARY,
        description=description,
        runbook_anchor="pairwatchlateresponses",
        comment=(
            "Evidence: batch_late_response_total (a late reply on a stream closes no batch as "
            "late_response)."
        ),
    )


def mismatch_rule(cfg: Config = DEFAULT) -> Rule:
    mismatch = _increase(cfg, "batch_response_count_mismatch_total")
    closed = _increase(cfg, "batch_closed_total")
    expr = _count_and_share(cfg.by, mismatch, closed, MISMATCH_MIN_COUNT, MISMATCH_MIN_SHARE)
    total = _template_query(cfg, _increase_at_target(cfg, "batch_closed_total"), 'printf "%.0f"')
    description = (
        f'{{{{ $value | printf "%.0f" }}}} of {total} batches closed in the last {WINDOW} got '
        f"a number of non-null-id responses different from the requests they sent "
        f"{_where(cfg)}. pairwatch still pairs by id; a client that pairs by position hands "
        f"out wrong results here. Info only (at {MISMATCH_MIN_COUNT} batches and "
        f"{percent(MISMATCH_MIN_SHARE)}, held for {FOR_BY_SEVERITY['info']}); silenced while "
        "a diagnosis alert names the cause."
    )
    return Rule(
        name="PairwatchResponseCountMismatch",
        expr=expr,
        for_=cfg.window(FOR_BY_SEVERITY["info"]),
        severity="info",
        # Missing, extra or cut-short replies: the evidence alone cannot say which side.
        blame=b.SERVER_OR_NETWORK,
        summary="The server or the network returns the wrong number of responses " + TARGET_SUMMARY,
        description=description,
        runbook_anchor="pairwatchresponsecountmismatch",
        comment="Folded in: the inhibit rules silence it while another pairwatch alert fires.",
    )


# --- the availability SLO ------------------------------------------------------------------


def _rate(cfg: Config, metric: str, window: str, extra: str = "") -> str:
    return f"sum by ({cfg.by}) (rate({metric}{{{cfg.matchers(extra)}}}[{cfg.window(window)}]))"


def _or_zero(cfg: Config, series: str, like: str) -> str:
    """``series``, or 0 for every target of ``like`` that has none (an absent counter, e.g.
    unchecked requests before the first one, must not drop the target)."""
    return f"({series} or 0 * {like})"


def _reasons(blame: str) -> str:
    return "|".join(b.close_reasons(blame))


def slo_records(cfg: Config = DEFAULT) -> list[Record]:
    """The ratios the burn-rate alerts read, per window: requests that count, missing replies
    per blamed side, and their ratios (per side, and all sides together for dashboards)."""
    records: list[Record] = []
    for w in SLO_WINDOWS:
        requests = _rate(cfg, "batch_requests_total", w)
        withdrawn = _rate(cfg, "batch_withdrawn_request_total", w)
        unchecked = _rate(cfg, "batch_unchecked_request_total", w)
        records.append(
            Record(
                REQUESTS_RATE.format(w=w),
                f"{requests}\n- {_or_zero(cfg, withdrawn, requests)}\n"
                f"- {_or_zero(cfg, unchecked, requests)}",
            )
        )
        for side in b.BUDGET_SPENDERS:
            missing = _rate(
                cfg,
                "batch_missing_response_total",
                w,
                f'pairwatch_close_reason=~"{_reasons(side)}"',
            )
            if side == b.SERVER:
                # A reused id the server answers once ends its body or stream one reply
                # short: each duplicate the client sent excuses at most one such reply.
                dup = _rate(cfg, "batch_duplicate_id_total", w)
                missing = f"clamp_min(\n  {missing}\n  - {_or_zero(cfg, dup, missing)},\n  0\n)"
            records.append(Record(ERRORS_RATE.format(w=w), missing, {"blame": side}))
        records.append(
            Record(
                ERRORS_RATIO.format(w=w),
                f"{ERRORS_RATE.format(w=w)}\n/ on ({cfg.by}) group_left ()\n"
                f"{REQUESTS_RATE.format(w=w)}",
            )
        )
        records.append(
            Record(
                TOTAL_RATIO.format(w=w),
                f"sum by ({cfg.by}) ({ERRORS_RATE.format(w=w)})\n/ on ({cfg.by})\n"
                f"{REQUESTS_RATE.format(w=w)}",
            )
        )
    # The objective as a series, per target with traffic in the budget window: the shipped
    # dashboard is one JSON for every export, so it reads the objective from here instead of
    # carrying the default 99.9% in its queries.
    records.append(
        Record(
            OBJECTIVE_RATIO,
            f"0 * {REQUESTS_RATE.format(w=BUDGET_WINDOW)} + {cfg.objective:g}",
        )
    )
    return records


def _burn(cfg: Config, side: str, burn: Burn) -> str:
    sel = f'{{blame="{side}"}}'
    threshold = f"({burn.factor:g} * {cfg.budget:g})"
    return (
        f"(\n  {ERRORS_RATIO.format(w=burn.long)}{sel} > {threshold}\n"
        f"  and\n  {ERRORS_RATIO.format(w=burn.short)}{sel} > {threshold}\n"
        f"  and\n  {ERRORS_RATE.format(w=burn.long)}{sel} * {cfg.window_seconds(burn.long)}"
        f" >= {BURN_MIN_ERRORS}\n)"
    )


def burn_rule(side: str, page: bool, cfg: Config = DEFAULT) -> Rule:
    stem, summary, meaning = SLO_SIDES[side]
    burns = PAGE_BURNS if page else TICKET_BURNS
    name = stem + ("FastBurn" if page else "SlowBurn")
    objective = percent(cfg.objective)
    conditions = " or ".join(
        f"{burn.factor:g}x over {burn.long} and {burn.short}" for burn in burns
    )
    description = (
        f"{{{{ $value | humanizePercentage }}}} of requests got no reply over the last "
        f"{burns[0].long} (or {burns[1].long}) {_where(cfg)}: {meaning}. The objective is "
        f"{objective} answered, so this burns the error budget at {conditions} "
        f"(and at least {BURN_MIN_ERRORS} missing in the long window)."
        + (" Callers are failing now." if page else " Nothing urgent: plan a fix.")
    )
    return Rule(
        name=name,
        expr="\nor\n".join(_burn(cfg, side, burn) for burn in burns),
        for_=cfg.window(PAGE_FOR if page else TICKET_FOR),
        severity="critical" if page else "warning",
        blame=side,
        summary=f"{summary} {TARGET_SUMMARY}",
        description=description,
        runbook_anchor=name.lower(),
        comment=(
            f"Availability SLO ({objective}): missing replies whose close reason blames "
            f"{side}, over requests minus withdrawn and unchecked."
        ),
    )


def quiet_rule(side: str, cfg: Config = DEFAULT) -> Rule:
    stem, summary, meaning = SLO_SIDES[side]
    window = QUIET_WINDOW
    errors = ERRORS_RATE.format(w=window) + f'{{blame="{side}"}}'
    paired = (
        f"sum by ({cfg.by}) (increase(batch_pair_latency_seconds_count{{{cfg.matchers()}}}"
        f"[{cfg.window(window)}]))"
    )
    expr = (
        f"{errors} * {cfg.window_seconds(window)} >= {QUIET_MIN_MISSING}\n"
        f"unless on ({cfg.by})\n({paired} > 0)"
    )
    name = stem.replace("OmitsReplies", "AnswersNothing").replace("LosesReplies", "AnswersNothing")
    description = (
        f'No request got a reply in the last {window} and {{{{ $value | printf "%.0f" }}}} '
        f"went missing {_where(cfg)}: {meaning}. A job this quiet never builds up the traffic "
        f"a burn rate needs, so this pages at {QUIET_MIN_MISSING} missing with none answered."
    )
    return Rule(
        name=name,
        expr=expr,
        for_=cfg.window(QUIET_FOR),
        severity="critical",
        blame=side,
        summary=f"{summary}, every one of them {TARGET_SUMMARY}",
        description=description,
        runbook_anchor=name.lower(),
        comment="Low traffic: everything lost, too few requests for a burn rate.",
    )


# --- liveness, transit and pairwatch itself -------------------------------------------------


def _present(cfg: Config) -> str:
    """The jobs that exported pairwatch series in the last day: only they are expected."""
    return (
        f"group by ({cfg.group}) (present_over_time(batch_requests_total{{{cfg.matchers()}}}"
        f"[{cfg.window(PRESENT_WINDOW)}]))"
    )


def absent_rule(cfg: Config = DEFAULT) -> Rule:
    now = f"group by ({cfg.group}) (batch_requests_total{{{cfg.matchers()}}})"
    return Rule(
        name="PairwatchJobAbsent",
        expr=f"{_present(cfg)}\nunless on ({cfg.group})\n{now}",
        for_=cfg.window(ABSENT_FOR),
        severity="warning",
        blame=b.NONE,
        summary="A job stopped exporting pairwatch series ({{ $labels.job }})",
        description=(
            f"{_job(cfg)} exported pairwatch series within the last {PRESENT_WINDOW} and has "
            f"none now: the process stopped, lost its instrumentation, or is no longer scraped. "
            f"Nothing on this job is watched until it is back. Fires after {ABSENT_FOR}; "
            f"stops by itself {PRESENT_WINDOW} after the last series (a job removed on purpose)."
        ),
        runbook_anchor="pairwatchjobabsent",
        comment="Liveness: only jobs that had pairwatch series before.",
    )


def drop_rule(cfg: Config = DEFAULT) -> Rule:
    metric = f"batch_requests_total{{{cfg.matchers()}}}"
    g = cfg.group

    def rate(window: str, offset: str = "") -> str:
        tail = f" offset {cfg.window(offset)}" if offset else ""
        return f"sum by ({g}) (rate({metric}[{cfg.window(window)}]{tail}))"

    now = rate(DROP_WINDOW)
    per_hour = cfg.window_seconds(DROP_WINDOW)
    expr = (
        f"{now}\n< {DROP_SHARE:g} * {rate(DROP_WINDOW, DROP_BASELINE)}\n"
        f"and on ({g})\n{now}\n< {DROP_SHARE:g} * {rate(DROP_BASELINE)}\n"
        f"and on ({g})\n{rate(DROP_BASELINE)} * {per_hour} >= {DROP_MIN_BASELINE_PER_HOUR}"
    )
    return Rule(
        name="PairwatchTrafficDrop",
        expr=expr,
        for_=cfg.window(DROP_FOR),
        severity="warning",
        blame=b.NONE,
        summary="A job sends far fewer JSON-RPC requests than it did ({{ $labels.job }})",
        description=(
            f"{_job(cfg)} sent {{{{ $value | humanize }}}} requests/s over the last "
            f"{DROP_WINDOW}, under {percent(DROP_SHARE)} of the same hour {DROP_BASELINE} ago "
            f"and of its {DROP_BASELINE} mean: its callers stopped calling, or the process is "
            f"stuck before it sends. Not a JSON-RPC fault; checked only on jobs with at least "
            f"{DROP_MIN_BASELINE_PER_HOUR} requests an hour, held for {DROP_FOR}."
        ),
        runbook_anchor="pairwatchtrafficdrop",
        comment="Liveness: against the job's own baseline (same hour yesterday, last day).",
    )


def scrape_rule(cfg: Config = DEFAULT) -> Rule:
    return Rule(
        name="PairwatchScrapeDown",
        expr=f"up{{{cfg.matchers()}}} == 0\nand on ({cfg.group})\n{_present(cfg)}",
        for_=cfg.window(SCRAPE_FOR),
        severity="warning",
        blame=b.NONE,
        summary="Prometheus cannot scrape a pairwatch target ({{ $labels.job }})",
        description=(
            f"{{{{ $labels.instance }}}} of {_job(cfg)}, which exported pairwatch series "
            f"within the last {PRESENT_WINDOW}, has failed every scrape for {SCRAPE_FOR} "
            "(up == 0): a wrong port, a firewall or a dead process. Switch this alert off "
            "(`dashboards export --no-scrape-alert`) where another mixin's TargetDown covers it."
        ),
        runbook_anchor="pairwatchscrapedown",
        comment="Liveness: the scrape itself; optional.",
    )


def transit_rule(cfg: Config = DEFAULT) -> Rule:
    """Replies the server's own books show as sent that the client never got.

    Client and server are different jobs, so the two sides meet on the server address and the
    grouping labels other than job (cluster, namespace)."""
    by = ", ".join((*[label for label in cfg.group_by if label != "job"], "server_address"))
    window = cfg.window(WINDOW)

    def side(metric: str, which: str) -> str:
        matchers = cfg.matchers(f'pairwatch_side="{which}"')
        return f"sum by ({by}) (increase({metric}{{{matchers}}}[{window}]))"

    lost = (
        f"clamp_min(\n  {side('batch_missing_response_total', 'client')}\n  - on ({by})\n"
        f"  {side('batch_missing_response_total', 'server')},\n  0\n)"
    )
    expr = _count_and_share(
        by, lost, side("batch_requests_total", "client"), TRANSIT_MIN_COUNT, TRANSIT_MIN_SHARE
    )
    return Rule(
        name="PairwatchNetworkLosesReplies",
        expr=expr,
        for_=cfg.window(FOR_BY_SEVERITY["warning"]),
        severity="warning",
        blame=b.NETWORK,
        summary='The network loses replies on their way back ("{{ $labels.server_address }}")',
        description=(
            f'{{{{ $value | printf "%.0f" }}}} requests to "{{{{ $labels.server_address }}}}" '
            f"closed without a reply at the client in the last {WINDOW} although the server's "
            "own books (pairwatch's middleware) show them answered: lost_in_transit, between "
            f"the two (network, proxy, load balancer). Pages at {TRANSIT_MIN_COUNT} lost and "
            f"{percent(TRANSIT_MIN_SHARE)} of requests, held for {FOR_BY_SEVERITY['warning']}."
        ),
        runbook_anchor="pairwatchnetworklosesreplies",
        comment="Evidence: client-side missing minus server-side missing (both instrumented).",
    )


def internal_rule(cfg: Config = DEFAULT) -> Rule:
    by = f"{cfg.group}, instance"
    return Rule(
        name="PairwatchInternalErrors",
        expr=(
            f"sum by ({by}) (increase(pairwatch_internal_errors_total{{{cfg.matchers()}}}"
            f"[{cfg.window(INTERNAL_WINDOW)}])) > 0"
        ),
        for_=cfg.window(INTERNAL_FOR),
        severity="warning",
        blame=b.NONE,
        summary="pairwatch itself fails in {{ $labels.instance }} ({{ $labels.job }})",
        description=(
            f'pairwatch swallowed {{{{ $value | printf "%.0f" }}}} of its own errors in the '
            f"last {INTERNAL_WINDOW} in {{{{ $labels.instance }}}} ({_job(cfg)}). The client "
            "is unaffected, but that process's pairing numbers are incomplete: report it with "
            "the log line pairwatch wrote."
        ),
        runbook_anchor="pairwatchinternalerrors",
        comment="pairwatch's own failures: the numbers of that process are incomplete.",
    )


def all_rules(cfg: Config = DEFAULT) -> list[Rule]:
    """Every alert of one configuration, in file order."""
    slo = [
        *(burn_rule(side, page, cfg) for side in b.BUDGET_SPENDERS for page in (True, False)),
        *(quiet_rule(side, cfg) for side in b.BUDGET_SPENDERS),
    ]
    liveness = [absent_rule(cfg), drop_rule(cfg), *([scrape_rule(cfg)] if cfg.scrape_alert else [])]
    return [
        *(diagnosis_rule(a, cfg) for a in DIAGNOSIS_ALERTS),
        late_rule(cfg),
        mismatch_rule(cfg),
        *slo,
        transit_rule(cfg),
        internal_rule(cfg),
        *liveness,
    ]


def scaled(cfg: Config, factor: float) -> Config:
    """``cfg`` with every window and ``for:`` multiplied by ``factor`` (end-to-end tests)."""
    return replace(cfg, time_scale=cfg.time_scale * factor)
