"""``pairwatch audit`` on a HAR that mitmproxy itself exported (``mitmdump --set hardump``).

mitmdump runs in its own venv (``.venv-mitmproxy``, made by ``scripts/bootstrap.sh``: its
pins clash with the dev venv's) with two listeners: a reverse proxy in front of the chaos
server and a regular forward proxy.  httpx sends the session of ``capture_plan`` once through
each; mitmproxy writes the HAR when it shuts down on SIGINT.  Expected counts come from the
chaos server's record of the faults it injected.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest
from capture_plan import POSTS, expected, script
from components import require

from pairwatch.audit import audit_file
from pairwatch.audit.report import build
from pairwatch.chaos import ChaosServer, FaultScript

ROOT = Path(__file__).resolve().parents[2]
MITMDUMP = ROOT / ".venv-mitmproxy" / "bin" / "mitmdump"
READY_WITHIN = 60.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _wait_listening(port: int, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + READY_WITHIN
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()[1]
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.05)  # a deadline poll, not a fixed wait
    pytest.fail(f"mitmdump did not listen on {port} within {READY_WITHIN} s")


def _session(client: httpx.Client, base: str) -> None:
    for post in POSTS:
        reply = client.post(
            base + post.path,
            content=json.dumps(post.body),
            headers={"content-type": post.content_type},
        )
        assert reply.status_code == 200


@pytest.fixture(scope="module")
def proxied(tmp_path_factory) -> dict[str, Any]:
    require(
        MITMDUMP.exists(), "mitmproxy's mitmdump (.venv-mitmproxy)", "bash scripts/bootstrap.sh"
    )
    root = tmp_path_factory.mktemp("mitm")
    har = root / "mitm.har"
    with ChaosServer(FaultScript(script(2))) as server:
        reverse, regular = _free_port(), _free_port()
        proc = subprocess.Popen(
            [
                str(MITMDUMP),
                "-q",
                "--listen-host",
                "127.0.0.1",
                "--mode",
                f"reverse:{server.url}@{reverse}",
                "--mode",
                f"regular@{regular}",
                "--set",
                f"hardump={har}",
                "--set",
                f"confdir={root / 'conf'}",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            _wait_listening(reverse, proc)
            _wait_listening(regular, proc)
            with httpx.Client(timeout=10) as client:
                _session(client, f"http://127.0.0.1:{reverse}")
            proxy = f"http://127.0.0.1:{regular}"
            with httpx.Client(timeout=10, proxy=proxy, trust_env=False) as client:
                _session(client, server.url.rstrip("/"))
            proc.send_signal(signal.SIGINT)  # mitmdump writes the HAR as it shuts down
            _, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        assert proc.returncode == 0, err
        injected = list(server.injected)
        assert server.exchanges == 2 * len(POSTS)
    return {"har": har, "injected": injected}


def test_mitmproxy_har_counts_exactly(proxied):
    want = Counter[str]()
    diagnoses: dict[str, Counter[str]] = {}
    for run in (0, 1):
        e = expected(proxied["injected"], run)
        want.update(e.totals)
        for kind, counts in e.diagnoses.items():
            diagnoses.setdefault(kind, Counter()).update(counts)
    report = build([audit_file(str(proxied["har"]))], [])
    f = report["files"][0]
    assert f["read"] == 2 * len(POSTS)
    assert f["skipped"] == {"not JSON-RPC": 2}  # the beacon, once per listener
    assert f["bodies_absent"] == {}
    assert report["totals"] == dict(want)
    assert {c["transport"]: c["diagnoses"] for c in f["channels"]} == {
        k: dict(v) for k, v in diagnoses.items()
    }
    assert report["status"] == 0


def test_mitmproxy_entries_are_what_was_sent(proxied):
    """The HAR holds the bodies as sent: the reader's input is mitmproxy's, not ours."""
    entries = json.loads(proxied["har"].read_text())["log"]["entries"]
    sent = [json.loads(e["request"]["postData"]["text"]) for e in entries]
    assert sent == [p.body for p in POSTS] * 2
