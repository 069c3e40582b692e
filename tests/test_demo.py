"""`pairwatch demo`, the README's main job: counters move, the page passes promtool, and the
summary's counters equal what the chaos server wrote, row by row, on every run."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request

import pytest
from components import require
from prometheus_client.parser import text_string_to_metric_families


def totals(text: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[s.name] = out.get(s.name, 0.0) + s.value
    return out


def test_demo_moves_the_counters_and_serves_a_clean_page():
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pairwatch.cli",
            "demo",
            "--duration",
            "20",
            "--plain",
            "--metrics-port",
            "0",
            "--rate",
            "40",
            "--faults",
            "drop=0.3,null_id=0.2,wrong_id=0.2,reorder=0.5",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        url = re.search(r"metrics (http://127\.0\.0\.1:\d+/metrics)", first)
        assert url, first
        deadline = time.monotonic() + 15
        seen: dict[str, float] = {}
        text = ""
        while time.monotonic() < deadline:
            text = urllib.request.urlopen(url.group(1), timeout=5).read().decode()
            seen = totals(text)
            if (
                seen.get("batch_closed_total", 0) >= 20
                and seen.get("batch_null_id_response_total", 0) > 0
            ):
                break
            time.sleep(0.5)
        for name in (
            "batch_closed_total",
            "batch_requests_total",
            "batch_missing_response_total",
            "batch_unknown_id_response_total",
            "batch_null_id_response_total",
            "batch_out_of_order_total",
            "batch_pair_latency_seconds_count",
            "batch_size_count",
        ):
            assert seen.get(name, 0) > 0, (name, seen)
        # Every request closes paired or missing: the books balance on the live page.
        assert (
            seen["batch_pair_latency_seconds_count"] + seen["batch_missing_response_total"]
            <= seen["batch_requests_total"]
        )
        require(
            shutil.which("promtool") is not None,
            "promtool",
            "apt-get install prometheus (done by .ci/run)",
        )
        check = subprocess.run(
            ["promtool", "check", "metrics"], input=text, text=True, capture_output=True, timeout=30
        )
        assert check.returncode == 0, check.stdout + check.stderr
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=20)
    assert proc.returncode == 0, out
    assert "pairwatch demo summary" in out
    rows = check_rows(out)
    assert all(want == got for _, want, got, _ in rows), rows
    assert "every counter agrees." in out


ROW = re.compile(r"^  (?P<label>[a-z -]+?) +(?P<want>\d+) +(?P<got>\d+)  (?P<mark>\S+)$")
LABELS = {
    "batches closed",
    "requests sent",
    "unknown-id responses",
    "missing responses",
    "null-id responses",
    "count-mismatch batches",
    "out-of-order batches",
    "duplicate ids sent",
    "invalid responses",
    "protocol violations",
}


def check_rows(out: str) -> list[tuple[str, int, int, str]]:
    """The summary's table: (counter, what the server wrote, what pairwatch counted, mark)."""
    table = out.split("against what the server wrote (its own record):", 1)[1]
    rows = []
    for line in table.splitlines():
        found = ROW.match(line)
        if found:
            rows.append((found["label"], int(found["want"]), int(found["got"]), found["mark"]))
    assert {label for label, *_ in rows} == LABELS, out
    return rows


# Fault mixes whose effects overlap inside one reply (a duplicated element then nulled, a
# reorder of a reply with a dropped element), stream cuts, garbage bodies, one object for a
# batch, batches of one; each with the client's own duplicate-id bug.
MIXES = [
    ("default", [], 8, 1),
    (
        "overlapping",
        [
            "--faults",
            "drop=0.5,duplicate=0.5,null_id=0.5,wrong_id=0.3,"
            "id_type=0.3,reorder:mode=shuffle=0.5,bad_version=0.3",
        ],
        3,
        7,
    ),
    (
        "broken bodies",
        [
            "--faults",
            "cut=0.2,cut:count=2=0.1,unparseable=0.2,reorder=0.5,"
            "single_for_batch=0.2,both_result_error=0.3",
        ],
        5,
        11,
    ),
    (
        "batches of one",
        ["--faults", "drop=0.4,single_for_batch=0.3,duplicate=0.3,null_id=0.2"],
        1,
        23,
    ),
]


