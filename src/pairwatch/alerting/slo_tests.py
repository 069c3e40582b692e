"""promtool tests of the SLO, liveness and blame of the alerts, over simulated days.

Why generated: the losses are stated as multiples of the error budget, so a test written for
99.9% stays right for the objective an operator exports, and the expected alerts come from
the same rules (their names, severities, blames). What proves behaviour is still promtool:
it evaluates the exported rule files over synthetic counters, minute by minute.

Each scenario asserts the exact set of firing alerts (`ALERTS{alertstate="firing"}`, labels
only: promtool's ALERTS carry no annotations) at chosen times, so an extra alert fails a
test as surely as a missing one.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from pairwatch.alerting import blame as b
from pairwatch.alerting.rules import (
    BURN_MIN_ERRORS,
    DEFAULT,
    SLO_SIDES,
    TRANSIT_MIN_SHARE,
    Config,
    burn_rule,
    quiet_rule,
)

EXPORTER = 'instance="10.0.0.1:9464", pairwatch_integration="httpx", otel_scope_name="pairwatch"'


@dataclass
class Job:
    """One simulated job: its input series and the alerts expected at each check."""

    name: str
    comment: str
    series: list[tuple[str, str]] = field(default_factory=list)  # (selector, values)

    side: str = ""

    def add(self, metric: str, values: str, extra: str = "", *, server: bool = True) -> None:
        labels = f'job="{self.name}", {EXPORTER}'
        if server:
            labels += ', pairwatch_transport="http", server_address="rpc.example"'
        if self.side:
            labels += f', pairwatch_side="{self.side}"'
        self.series.append((f"{metric}{{{labels}{', ' + extra if extra else ''}}}", values))

    def up(self, values: str) -> None:
        self.series.append((f'up{{job="{self.name}", instance="10.0.0.1:9464"}}', values))


def _burn(side: str, page: bool) -> str:
    return burn_rule(side, page).name


def _quiet(side: str) -> str:
    return quiet_rule(side).name


@dataclass(frozen=True)
class Expect:
    alert: str
    severity: str
    blame: str
    job: str | None  # None: grouped without job (client and server sides are two jobs)
    target: bool = True  # grouped per server and side, not only per job
    instance: bool = False
    side: str = ""

    def labels(self) -> str:
        parts = [
            f'alertname="{self.alert}"',
            'alertstate="firing"',
            f'severity="{self.severity}"',
            f'blame="{self.blame}"',
        ]
        if self.job is not None:
            parts.append(f'job="{self.job}"')
        if self.side:
            parts.append(f'pairwatch_side="{self.side}"')
        if self.target:
            parts.append('server_address="rpc.example"')
        if self.instance:
            parts.append('instance="10.0.0.1:9464"')
        return "ALERTS{" + ", ".join(parts) + "}"


def _fmt(x: float) -> str:
    return f"{x:g}" if abs(x - round(x)) > 1e-9 else str(round(x))


def traffic_scenarios(cfg: Config) -> tuple[list[Job], dict[int, list[Expect]]]:
    """90 minutes of six jobs: what pages, with which blame, and what must not."""
    budget = cfg.budget

    def share(factor: float) -> float:
        """``factor`` times the budget, at most half the requests (low objectives)."""
        return min(factor * budget, 0.5)

    lossy_share, six_share, dup_share = share(20), share(8), share(20)
    # at least 10x the budget, and twice the transit alert's own minimum share
    edge_share = min(max(10 * budget, 2 * TRANSIT_MIN_SHARE), 0.5)
    per_min = 6000  # requests a minute on the busy jobs (100/s)
    jobs: list[Job] = []

    healthy = Job(
        "healthy",
        "every request answered; some withdrawn by their callers and some unchecked, "
        "neither of which is missing: pages nothing",
    )
    healthy.add("batch_requests_total", f"0+{per_min}x90", 'jsonrpc_batch="true"')
    healthy.add("batch_withdrawn_request_total", "0+300x90", 'pairwatch_reason="cancelled"')
    healthy.add("batch_unchecked_request_total", "0+10x90", 'pairwatch_reason="body_cap"')
    for reason in ("body_end", "send_failed", "stream_dropped", "timeout"):
        healthy.add(
            "batch_missing_response_total",
            "0x90",
            f'rpc_method="eth_call", pairwatch_close_reason="{reason}"',
        )
    healthy.add("batch_duplicate_id_total", "0x90", 'pairwatch_duplicate_scope="in_batch"')
    healthy.add("batch_pair_latency_seconds_count", "0+5690x90", 'rpc_method="eth_call"')
    jobs.append(healthy)

    quiet = Job(
        "quiet",
        "one request a minute, every reply dropped (the body ends without it): the quiet-job "
        "rule pages, and so do the burn rates once the hour holds "
        f"{BURN_MIN_ERRORS} missing",
    )
    quiet.add("batch_requests_total", "0+1x90")
    quiet.add(
        "batch_missing_response_total",
        "0+1x90",
        'rpc_method="eth_call", pairwatch_close_reason="body_end"',
    )
    jobs.append(quiet)

    two = Job(
        "quiet-two-timeouts",
        "one request a minute, two timeouts in the whole run: too few to page anyone",
    )
    two.add("batch_requests_total", "0+1x90")
    two.add("batch_pair_latency_seconds_count", "0+1x9 9 9 10+1x78")
    two.add(
        "batch_missing_response_total",
        "0x9 1 2x80",
        'rpc_method="eth_call", pairwatch_close_reason="timeout"',
    )
    jobs.append(two)

    lossy_per_min = 5220  # 87/s: 167,040 requests in the 32 minutes to the first check
    lossy = Job(
        "lossy",
        f"{percent_text(lossy_share)} of {lossy_per_min * 32:,} requests time out in 32 "
        "minutes (20x the budget): the fast burn pages the server-or-network side",
    )
    lossy.add("batch_requests_total", f"0+{lossy_per_min}x90")
    lossy.add("batch_pair_latency_seconds_count", f"0+{_fmt(lossy_per_min * (1 - lossy_share))}x90")
    lossy.add(
        "batch_missing_response_total",
        f"0+{_fmt(lossy_per_min * lossy_share)}x90",
        'rpc_method="eth_call", pairwatch_close_reason="timeout"',
    )
    jobs.append(lossy)

    six = Job(
        "burn6x",
        f"{percent_text(six_share)} of requests dropped mid-stream for 40 minutes (8x the "
        "budget: under 14.4x, over 6x): the 6h/30m page fires; 30 minutes after the fault "
        "stops the page resolves and the ticket stays",
    )
    six.add("batch_requests_total", f"0+{per_min}x90")
    six.add("batch_pair_latency_seconds_count", f"0+{_fmt(per_min * (1 - six_share))}x90")
    lost = per_min * six_share
    six.add(
        "batch_missing_response_total",
        f"0+{_fmt(lost)}x40 {_fmt(lost * 40)}x50",
        'rpc_method="eth_call", pairwatch_close_reason="stream_dropped"',
    )
    jobs.append(six)

    dup = round(per_min * dup_share)
    client = Job(
        "client-bug",
        f"the client reuses {dup} ids a minute and the server answers each reused id once, so "
        f"{dup} replies a minute are missing at body end (20x the budget): the client alert "
        "pages the client; the server's budget is not spent",
    )
    client.add("batch_requests_total", f"0+{per_min}x90")
    client.add("batch_duplicate_id_total", f"0+{dup}x90", 'pairwatch_duplicate_scope="in_batch"')
    client.add(
        "batch_missing_response_total",
        f"0+{dup}x90",
        'rpc_method="eth_call", pairwatch_close_reason="body_end"',
    )
    dup_batches = min(dup, 375)  # of 750 batches of 8 a minute
    client.add(
        "batch_closed_total",
        f"0+{750 - dup_batches}x90",
        'pairwatch_diagnosis="ok", pairwatch_close_reason="body_end"',
    )
    client.add(
        "batch_closed_total",
        f"0+{dup_batches}x90",
        'pairwatch_diagnosis="client_duplicate_ids", pairwatch_close_reason="body_end"',
    )
    client.add("batch_pair_latency_seconds_count", f"0+{per_min - dup}x90")
    jobs.append(client)

    hung = Job(
        "quiet-hung",
        "one request a minute, every one timing out (a server that accepts and never answers): "
        "the quiet-job rule pages the server-or-network side",
    )
    hung.add("batch_requests_total", "0+1x90")
    hung.add(
        "batch_missing_response_total",
        "0+1x90",
        'rpc_method="eth_call", pairwatch_close_reason="timeout"',
    )
    jobs.append(hung)

    edge = Job(
        "edge",
        "client side of a server whose own books (job backend, server side) show every reply "
        "sent; 10x the budget of them never reach the client: lost in transit, the network's",
        side="client",
    )
    edge_lost = per_min * edge_share  # 10x the budget: 1% at 99.9%
    edge.add("batch_requests_total", f"0+{per_min}x90")
    edge.add("batch_pair_latency_seconds_count", f"0+{_fmt(per_min - edge_lost)}x90")
    edge.add(
        "batch_missing_response_total",
        f"0+{_fmt(edge_lost)}x90",
        'rpc_method="eth_call", pairwatch_close_reason="stream_dropped"',
    )
    jobs.append(edge)
    backend = Job("backend", "the server side of edge's server: nothing missing", side="server")
    backend.add("batch_requests_total", f"0+{per_min}x90")
    backend.add("batch_pair_latency_seconds_count", f"0+{per_min}x90")
    backend.add(
        "batch_missing_response_total",
        "0x90",
        'rpc_method="eth_call", pairwatch_close_reason="stream_end"',
    )
    jobs.append(backend)

    hurt = Job("self-hurt", "healthy traffic, and pairwatch fails once inside at minute 20")
    hurt.add("batch_requests_total", "0+100x90")
    hurt.add("batch_pair_latency_seconds_count", "0+100x90")
    hurt.add(
        "pairwatch_internal_errors_total",
        "_x19 0 1x70",
        'pairwatch_error_kind="record"',
        server=False,
    )
    jobs.append(hurt)

    server, either = b.SERVER, b.SERVER_OR_NETWORK
    page = {
        "quiet": [
            Expect(_quiet(server), "critical", server, "quiet"),
            Expect(_burn(server, True), "critical", server, "quiet"),
            Expect(_burn(server, False), "warning", server, "quiet"),
        ],
        "lossy": [
            Expect(_burn(either, True), "critical", either, "lossy"),
            Expect(_burn(either, False), "warning", either, "lossy"),
        ],
        "client": [Expect("PairwatchClientDuplicateIds", "critical", b.CLIENT, "client-bug")],
        "hung": [
            Expect(_quiet(either), "critical", either, "quiet-hung"),
            Expect(_burn(either, True), "critical", either, "quiet-hung"),
            Expect(_burn(either, False), "warning", either, "quiet-hung"),
        ],
        # 1% is 10x the budget: the client's own burn pages the side it can see (server or
        # network); the transit alert, from both sides' books, names the network.
        "edge": [
            Expect(_burn(either, True), "critical", either, "edge", side="client"),
            Expect(_burn(either, False), "warning", either, "edge", side="client"),
            Expect("PairwatchNetworkLosesReplies", "warning", b.NETWORK, None),
        ],
    }
    checks = {
        32: [
            *page["quiet"],
            *page["lossy"],
            Expect(_burn(either, True), "critical", either, "burn6x"),
            Expect(_burn(either, False), "warning", either, "burn6x"),
            *page["client"],
            *page["hung"],
            *page["edge"],
            Expect(
                "PairwatchInternalErrors",
                "warning",
                b.NONE,
                "self-hurt",
                target=False,
                instance=True,
            ),
        ],
        85: [
            *page["quiet"],
            *page["lossy"],
            Expect(_burn(either, False), "warning", either, "burn6x"),
            *page["client"],
            *page["hung"],
            *page["edge"],
        ],
    }
    return jobs, checks


def liveness_scenarios(cfg: Config) -> tuple[list[Job], dict[int, list[Expect]]]:
    """27 hours: jobs that stop, a scrape that fails, a job that never had pairwatch, and a
    traffic drop against the job's own day."""
    jobs: list[Job] = []
    gone = Job("gone", "exports for 2h, then its target is removed: absent, until a day later")
    gone.add("batch_requests_total", "0+100x120 stale")
    gone.up("1x120 stale")
    jobs.append(gone)
    port = Job("wrong-port", "exports for 2h, then every scrape fails (up == 0)")
    port.add("batch_requests_total", "0+100x120 stale")
    port.up("1x120 0x1500")
    jobs.append(port)
    never = Job("never", "a target that never exported pairwatch series and is down: no page")
    never.up("0x1620")
    jobs.append(never)
    steady = Job("steady", "the same traffic all along, a day and more: no page")
    steady.add("batch_requests_total", "0+6000x1620")
    steady.up("1x1620")
    jobs.append(steady)
    drop = Job("drop", "6000 requests a minute for 25h, then 1000: a traffic drop")
    drop.add("batch_requests_total", "0+6000x1500 9001000+1000x119")
    drop.up("1x1620")
    jobs.append(drop)

    absent = "PairwatchJobAbsent"
    after_stop = [
        Expect(absent, "warning", b.NONE, "gone", target=False),
        Expect(absent, "warning", b.NONE, "wrong-port", target=False),
    ]
    if cfg.scrape_alert:
        after_stop.append(
            Expect(
                "PairwatchScrapeDown", "warning", b.NONE, "wrong-port", target=False, instance=True
            )
        )
    checks = {
        110: [],
        150: after_stop,
        1530: after_stop,  # a day after they stopped, less 30 minutes
        1590: [Expect("PairwatchTrafficDrop", "warning", b.NONE, "drop", target=False)],
    }
    return jobs, checks


