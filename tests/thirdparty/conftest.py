"""Real third-party JSON-RPC servers on 127.0.0.1: PyPI jsonrpcserver and npm jayson.

Each is started as an application would run it; a test that needs one skips naming the
install step when it is absent, and fails instead under CI=true.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from components import need, require

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))
NODE_MODULES = HERE.parent / "servers" / "node_modules"


@pytest.fixture(scope="module")
def jsonrpcserver_url() -> Iterator[str]:
    need("jsonrpcserver", "pip install -e '.[test]' (or bash scripts/bootstrap.sh)")
    from jsonrpcserver_http import serve

    server, thread = serve()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


@pytest.fixture(scope="module")
def jayson_url() -> Iterator[str]:
    node = shutil.which("node")
    require(node is not None, "node", "apt-get install nodejs")
    require(
        (NODE_MODULES / "jayson").is_dir(),
        "npm jayson",
        "npm install --prefix tests/servers (or bash scripts/bootstrap.sh)",
    )
    proc = subprocess.Popen(
        [str(node), str(HERE / "jayson_server.cjs")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env={**os.environ, "NODE_PATH": str(NODE_MODULES)},
        text=True,
    )
    try:
        assert proc.stdout is not None
        port = proc.stdout.readline().strip()  # the server prints its port once listening
        assert port.isdigit(), f"jayson did not start (exit code {proc.poll()})"
        yield f"http://127.0.0.1:{port}/"
    finally:
        if proc.stdin is not None:
            proc.stdin.close()  # the script exits when its stdin ends
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