@pytest.mark.parametrize(("mix", "faults", "batch_size", "seed"), MIXES, ids=[m[0] for m in MIXES])
def test_the_summary_matches_the_servers_record_exactly(mix, faults, batch_size, seed):
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pairwatch",
            "demo",
            "--duration",
            "2",
            "--plain",
            "--metrics-port",
            "0",
            "--rate",
            "60",
            "--client-bug",
            "0.3",
            "--batch-size",
            str(batch_size),
            "--seed",
            str(seed),
            *faults,
        ],
        capture_output=True,
        text=True,
        timeout=90,
        env={**os.environ, "PYTHONIOENCODING": "utf-8"},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    rows = check_rows(done.stdout)
    for label, want, got, mark in rows:
        assert (label, got, mark) == (label, want, "\u2713"), done.stdout
    counted = {label: got for label, _, got, _ in rows}
    # Not a table of zeros: faults fired and were counted.
    assert counted["batches closed"] >= 20
    assert counted["requests sent"] == counted["batches closed"] * batch_size
    assert counted["missing responses"] > 0
    assert counted["duplicate ids sent"] > 0 or batch_size == 1
    if mix != "default":
        assert counted["null-id responses"] > 0
    if mix in ("broken bodies", "batches of one"):
        assert counted["protocol violations"] > 0
    assert "every counter agrees." in done.stdout


@pytest.mark.parametrize("faults", [[], ["--faults", "drop=0.2,duplicate=0.2,null_id=0.1"]])
def test_the_lsp_session_summary_matches_the_servers_record_exactly(faults):
    """``--transport lsp``: a home-grown LSP client through ``instrument_streams`` against
    the chaos server's LSP mode; every row agrees with what the server wrote."""
    argv = "demo --transport lsp --duration 3 --plain --metrics-port 0 --rate 40 --seed 5"
    done = subprocess.run(
        [sys.executable, "-m", "pairwatch", *argv.split(), *faults],
        capture_output=True,
        text=True,
        timeout=90,
        env={**os.environ, "PYTHONIOENCODING": "utf-8"},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    rows = check_rows(done.stdout)
    for label, want, got, mark in rows:
        assert (label, got, mark) == (label, want, "\u2713"), done.stdout
    counted = {label: got for label, _, got, _ in rows}
    assert counted["requests sent"] >= 20
    assert counted["missing responses"] > 0
    if faults:  # duplicates at 0.2: the copies are unknown ids
        assert counted["unknown-id responses"] > 0
    assert counted["out-of-order batches"] == counted["protocol violations"] == 0


def test_the_lsp_demo_refuses_batch_faults_in_one_line():
    done = subprocess.run(
        [sys.executable, "-m", "pairwatch", "demo", "--transport", "lsp", "--faults", "reorder=1"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 2
    assert "injects drop, duplicate" in done.stderr
    assert "Traceback" not in done.stderr


DEMO = [sys.executable, "-m", "pairwatch", "demo", "--plain", "--metrics-port", "0"]


def test_ctrl_c_ends_the_demo_at_once_whatever_the_server_does():
    """Every reply held for 25 s: Ctrl-C still ends the demo with its summary at once (it
    waited out the client's timeout before), and the summary names the exchange it cut."""
    import signal

    proc = subprocess.Popen(
        [*DEMO, "--duration", "60", "--faults", "delay:seconds=25=1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().startswith("pairwatch demo")
    time.sleep(2)  # a batch is in flight, held by the server
    started = time.monotonic()
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=30)
    took = time.monotonic() - started
    assert proc.returncode == 0, out
    assert took < 3, took  # a hung exchange no longer holds the stop (it took over 12 s)
    assert "pairwatch demo summary" in out
    assert "the exchange Ctrl-C cut short" in out


def test_the_first_status_line_reads_the_run_so_far():
    """The first plain status (at 5 s) reads the batches of those 5 s: never "last 0 s: no
    pairing failures" under counters that already moved."""
    out = subprocess.run(
        [*DEMO, "--duration", "6", "--faults", "drop=1"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    status = next(line for line in out.splitlines() if line.startswith("[elapsed"))
    reading = out.splitlines()[out.splitlines().index(status) + 1]
    assert int(re.search(r"missing (\d+)", status).group(1)) > 0
    assert reading.startswith("  reading, last 5 s: responses_missing"), reading
