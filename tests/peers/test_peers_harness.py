"""The peers' harness itself: its plugin counts faults per test exactly, and the comparison
fails on a behaviour change or an unlisted fault.

A small suite written here plays the peer: real in-process MCP sessions against the SDK's
own server, one healthy call and one that times out on purpose.  It runs in a pytest
subprocess with the plugin, as scripts/peers.py runs the real suites.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import peers  # noqa: E402

pytestmark = pytest.mark.timeout(120)

SUITE = """
import anyio
import pytest
import sdk_server
from mcp import Client, ClientSession
from mcp.shared.exceptions import MCPError
from mcp.shared.memory import create_client_server_memory_streams


def test_healthy():
    async def main():
        async with Client(sdk_server.server, mode="legacy") as client:
            result = await client.call_tool("add", {"a": 1, "b": 2})
            return result.content[0].text
    assert anyio.run(main) == "3"


def test_times_out():
    low = sdk_server.server._lowlevel_server

    async def main():
        async with create_client_server_memory_streams() as (client, server):
            async with anyio.create_task_group() as tg:
                tg.start_soon(lambda: low.run(*server, low.create_initialization_options()))
                async with ClientSession(*client) as s:
                    await s.initialize()
                    with pytest.raises(MCPError):
                        await s.call_tool("slow", {"seconds": 5}, read_timeout_seconds=0.2)
                tg.cancel_scope.cancel()
    anyio.run(main)
"""

TIMEOUT_FAULTS = {
    "batch.missing_response[mcp/memory/timeout]": 1,
    "batch.response_count_mismatch[mcp/memory]": 1,
    "batch.closed[mcp/memory/responses_missing]": 1,
}


def run_suite(tmp_path: Path, mode: str) -> dict[str, dict]:
    (tmp_path / "test_sample.py").write_text(SUITE, encoding="utf-8")
    report = tmp_path / f"{mode}.json"
    paths = [ROOT / "tests" / "peers", ROOT / "tests" / "mcp", ROOT / "src"]
    env = {
        **os.environ,
        "PAIRWATCH_PEERS": mode,
        "PAIRWATCH_PEERS_REPORT": str(report),
        "PYTHONPATH": os.pathsep.join(map(str, paths)),
    }
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "pairwatch_peers_plugin",
            "-p", "no:cacheprovider", "-p", "no:asyncio", "test_sample.py"]  # fmt: skip
    done = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, timeout=100)
    assert done.returncode == 0, done.stdout.decode()[-3000:]
    data = json.loads(report.read_text(encoding="utf-8"))
    assert data["mode"] == mode
    return data["tests"]


def test_plugin_counts_each_tests_faults_exactly(tmp_path):
    bare = run_suite(tmp_path, "bare")
    inst = run_suite(tmp_path, "instrumented")
    assert {k: v["outcome"] for k, v in bare.items()} == {
        "test_sample.py::test_healthy": "passed",
        "test_sample.py::test_times_out": "passed",
    }
    assert {k: v["faults"] for k, v in bare.items()} == {k: {} for k in bare}
    assert inst["test_sample.py::test_healthy"] == {"outcome": "passed", "faults": {}}
    assert inst["test_sample.py::test_times_out"] == {"outcome": "passed", "faults": TIMEOUT_FAULTS}

    # Unlisted, the timeout is a failure of the run; listed with its series, it is not.
    (problem,) = peers.compare("sample", bare, inst, [])
    assert "test_times_out" in problem
    assert "healthy exchange" in problem
    listed = peers.Allowed(
        "test_sample.py::test_times_*",
        ("batch.missing_response[mcp/*/timeout]", "batch.closed[*]", "batch.response_count*"),
        "times out on purpose",
    )
    assert peers.compare("sample", bare, inst, [listed]) == []
    # An allow-list line covers only the series it names.
    narrow = peers.Allowed("test_sample.py::*", ("batch.missing_response[*]",), "too narrow")
    assert len(peers.compare("sample", bare, inst, [narrow])) == 1


def test_compare_fails_on_a_changed_outcome_and_on_internal_errors():
    bare = {"t.py::a": {"outcome": "passed", "faults": {}}}
    changed = {"t.py::a": {"outcome": "failed", "faults": {}}}
    assert peers.compare("s", bare, changed, []) == ["s: t.py::a: passed bare, failed instrumented"]
    broken = {"t.py::a": {"outcome": "passed", "faults": {"pairwatch.internal_errors[x/y]": 1}}}
    everything = peers.Allowed("*", ("*",), "covers all")
    (problem,) = peers.compare("s", bare, broken, [everything])
    assert "pairwatch failed inside the client" in problem


def test_allowlist_lines_all_give_a_reason(tmp_path):
    entries = peers.load_allowlist()
    assert entries
    assert all(e.reason and e.faults for e in entries)
    bad = tmp_path / "allow.txt"
    bad.write_text("tests/x.py::* | batch.missing_response[*]\n", encoding="utf-8")
    with pytest.raises(ValueError, match="reason"):
        peers.load_allowlist(bad)
