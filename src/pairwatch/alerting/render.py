"""The rules of :mod:`pairwatch.alerting.rules` and the Alertmanager inhibit rules, as YAML.

Kept apart from the rules themselves: rules.py says what pages and why (thresholds, shares,
evidence in the annotations); this module only writes it out, by hand rather than through a
YAML library (none is needed at run time), so the files keep their comments and read well
in review.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from pairwatch.alerting.rules import DEFAULT, Config, Record, Rule, all_rules, slo_records


def runbook_link(base: str, anchor: str) -> str:
    return f"{base}#{anchor}"


HEADER = """\
# pairwatch alert rules. GENERATED from src/pairwatch/alerting/rules.py by
# dashboards/generate.py (the committed copy) or `pairwatch dashboards export` (yours):
# edit those and regenerate.
#
# Every alert carries `blame` (client, server, network, server_or_network, none) for
# Alertmanager to route on. Missing replies are an availability SLO ({objective} answered)
# with multi-window burn-rate alerts over the recording rules of pairwatch-slo.yaml; batch
# diagnoses (batch_closed_total{{pairwatch_diagnosis}}) need a share of traffic AND a minimum
# count in their window. Series are summed by {by} (one page per
# fault, never per transport or instance); audit captures are left out{selector}.
# Thresholds and their reasons: runbook.md. Inhibit rules: alertmanager/pairwatch-inhibit.yaml.
#
# runbook_url base: {base}
"""

SLO_HEADER = """\
# pairwatch availability SLO recording rules. GENERATED from src/pairwatch/alerting/rules.py:
# edit that and regenerate. Load together with pairwatch-alerts.yaml, whose burn-rate alerts
# read them.
#
# Objective: {objective} of requests answered. Per window W, summed by {by}:
#   job_server_side:pairwatch_slo_requests:rateW          requests - withdrawn - unchecked
#   job_server_side_blame:pairwatch_slo_errors:rateW      missing replies, per blamed side
#       (blame="server": body_end/stream_end, minus the client's duplicate ids, each of which
#       can leave one reply missing; blame="server_or_network": stream_dropped/timeout/
#       send_failed). The missing counter has no diagnosis label: this is how a client bug
#       is kept off the server's budget. evicted/closed (pairwatch's own caps) spend nothing.
#   job_server_side_blame:pairwatch_slo_errors:ratio_rateW  the two divided, per side
#   job_server_side:pairwatch_slo_errors:ratio_rateW        all sides together
#   job_server_side:pairwatch_slo_objective:ratio           the objective, per target (the
#       dashboard's error budget left reads it, so it follows the exported --objective)
"""


def _quoted(text: str) -> str:
    """A YAML double-quoted scalar (JSON strings are valid YAML)."""
    return json.dumps(text, ensure_ascii=False)


def _block(text: str, indent: str) -> str:
    return "\n".join(indent + line if line else "" for line in text.splitlines())


def render_rule(rule: Rule, cfg: Config) -> str:
    lines = [f"      - alert: {rule.name}"]
    if rule.comment:
        lines.append(f"        # {rule.comment}")
    lines.append("        expr: |-")
    lines.append(_block(rule.expr, "          "))
    lines.append(f"        for: {rule.for_}")
    lines.append("        labels:")
    lines.append(f"          severity: {rule.severity}")
    lines.append(f"          blame: {rule.blame}")
    for key, value in rule.extra_labels.items():
        lines.append(f"          {key}: {_quoted(value)}")
    lines.append("        annotations:")
    lines.append(f"          summary: {_quoted(rule.summary)}")
    lines.append(f"          description: {_quoted(rule.description)}")
    if cfg.runbook_url is not None:
        url = runbook_link(cfg.runbook_url, rule.runbook_anchor)
        lines.append(f"          runbook_url: {_quoted(url)}")
    if cfg.dashboard_url is not None:
        lines.append(f"          dashboard_url: {_quoted(cfg.dashboard_url)}")
    return "\n".join(lines)


def render(cfg: Config = DEFAULT, rules: Sequence[Rule] | None = None) -> str:
    """The exact text of rules/pairwatch-alerts.yaml for ``cfg``."""
    body = "\n\n".join(render_rule(rule, cfg) for rule in (rules or all_rules(cfg)))
    selector = f" and series match {cfg.selector}" if cfg.selector else ""
    header = HEADER.format(
        objective=f"{cfg.objective * 100:g}%",
        by=cfg.by,
        selector=selector,
        base=cfg.runbook_url if cfg.runbook_url is not None else "(no runbook links)",
    )
    return header + "groups:\n  - name: pairwatch-alerts\n    rules:\n" + body + "\n"


def render_record(record: Record) -> str:
    lines = [
        f"      - record: {record.record}",
        "        expr: |-",
        _block(record.expr, "          "),
    ]
    if record.labels:
        lines.append("        labels:")
        lines += [f"          {key}: {value}" for key, value in record.labels.items()]
    return "\n".join(lines)


def render_slo(cfg: Config = DEFAULT) -> str:
    """The exact text of rules/pairwatch-slo.yaml for ``cfg``."""
    body = "\n\n".join(render_record(record) for record in slo_records(cfg))
    header = SLO_HEADER.format(objective=f"{cfg.objective * 100:g}%", by=cfg.by)
    return header + "groups:\n  - name: pairwatch-slo\n    rules:\n" + body + "\n"


# --- Alertmanager inhibit rules -------------------------------------------------------------

INHIBIT_HEADER = """\
# Alertmanager inhibit rules for the pairwatch alerts. GENERATED from
# src/pairwatch/alerting/rules.py. Merge the list into the `inhibit_rules:` of your
# alertmanager.yml (Alertmanager >= 0.22 for source_matchers / target_matchers).
#
# One fault, one notification: a more specific alert holds back the ones it explains, for the
# same target (`equal` treats a label missing on both alerts as equal).
#  - PairwatchResponseCountMismatch (info) is a symptom: missing, unknown-id and null-id
#    replies all change a batch's response count.
#  - A fast burn holds back the slow burn of the same side; a quiet job that answers nothing
#    holds back both burns of its side.
#  - A scrape that fails holds back the absence and traffic-drop alerts of its job, and an
#    absent job holds back its traffic drop.
# No alert of one side inhibits another side's: a client fault and a server fault on one
# target are two problems with two owners, and both must reach someone.
"""


def _inhibit(source: Sequence[str], target: Sequence[str], equal: Sequence[str]) -> str:
    def matcher(names: Sequence[str]) -> str:
        op = "=~" if len(names) > 1 else "="
        return f"      - 'alertname{op}\"{'|'.join(names)}\"'\n"

    return (
        "  - source_matchers:\n"
        + matcher(source)
        + "    target_matchers:\n"
        + matcher(target)
        + f"    equal: [{', '.join(equal)}]\n"
    )


def render_inhibit(cfg: Config = DEFAULT) -> str:
    rules = all_rules(cfg)
    names = [rule.name for rule in rules]
    # Every alert that names a side explains a count mismatch on its target.
    causes = [
        rule.name
        for rule in rules
        if rule.blame != "none"
        and rule.name not in ("PairwatchResponseCountMismatch", "PairwatchNetworkLosesReplies")
    ]
    text = INHIBIT_HEADER + "inhibit_rules:\n"
    text += _inhibit(causes, ["PairwatchResponseCountMismatch"], cfg.by_labels)
    target_with_blame = (*cfg.by_labels, "blame")
    for rule in rules:
        if rule.name.endswith("FastBurn"):
            slow = rule.name.replace("FastBurn", "SlowBurn")
            text += _inhibit([rule.name], [slow], target_with_blame)
        if "AnswersNothing" in rule.name:
            stem = [
                n for n in names if n.endswith("FastBurn") and _side_of(n) == _side_of(rule.name)
            ]
            burns = [stem[0], stem[0].replace("FastBurn", "SlowBurn")]
            text += _inhibit([rule.name], burns, target_with_blame)
    if "PairwatchScrapeDown" in names:
        text += _inhibit(
            ["PairwatchScrapeDown"], ["PairwatchJobAbsent", "PairwatchTrafficDrop"], cfg.group_by
        )
    text += _inhibit(["PairwatchJobAbsent"], ["PairwatchTrafficDrop"], cfg.group_by)
    return text


def _side_of(name: str) -> str:
    return "ServerOrNetwork" if name.startswith("PairwatchServerOrNetwork") else "Server"
