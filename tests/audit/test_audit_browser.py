"""``pairwatch audit`` on HARs that Playwright's own recorder wrote while driving Chromium.

One browser launch records four captures of the same page session (see ``capture_plan``):
bodies embedded, omitted, attached as side files beside the ``.har``, and attached inside a
``.zip``.  The page is served at the chaos server's origin on 127.0.0.1 and sends its batches
with ``fetch``, so every entry is what a real browser put on the wire and what a real
recorder kept of it.  Expected counts come from the chaos server's record of its faults.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from capture_plan import POSTS, expected, plan_posts, script
from components import require

from pairwatch.audit import audit_file
from pairwatch.audit.report import build
from pairwatch.chaos import ChaosServer, FaultScript

HERE = Path(__file__).resolve().parent
RECORDER = HERE / "browser_har.cjs"
PLAYWRIGHT = HERE.parent / "servers" / "node_modules" / "playwright-core"
CHROMIUM = Path("/usr/bin/chromium")
SRC = str(HERE.parents[1] / "src")
MODES = ("embed", "omit", "attach", "zip")
POSTED = len(POSTS)  # every post carries a body
JSONRPC_POSTS = sum(p.jsonrpc for p in POSTS)


@pytest.fixture(scope="module")
def browser(tmp_path_factory) -> dict[str, Any]:
    require(CHROMIUM.exists(), "Debian's chromium", "apt-get install chromium (as root)")
    require(shutil.which("node") is not None, "node", "install Node.js 20 or later")
    require(PLAYWRIGHT.exists(), "the npm package playwright-core", "bash scripts/bootstrap.sh")
    root = tmp_path_factory.mktemp("browser")
    paths = {
        "embed": root / "embed" / "capture.har",
        "omit": root / "omit" / "capture.har",
        "attach": root / "attach" / "capture.har",
        "zip": root / "zip" / "capture.zip",
    }
    content = {"embed": "embed", "omit": "omit", "attach": "attach", "zip": "attach"}
    for p in paths.values():
        p.parent.mkdir()
    with ChaosServer(FaultScript(script(len(MODES)))) as server:
        plan = {
            "origin": server.url.rstrip("/"),
            "posts": plan_posts(),
            "executable": str(CHROMIUM),
            "captures": [{"path": str(paths[m]), "content": content[m]} for m in MODES],
        }
        plan_file = root / "plan.json"
        plan_file.write_text(json.dumps(plan))
        run = subprocess.run(
            ["node", str(RECORDER), str(plan_file)],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert run.returncode == 0, run.stderr
        seen = json.loads(run.stdout)
        injected = list(server.injected)
        exchanges = server.exchanges
    # Every post of every session got an HTTP 200 reply the page read whole.
    assert [[status for status, _ in s] for s in seen] == [[200] * POSTED] * len(MODES)
    assert exchanges == POSTED * len(MODES)
    return {"paths": paths, "injected": injected}


def _report(path: Path) -> dict[str, Any]:
    return build([audit_file(str(path))], [])


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pairwatch", "audit", *args],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": SRC, "PATH": "/usr/bin:/bin"},
        timeout=60,
    )


def test_the_server_injected_what_the_script_asked(browser):
    wanted = [p.fault.kind for p in POSTS if p.fault is not None] * len(MODES)
    assert [i.kind for i in browser["injected"]] == wanted


def test_embedded_bodies_count_exactly(browser):
    report = _report(browser["paths"]["embed"])
    want = expected(browser["injected"], MODES.index("embed"))
    f = report["files"][0]
    assert f["read"] == 1 + POSTED  # the page itself, then the posts
    assert f["skipped"] == {"not JSON-RPC": 2}  # the page's GET and the beacon
    assert f["bodies_absent"] == {}
    assert f["bodies_from_side_files"] == 0
    assert report["totals"] == dict(want.totals)
    assert {c["transport"]: c["diagnoses"] for c in f["channels"]} == {
        k: dict(v) for k, v in want.diagnoses.items()
    }
    assert report["status"] == 0


def test_the_beacon_counts_nothing(browser, tmp_path):
    """The browser's beacon, whose value says ``jsonrpc``, answered by the server with a
    JSON-RPC error: the request is not JSON-RPC by structure, so nothing counts."""
    har = json.loads(browser["paths"]["embed"].read_text())
    entries = har["log"]["entries"]
    beacons = [e for e in entries if e["request"]["url"].endswith("/beacon")]
    assert len(beacons) == 1
    assert '"jsonrpc"' in beacons[0]["request"]["postData"]["text"]
    assert '"jsonrpc"' in beacons[0]["response"]["content"]["text"]
    har["log"]["entries"] = beacons
    only = tmp_path / "beacon.har"
    only.write_text(json.dumps(har))
    report = _report(only)
    f = report["files"][0]
    assert f["read"] == 1
    assert f["skipped"] == {"not JSON-RPC": 1}
    assert f["channels"] == []
    assert f["worst"] == []
    assert set(report["totals"].values()) == {0}
    run = _cli(str(only))
    assert run.returncode == 0, run.stderr
    assert "no JSON-RPC traffic found" in run.stdout
    assert "total: batches 0, requests 0\n" in run.stdout


def test_omitted_bodies_exit_3_and_say_so(browser):
    path = browser["paths"]["omit"]
    run = _cli(str(path), "--json")
    assert run.returncode == 3, run.stderr
    report = json.loads(run.stdout)
    f = report["files"][0]
    assert f["bodies_absent"] == {"request body omitted when recorded": POSTED}
    assert f["channels"] == []
    assert set(report["totals"].values()) == {0}
    assert run.stderr.startswith(f"pairwatch audit: {path}: the capture holds no bodies to pair")
    assert "record_har_content='embed'" in run.stderr
    text = _cli(str(path))
    assert text.returncode == 3
    assert "no JSON-RPC traffic found" not in text.stdout
    flat = " ".join(text.stdout.split())  # the text report wraps at 96 columns
    why = f"({POSTED} request bodies omitted when recorded)"
    assert f"bodies absent: the capture holds no bodies to pair {why}" in flat


def test_side_files_beside_the_har_are_read(browser):
    report = _report(browser["paths"]["attach"])
    want = expected(browser["injected"], MODES.index("attach"))
    f = report["files"][0]
    assert f["bodies_absent"] == {}
    # request and reply of every JSON-RPC post, and the beacon's request (then skipped)
    assert f["bodies_from_side_files"] == 2 * JSONRPC_POSTS + 1
    assert f["skipped"] == {"not JSON-RPC": 2}
    assert report["totals"] == dict(want.totals)
    assert report["status"] == 0


def test_a_zip_archive_is_read_with_its_members(browser):
    path = browser["paths"]["zip"]
    want = expected(browser["injected"], MODES.index("zip"))
    run = _cli(str(path), "--json", "--fail-on", "missing>0")
    assert run.returncode == 1, run.stderr  # the drop and the id faults left ids missing
    report = json.loads(run.stdout)
    f = report["files"][0]
    assert f["format"] == "har"
    assert f["bodies_absent"] == {}
    assert f["bodies_from_side_files"] == 2 * JSONRPC_POSTS + 1
    assert report["totals"] == dict(want.totals)
    assert report["thresholds"][0]["value"] == want.totals["missing"]


def test_side_files_that_are_gone_make_bodies_absent(browser, tmp_path):
    lone = tmp_path / "moved.har"
    shutil.copyfile(browser["paths"]["attach"], lone)  # the .har without its side files
    run = _cli(str(lone), "--json")
    assert run.returncode == 3, run.stderr
    f = json.loads(run.stdout)["files"][0]
    assert f["bodies_absent"] == {"request body in a side file that is not there": POSTED}
    assert f["bodies_from_side_files"] == 0
