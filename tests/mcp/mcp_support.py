"""Real MCP servers on 127.0.0.1 for the tests: the SDK server and server-everything (node).

Servers are started as subprocesses; HTTP ones are polled until their port answers rather
than slept on, and stopped by their own pid.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from mcp import types

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
SDK_SERVER = str(HERE / "sdk_server.py")
LOOPBACK = str(HERE / "loopback.cjs")
EVERYTHING = (
    ROOT / "tests/servers/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
)
INSTALL = "bash scripts/bootstrap.sh installs it (npm ci --prefix tests/servers)"
ENV = {**os.environ, "PYTHONPATH": str(ROOT / "src")}


def node_available() -> bool:
    return shutil.which("node") is not None and EVERYTHING.is_file()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for_port(port: int, proc: subprocess.Popen[bytes], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.05)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port}")


@contextlib.contextmanager
def serve(
    argv: list[str], port: int, env: dict[str, str] | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(argv, env=env or ENV, stdout=subprocess.DEVNULL)
    try:
        wait_for_port(port, proc)
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextlib.contextmanager
def sdk_http(*mode: str) -> Iterator[str]:
    """The SDK server: () SSE replies, ("json",), ("json", "stateless"), ("sse",), or
    ("sse-drop",) (the SSE transport, dropping the ``dropped`` tool's reply)."""
    port = free_port()
    if mode[:1] in (("sse",), ("sse-drop",)):
        with serve([sys.executable, SDK_SERVER, mode[0], str(port)], port):
            yield f"http://127.0.0.1:{port}/sse"
        return
    with serve([sys.executable, SDK_SERVER, "http", str(port), *mode], port):
        yield f"http://127.0.0.1:{port}/mcp"


@contextlib.contextmanager
def everything_http() -> Iterator[str]:
    with everything_http_process() as (url, _proc):
        yield url


@contextlib.contextmanager
def everything_http_process() -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """server-everything over streamable HTTP, and its process (to kill it mid-call)."""
    port = free_port()
    env = {**ENV, "PORT": str(port)}
    argv = ["node", "--require", LOOPBACK, str(EVERYTHING), "streamableHttp"]
    with serve(argv, port, env) as proc:
        yield f"http://127.0.0.1:{port}/mcp", proc


def child_running(needle: str) -> int:
    """The pid of this process's child whose command line holds ``needle`` (a stdio server
    the SDK started, whose process it does not hand out)."""
    me = os.getpid()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == me and needle in cmdline:
            return int(entry.name)
    raise LookupError(needle)


def sdk_stdio_command() -> tuple[str, list[str]]:
    return sys.executable, [SDK_SERVER]


def chaos_stdio_command(*faults: str, script: str | None = None) -> tuple[str, list[str]]:
    """The SDK server behind ``python -m pairwatch.chaos stdio-proxy``."""
    args = ["-m", "pairwatch.chaos", "stdio-proxy"]
    if script is not None:
        args.append(f"--script={script}")
    for fault in faults:
        args += ["--fault", fault]
    return sys.executable, [*args, "--", sys.executable, SDK_SERVER]


async def sampling(
    ctx: object, params: types.CreateMessageRequestParams
) -> types.CreateMessageResult:
    return types.CreateMessageResult(
        role="assistant", model="test", content=types.TextContent(type="text", text="sampled")
    )


async def elicitation(ctx: object, params: object) -> types.ElicitResult:
    return types.ElicitResult(action="decline")


ROOTS = [types.Root(uri="file:///tmp/pairwatch-root", name="pairwatch")]  # type: ignore[arg-type]


async def list_roots(ctx: object) -> types.ListRootsResult:
    return types.ListRootsResult(roots=ROOTS)


def text(result: types.CallToolResult) -> str:
    content = result.content[0]
    assert isinstance(content, types.TextContent)
    return content.text


FAULTS = (
    "batch.missing_response",
    "batch.response_count_mismatch",
    "batch.unknown_id_response",
    "batch.null_id_response",
)
"""Counters a healthy MCP session, with or without cancellations, leaves at zero."""


KINDS = ("stdio", "memory", "http-sse", "http-json", "http-stateless")
"""Every way the SDK's own server can be reached: stdio, in-process, streamable HTTP with
SSE replies, with JSON replies, and stateless."""


def targets() -> list[tuple[str, str]]:
    """Each kind in both modes: auto (negotiates 2026-07-28) and legacy (2025-11-25)."""
    return [(kind, mode) for kind in KINDS for mode in ("auto", "legacy")]


@contextlib.contextmanager
def sdk_target(kind: str) -> Iterator[object]:
    """What ``Client(...)`` takes to reach the SDK's own server over ``kind``."""
    if kind == "stdio":
        from mcp import StdioServerParameters

        command, args = sdk_stdio_command()
        yield StdioServerParameters(command=command, args=args)
    elif kind == "memory":
        import sdk_server

        yield sdk_server.server
    else:
        flags = {"http-sse": (), "http-json": ("json",), "http-stateless": ("json", "stateless")}
        with sdk_http(*flags[kind]) as url:
            yield url


def sdk_exit_race(exc: BaseException) -> bool:
    """mcp 2.3's own race, with or without pairwatch (about one session in two): in legacy
    JSON-reply mode, a POST still waiting when the session ends is completed by the server's
    teardown and written to the closed read stream (``BrokenResourceError`` at exit)."""
    import anyio

    inner = getattr(exc, "exceptions", ())
    return bool(inner) and all(isinstance(e, anyio.BrokenResourceError) for e in inner)