def percent_text(share: float) -> str:
    return f"{share * 100:g}%"


def _records(cfg: Config) -> list[tuple[str, int, str, float]]:
    """Recording-rule values worth pinning: (expr, minute, labels left, value)."""
    lossy, six = min(20 * cfg.budget, 0.5), min(8 * cfg.budget, 0.5)
    level = "job_server_side"
    target = 'server_address="rpc.example"'
    return [
        # requests - withdrawn - unchecked, per second
        (f'{level}:pairwatch_slo_requests:rate5m{{job="healthy"}}', 32,
         f'job="healthy", {target}', (6000 - 300 - 10) / 60),
        (f'{level}:pairwatch_slo_errors:ratio_rate5m{{job="healthy"}}', 32,
         f'job="healthy", {target}', 0.0),
        # the client's duplicates are taken off the server's missing replies
        (f'{level}_blame:pairwatch_slo_errors:rate5m{{job="client-bug"}}', 32,
         f'blame="server", job="client-bug", {target}', 0.0),
        (f'{level}_blame:pairwatch_slo_errors:ratio_rate1h{{job="lossy"}}', 32,
         f'blame="server_or_network", job="lossy", {target}', lossy),
        (f'{level}:pairwatch_slo_errors:ratio_rate6h{{job="burn6x"}}', 32,
         f'job="burn6x", {target}', six),
        # the objective the dashboard's error budget reads: the export's, per target
        (f'{level}:pairwatch_slo_objective:ratio{{job="healthy"}}', 32,
         f'job="healthy", {target}', cfg.objective),
    ]  # fmt: skip


