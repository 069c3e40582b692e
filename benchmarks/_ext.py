"""Benchmarks that need an integration from another branch and an external server.

web3's HTTPProvider against anvil, and an MCP stdio session's call loop.  Each section skips
with the reason (and how to get what is missing) when the integration or the tool is absent,
so the script runs on every branch; nothing here is needed for the core sections.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from _common import HERE, Results, Row, interleaved, median_us, ratios
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

import pairwatch

WEB3_TARGET = 1.05  # spans on (issue 16); metrics alone is held to the same


def _anvil() -> str | None:
    for candidate in (
        os.environ.get("ANVIL"),
        shutil.which("anvil"),
        str(HERE.parent / "tests/servers/node_modules/.bin/anvil"),
    ):
        if candidate and Path(candidate).exists():
            return candidate
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _meter() -> MeterProvider:
    return MeterProvider(metric_readers=[InMemoryMetricReader()])


def run_web3(results: Results, size: int, repeats: int, per_block: int) -> None:
    section = f"web3 HTTPProvider {size}-request batch, anvil"
    try:
        from web3 import Web3
    except ImportError:
        results.skip(section, "metrics", "web3 is not installed (pip install 'pairwatch[web3]')")
        return
    anvil = _anvil()
    if anvil is None:
        results.skip(
            section,
            "metrics",
            "anvil not found (set ANVIL=, put it on PATH, or `npm ci` in tests/servers)",
        )
        return
    port = _free_port()
    proc = subprocess.Popen(
        [anvil, "--host", "127.0.0.1", "--port", str(port), "--silent"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                req = urllib.request.Request(
                    url,
                    b'{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}',
                    {"content-type": "application/json"},
                )
                urllib.request.urlopen(req, timeout=1).read()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        addresses = [Web3.to_checksum_address(f"0x{i + 1:040x}") for i in range(size)]

        from _http import _settings

        settings = _settings()

        def make(variant: str) -> Callable[[int], object]:
            w3 = Web3(Web3.HTTPProvider(url))
            if variant != "bare":
                pairwatch.instrument(w3, meter_provider=_meter(), **settings[variant])

            def run(n: int) -> None:
                for _ in range(n):
                    with w3.batch_requests() as batch:
                        for address in addresses:
                            batch.add(w3.eth.get_balance(address))
                        batch.execute()

            return run

        try:
            variants = {name: make(name) for name in ("bare", "metrics", "spans")}
        except TypeError as exc:
            results.skip(section, "metrics", f"no web3 integration on this branch ({exc})")
            return
        timings = interleaved(variants, repeats, per_block)
        bare = median_us(timings, "bare")
        for name in ("metrics", "spans"):
            note = f"bare {bare:,.0f} µs, {name} {median_us(timings, name):,.0f} µs"
            cpu = sorted(ratios(timings, name, cpu=True))
            note += f"; CPU ratio median {cpu[len(cpu) // 2]:.2f}"
            results.add(Row(section, name, "x", ratios(timings, name), WEB3_TARGET, note))
    finally:
        proc.terminate()
        proc.wait(5)


def run_mcp(results: Results, repeats: int, per_block: int) -> None:
    section = "MCP stdio session, call_tool loop"
    try:
        from mcp import ClientSession, StdioServerParameters
        from mcp.client.stdio import stdio_client
    except ImportError:
        results.skip(section, "metrics", "mcp is not installed (pip install 'pairwatch[mcp]')")
        return
    loop = asyncio.new_event_loop()
    stack = AsyncExitStack()
    params = StdioServerParameters(command=sys.executable, args=[str(HERE / "mcp_server.py")])

    async def open_session(instrumented: bool) -> Any:
        read, write = await stack.enter_async_context(stdio_client(params))
        session = await stack.enter_async_context(ClientSession(read, write))
        if instrumented:
            pairwatch.instrument(session, meter_provider=_meter(), spans=False)
        await session.initialize()
        return session

    def make(session: Any) -> Callable[[int], object]:
        async def go(n: int) -> None:
            for i in range(n):
                await session.call_tool("echo", {"x": i})

        return lambda n: loop.run_until_complete(go(n))

    try:
        try:
            bare = loop.run_until_complete(open_session(False))
            instrumented = loop.run_until_complete(open_session(True))
        except TypeError as exc:
            results.skip(section, "metrics", f"no MCP integration on this branch ({exc})")
            return
        timings = interleaved(
            {"bare": make(bare), "metrics": make(instrumented)}, repeats, per_block
        )
        base, metrics = median_us(timings, "bare"), median_us(timings, "metrics")
        note = f"bare {base:,.0f} µs, metrics {metrics:,.0f} µs per call"
        results.add(Row(section, "metrics", "x", ratios(timings, "metrics"), None, note))
    finally:
        with contextlib.suppress(Exception):
            loop.run_until_complete(stack.aclose())
        loop.close()
