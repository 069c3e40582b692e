"""One metric vocabulary: the table, the contract page, what is exported, and the schema URL."""

from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path

import pytest
from jsonrpc_build import dumps, req, res
from opentelemetry.semconv.schemas import Schemas
from prometheus_client.parser import text_string_to_metric_families

import pairwatch
from pairwatch import Options
from pairwatch.audit import audit_file
from pairwatch.audit import prom as audit_prom
from pairwatch.audit.metrics import COUNTERS
from pairwatch.cli import view
from pairwatch.otel import exposition
from pairwatch.otel.names import SCHEMA_URL, SCOPE
from pairwatch.otel.vocabulary import BY_NAME, INSTRUMENTS, label_name, prometheus_name

DOCS = Path(__file__).resolve().parents[1] / "docs" / "metrics.md"
ROW = re.compile(r"^\| `(?P<name>[a-z_.]+)` \| (?P<kind>[a-z]+)[^|]*\| `(?P<series>[a-z_]+)")


def documented() -> dict[str, tuple[str, str]]:
    """Instrument name -> (kind, first Prometheus series) from the table in docs/metrics.md."""
    found = {}
    for line in DOCS.read_text(encoding="utf-8").splitlines():
        m = ROW.match(line)
        if m:
            found[m["name"]] = (m["kind"], m["series"])
    return found


def test_the_contract_page_names_every_instrument_of_the_table_and_no_other():
    docs = documented()
    assert sorted(docs) == sorted(BY_NAME)
    for row in INSTRUMENTS:
        kind, series = docs[row.name]
        assert kind == row.kind, row.name
        expected = row.series if row.kind == "counter" else row.family + "_bucket"
        assert series == expected, row.name


def test_exported_names_are_the_ones_dashboards_query():
    # Pinned by hand: a change to the translation must not rename a series silently.
    assert BY_NAME["batch.pair_latency"].family == "batch_pair_latency_seconds"
    assert BY_NAME["batch.response_lateness"].family == "batch_response_lateness_seconds"
    assert BY_NAME["batch.size"].family == "batch_size"
    assert BY_NAME["batch.missing_response"].series == "batch_missing_response_total"
    assert BY_NAME["batch.late_response"].series == "batch_late_response_total"
    assert BY_NAME["pairwatch.internal_errors"].series == "pairwatch_internal_errors_total"
    assert prometheus_name("rpc.client.call.duration", "s") == "rpc_client_call_duration_seconds"
    assert prometheus_name("x.duration_seconds", "s") == "x_duration_seconds"
    assert label_name("server.address") == "server_address"
    assert label_name("9lives") == "_9lives"


def test_the_audit_report_and_live_view_read_their_rows_from_the_table():
    assert list(COUNTERS) == [
        "batches", "requests", "missing", "unknown_id", "null_id", "count_mismatch",
        "duplicate_id", "invalid_response", "invalid_request", "out_of_order",
        "protocol_violation", "internal_errors",
    ]  # fmt: skip
    assert COUNTERS["missing"] == "batch.missing_response"
    assert [name for name, _ in view.COUNTERS] == [
        "batch.closed", "batch.requests", "batch.missing_response",
        "batch.unknown_id_response", "batch.null_id_response",
        "batch.response_count_mismatch", "batch.duplicate_id", "batch.invalid_response",
        "batch.out_of_order", "batch.protocol_violation",
    ]  # fmt: skip


def test_every_exported_instrument_is_a_row_with_its_unit_and_description(otel, clock):
    channel = pairwatch.open_channel(
        bound=True,
        options=Options(
            meter_provider=otel.meter_provider, tracer_provider=otel.tracer_provider, clock=clock
        ),
    )
    channel.sent(dumps([req(1, "a"), req(2, "b")]))
    clock.advance(0.25)
    channel.received(dumps([res(2), res(9)]))
    channel.close("body_end")
    channel.repaired({"reordered": 1})
    unchecked = pairwatch.open_channel(
        bound=True, meter_provider=otel.meter_provider, tracer_provider=otel.tracer_provider
    )
    unchecked.sent(dumps(req(3, "c")))
    unchecked.unchecked("body_cap")
    data = otel.reader.get_metrics_data()
    exported = {}
    for rm in data.resource_metrics:
        for sm in rm.scope_metrics:
            assert sm.scope.name == SCOPE
            assert sm.scope.schema_url == SCHEMA_URL
            for metric in sm.metrics:
                exported[metric.name] = (metric.unit, metric.description)
    want = {
        row.name: (row.unit, row.description)
        for row in INSTRUMENTS
        # Histograms with no observation and counters never added export nothing.
        if row.name not in ("batch.response_lateness", "pairwatch.internal_errors")
    }
    assert exported == want
    spans = otel.spans()
    assert len(spans) == 5
    assert {s.instrumentation_scope.schema_url for s in spans} == {SCHEMA_URL}


def test_schema_url_is_a_release_that_has_the_names_used():
    assert Schemas.V1_39_0.value == SCHEMA_URL


@pytest.fixture
def endpoint():
    provider, server = exposition.serve(port=0)
    yield provider, f"http://127.0.0.1:{server.server_port}/metrics"
    server.shutdown()


def _sample_names(text: str) -> set[str]:
    return {s.name for f in text_string_to_metric_families(text) for s in f.samples}


def test_live_endpoint_and_audit_text_file_use_the_same_series_names(endpoint, tmp_path):
    """The same exchange, once live through the exposition, once from a capture through the
    audit: the two translations are one, so the sample names are the same set."""
    provider, url = endpoint
    sent, reply = [req(1, "a"), req(2, "b"), req(3, "b")], [res(3), res(1), res(7)]
    channel = pairwatch.open_channel(transport="generic", meter_provider=provider, spans=False)
    channel.sent(dumps(sent))
    channel.received(dumps(reply))
    channel.close("stream_end")
    live = _sample_names(urllib.request.urlopen(url, timeout=5).read().decode())

    capture = tmp_path / "capture.ndjson"
    lines = [
        {"ts": 1.0, "dir": "sent", "channel": "c", "message": sent},
        {"ts": 1.5, "dir": "received", "channel": "c", "message": reply},
        {"ts": 2.0, "dir": "closed", "channel": "c", "reason": "stream_end"},
    ]
    capture.write_text("".join(json.dumps(x) + "\n" for x in lines))
    out = tmp_path / "audit.prom"
    audit_prom.write(str(out), [audit_file(str(capture))])
    offline = _sample_names(out.read_text())
    assert "batch_missing_response_total" in live
    assert "batch_pair_latency_seconds_bucket" in live
    assert live == offline