def _job_lines(jobs: Iterable[Job]) -> list[str]:
    lines: list[str] = []
    for job in jobs:
        lines.append(f"      # {job.name}: {job.comment}")
        for selector, values in job.series:
            lines += [f"      - series: '{selector}'", f"        values: '{values}'"]
    return lines


def _check_lines(checks: dict[int, list[Expect]]) -> list[str]:
    lines: list[str] = []
    for minute, expected in checks.items():
        lines += [
            "      - expr: 'ALERTS{alertstate=\"firing\"}'",
            f"        eval_time: {minute}m",
        ]
        if not expected:
            lines.append("        exp_samples: []")
            continue
        lines.append("        exp_samples:")
        for e in sorted(expected, key=lambda e: (e.job or "", e.alert)):
            lines += [f"          - labels: '{e.labels()}'", "            value: 1"]
    return lines


HEADER = """\
# GENERATED from src/pairwatch/alerting/slo_tests.py: the availability SLO ({objective}),
# the quiet-job rule, lost in transit, internal errors and blame, over 90 simulated minutes
# (liveness is in pairwatch-liveness.test.yaml). Every check lists the exact set
# of firing alerts, so an extra page fails as surely as a missing one.
# Run from the folder holding rules/: promtool test rules rules/tests/*.yaml
rule_files:
  - ../pairwatch-slo.yaml
  - ../pairwatch-alerts.yaml

evaluation_interval: 1m

tests:
"""


