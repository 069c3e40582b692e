"""Start a real anvil node on 127.0.0.1 for the web3 tests (imported by module name)."""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LOCAL = ROOT / "tests/servers/node_modules/@foundry-rs/anvil-linux-amd64/bin/anvil"
INSTALL = "npm ci --prefix tests/servers (scripts/bootstrap.sh runs it)"
_LISTENING = re.compile(r"Listening on 127\.0\.0\.1:(\d+)")


def find_anvil() -> str | None:
    """The project's pinned binary first, else one on PATH."""
    if LOCAL.is_file():
        return str(LOCAL)
    return shutil.which("anvil")


class Anvil:
    """One anvil process; its log goes to a file so the pipe can never fill up."""

    def __init__(self, binary: str, log: Path) -> None:
        self.log = log
        self._out = log.open("w")
        self.proc = subprocess.Popen(
            [binary, "--host", "127.0.0.1", "--port", "0"],
            stdout=self._out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        self.port = self._wait_for_port(20.0)

    def _wait_for_port(self, timeout: float) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = _LISTENING.search(self.log.read_text(errors="replace"))
            if found:
                return int(found.group(1))
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"anvil did not start: {self.log.read_text(errors='replace')[-500:]}")

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self._out.close()
