"""The CLI as other processes use it: the first stdout line is the URL."""

from __future__ import annotations

import subprocess
import sys

import pytest
from chaos_helpers import batch, client, ids, subprocess_env

from pairwatch.chaos.cli import main


def start(*args):
    proc = subprocess.Popen(
        [sys.executable, "-m", "pairwatch.chaos", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=subprocess_env(),
    )
    url = proc.stdout.readline().decode().strip()
    return proc, url


def stop(proc):
    proc.terminate()
    try:
        return proc.wait(5)
    finally:
        proc.stdout.close()
        proc.stderr.close()


def test_http_with_fault_mix_and_proxy(tmp_path):
    server, url = start("http", "--port", "0", "--fault-mix", "reorder=1.0", "--seed", "1")
    record = tmp_path / "rec.jsonl"
    proxy, proxy_url = start(
        "proxy", "--upstream", url, "--script=-;drop:indices=0", "--record", str(record)
    )
    try:
        assert url.startswith("http://127.0.0.1:")
        assert ids(client().post(url, json=batch(3)).json()) == [2, 1, 0]
        assert ids(client().post(proxy_url, json=batch(3)).json()) == [2, 1, 0]
        assert ids(client().post(proxy_url, json=batch(3)).json()) == [1, 0]
    finally:
        assert stop(proxy) == 0
        stop(server)
    assert '"kind": "drop"' in record.read_text()


def test_ws_mode_prints_ws_url():
    proc, url = start("ws", "--fault", "reorder")
    try:
        assert url.startswith("ws://127.0.0.1:")
    finally:
        stop(proc)


@pytest.mark.parametrize(
    "argv",
    [
        ["http", "--fault", "explode"],
        ["http", "--fault-mix", "drop"],
        ["http", "--fault", "drop", "--fault-mix", "drop=0.1"],
        ["stdio-proxy"],
    ],
)
def test_bad_options_exit_2(argv):
    assert main(argv) == 2
