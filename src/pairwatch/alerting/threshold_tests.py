"""promtool unit tests at every count-and-share alert threshold minus one and plus one.

Why generated: a threshold is stated once (rules.py), and the runbook, the rule and this test
must follow it when it changes (the burn-rate and liveness alerts are tested by
slo_tests.py instead). What proves behaviour is still promtool: it evaluates the real
rule file over synthetic counters, so a wrong expression, a wrong comparison (`>` for `>=`)
or a `for:` that filters nothing fails here.

For each alert, four targets (told apart by `server_address`) run side by side for the whole
test, with counters that rise at a constant rate:

    count-minus-one / count-plus-one   events per window = minimum count - 1 / + 1,
                                       share far above its minimum
    share-minus-one / share-plus-one   share = minimum share with one event fewer / more,
                                       count far above its minimum

and the test expects, at `for:` after the start, both plus-one targets pending and none
firing, then at window + `for:` + 5 minutes exactly the plus-one targets firing. The
series are sampled every 15 s: over a 5m window Prometheus extrapolates 19 intervals to 20,
a factor of 20/19, small enough that "minimum - 1" never rounds up to the minimum.

Promtool's ALERTS series carry labels but no annotations, so these tests pin no text; the
annotations are pinned by the scenario tests in pairwatch-alerts.test.yaml.
"""

from __future__ import annotations

from dataclasses import dataclass

from pairwatch.alerting import rules as alerts

STEP_SECONDS = 15
STEPS_PER_WINDOW = 20  # a 5m window at 15 s sampling
TOTAL_STEPS = 240  # one hour of samples
CASES = ("count-minus-one", "count-plus-one", "share-minus-one", "share-plus-one")
COMMON = 'job="t", instance="10.0.0.1:9464", pairwatch_transport="http"'
# The events one window holds in the share cases: enough to clear every minimum count.
SHARE_EVENTS = 20
# The denominator per window in the count cases: every count case then sits far above its
# share minimum (4 events in 100 is 4%).
COUNT_DENOMINATOR = 100


@dataclass(frozen=True)
class Threshold:
    alert: str
    severity: str
    blame: str
    for_minutes: int
    min_count: int
    min_share: float
    # How the numerator and the denominator are fed: (series name, extra matchers).
    numerator: tuple[str, str]
    denominator: tuple[str, str] | None  # None: the denominator also sums the numerator


def thresholds() -> list[Threshold]:
    found = [
        Threshold(
            a.name,
            a.severity,
            a.blame,
            _minutes(a.for_),
            a.min_batches,
            a.min_share,
            ("batch_closed_total", f'pairwatch_diagnosis="{a.diagnosis}"'),
            None,
        )
        for a in alerts.DIAGNOSIS_ALERTS
    ]
    found.append(
        Threshold(
            "PairwatchLateResponses",
            "warning",
            alerts.late_rule().blame,
            _minutes(alerts.FOR_BY_SEVERITY["warning"]),
            alerts.LATE_MIN_COUNT,
            alerts.LATE_MIN_SHARE,
            ("batch_late_response_total", 'jsonrpc_batch="false"'),
            ("batch_requests_total", ""),
        )
    )
    found.append(
        Threshold(
            "PairwatchResponseCountMismatch",
            "info",
            alerts.mismatch_rule().blame,
            _minutes(alerts.FOR_BY_SEVERITY["info"]),
            alerts.MISMATCH_MIN_COUNT,
            alerts.MISMATCH_MIN_SHARE,
            ("batch_response_count_mismatch_total", ""),
            ("batch_closed_total", 'pairwatch_diagnosis="ok"'),
        )
    )
    return found


def _minutes(duration: str) -> int:
    assert duration.endswith("m"), duration
    return int(duration[:-1])


def _events(case: str, t: Threshold) -> tuple[float, float]:
    """(numerator, denominator) per window for one case."""
    if case.startswith("count"):
        numerator = t.min_count + (1 if case.endswith("plus-one") else -1)
        return float(numerator), float(COUNT_DENOMINATOR)
    denominator = round(SHARE_EVENTS / t.min_share)
    numerator = SHARE_EVENTS + (1 if case.endswith("plus-one") else -1)
    return float(numerator), float(denominator)


def _series(name: str, case: str, extra: str, per_window: float) -> list[str]:
    matchers = f'{COMMON}, server_address="{case}"' + (f", {extra}" if extra else "")
    per_step = per_window / STEPS_PER_WINDOW
    return [
        f"      - series: '{name}{{{matchers}}}'",
        f"        values: '0+{per_step:g}x{TOTAL_STEPS}'",
    ]


def _alerts_query(t: Threshold, state: str) -> str:
    return f'ALERTS{{alertname="{t.alert}", alertstate="{state}"}}'


def _sample(t: Threshold, state: str, case: str) -> list[str]:
    labels = (
        f'ALERTS{{alertname="{t.alert}", alertstate="{state}", severity="{t.severity}", '
        f'blame="{t.blame}", job="t", server_address="{case}"}}'
    )
    return [f"          - labels: '{labels}'", "            value: 1"]


def render_test(t: Threshold) -> list[str]:
    lines = [
        f"  # {t.alert}: minimum {t.min_count} events and {t.min_share:g} share per window, "
        f"for: {t.for_minutes}m",
        f"  - interval: {STEP_SECONDS}s",
        "    input_series:",
    ]
    name, extra = t.numerator
    for case in CASES:
        numerator, denominator = _events(case, t)
        lines += _series(name, case, extra, numerator)
        if t.denominator is None:  # the rest of the batches closed fine
            lines += _series(name, case, 'pairwatch_diagnosis="ok"', denominator - numerator)
        else:
            lines += _series(t.denominator[0], case, t.denominator[1], denominator)
    before = t.for_minutes
    after = 5 + t.for_minutes + 5
    lines += ["    promql_expr_test:"]
    for minutes, state, expected in (
        (before, "pending", ("count-plus-one", "share-plus-one")),
        (before, "firing", ()),
        (after, "firing", ("count-plus-one", "share-plus-one")),
    ):
        lines += [
            f"      - expr: '{_alerts_query(t, state)}'",
            f"        eval_time: {minutes}m",
        ]
        if expected:
            lines.append("        exp_samples:")
            for case in expected:
                lines += _sample(t, state, case)
        else:
            lines.append("        exp_samples: []")
    return lines


HEADER = """\
# GENERATED from src/pairwatch/alerting/threshold_tests.py (thresholds from
# src/pairwatch/alerting/rules.py): every count-and-share alert at its minimum count and its
# minimum share, one event below and one above. Run from the folder holding rules/:
#   promtool test rules rules/tests/*.yaml
rule_files:
  - ../pairwatch-alerts.yaml

evaluation_interval: 1m

tests:
"""


def render() -> str:
    body: list[str] = []
    for t in thresholds():
        body += render_test(t)
        body.append("")
    return HEADER + "\n".join(body).rstrip("\n") + "\n"