def render(cfg: Config = DEFAULT) -> str:
    """The exact text of rules/tests/pairwatch-slo.test.yaml for ``cfg``."""
    lines: list[str] = []
    jobs, checks = traffic_scenarios(cfg)
    lines += [
        "  # Traffic: burn-rate windows, the quiet job, 2% loss, a client bug, a healthy job.",
        "  - interval: 1m",
        "    input_series:",
        *_job_lines(jobs),
        "    promql_expr_test:",
        *_check_lines(checks),
    ]
    for expr, minute, labels, value in _records(cfg):
        # Within 1e-9: promtool compares floats exactly, and 104.4 / 5220 is not 0.02.
        lines += [
            f"      - expr: 'abs({expr} - {value!r}) < bool 1e-9'",
            f"        eval_time: {minute}m",
            "        exp_samples:",
            f"          - labels: '{{{labels}}}'",
            "            value: 1",
        ]
    sides = ", ".join(SLO_SIDES)
    return (
        HEADER.format(objective=f"{cfg.objective * 100:g}%")
        + "\n".join(lines)
        + f"\n# sides: {sides}\n"
    )


LIVENESS_HEADER = """\
# GENERATED from src/pairwatch/alerting/slo_tests.py: liveness over 27 simulated hours (jobs
# that stop, a failing scrape, a job that never had pairwatch, a traffic drop). Every check
# lists the exact set of firing alerts. Evaluated every 5m (the liveness windows are 10m and
# more, and 27 hours at 1m would cost a minute of promtool); the SLO recording rules are not
# needed here. Run from the folder holding rules/: promtool test rules rules/tests/*.yaml
rule_files:
  - ../pairwatch-alerts.yaml

evaluation_interval: 5m

tests:
"""


def render_liveness(cfg: Config = DEFAULT) -> str:
    """The exact text of rules/tests/pairwatch-liveness.test.yaml for ``cfg``."""
    jobs, checks = liveness_scenarios(cfg)
    lines = [
        "  # Stopped jobs, a failing scrape, a never-instrumented job, a traffic drop.",
        "  - interval: 1m",
        "    input_series:",
        *_job_lines(jobs),
        "    promql_expr_test:",
        *_check_lines(checks),
    ]
    return LIVENESS_HEADER + "\n".join(lines) + "\n"
