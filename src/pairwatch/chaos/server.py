"""`ChaosServer`: one handle for async tests, sync tests and the CLI.

Sync tests (requests, httpx.Client, web3) cannot share the test's thread with
an event loop, so `run_in_thread` owns a loop in a daemon thread; the fault
plan and the record are lock-protected so the test thread may read and change
them while the server runs.
"""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Literal

from .backend import Backend, Handler
from .engine import Engine, ReplySource
from .faults import Fault, FaultPlan, Injected, Step
from .http_transport import HttpTransport, SseDefault, SseMode
from .upstream import HttpUpstream, UpstreamError

Transport = Literal["http", "ws"]
Faults = FaultPlan | Fault | Sequence[Step] | None
START_TIMEOUT = 10.0


class ChaosServer:
    """A fault-injecting JSON-RPC 2.0 server (or proxy, with ``upstream``) on 127.0.0.1."""

    def __init__(
        self,
        faults: Faults = None,
        *,
        transport: Transport = "http",
        host: str = "127.0.0.1",
        port: int = 0,
        handlers: Mapping[str, Handler] | None = None,
        upstream: str | None = None,
        sse: SseDefault = "auto",
        sse_mode: SseMode = "elements",
        empty_status: int = 200,
        upstream_timeout: float = 30.0,
    ) -> None:
        self.transport: Transport = transport
        self.host = host
        self.upstream = upstream
        self._upstream_timeout = upstream_timeout
        source: ReplySource
        if upstream is None:
            source = Backend(handlers)
        elif transport == "http":
            source = HttpUpstream(upstream, timeout=upstream_timeout)
        else:
            from .ws_transport import WsUpstream

            source = WsUpstream(upstream, timeout=upstream_timeout)
        self.engine = Engine(source, faults)
        self._port = port
        self._http: HttpTransport | None = None
        self._ws: object | None = None
        if transport == "http":
            self._http = HttpTransport(
                self.engine,
                host=host,
                port=port,
                sse=sse,
                sse_mode=sse_mode,
                empty_status=empty_status,
                upstream_errors=UpstreamError,
            )
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopped: asyncio.Event | None = None

    # -- what tests look at -------------------------------------------------
    @property
    def port(self) -> int:
        if self._http is not None:
            return self._http.port
        return self._port

    @property
    def url(self) -> str:
        scheme = "http" if self.transport == "http" else "ws"
        return f"{scheme}://{self.host}:{self.port}/"

    @property
    def sse_url(self) -> str:
        """The URL that always answers with an event stream, one event per element."""
        return f"{self.url}sse"

    @property
    def injected(self) -> list[Injected]:
        return self.engine.injected

    @property
    def counts(self) -> Counter[str]:
        return self.engine.counts

    @property
    def exchanges(self) -> int:
        return self.engine.exchanges

    def set_faults(self, faults: Faults) -> None:
        self.engine.set_faults(faults)

    def reset(self) -> None:
        self.engine.reset()

    # -- async lifecycle ----------------------------------------------------
    async def start(self) -> ChaosServer:
        if self._http is not None:
            await self._http.start()
        else:
            from .ws_transport import WsTransport

            ws = WsTransport(
                self.engine,
                host=self.host,
                port=self._port,
                upstream=self.upstream,
                timeout=self._upstream_timeout,
            )
            self._port = await ws.start()
            self._ws = ws
        return self

    async def stop(self) -> None:
        if self._http is not None:
            await self._http.stop()
        if self._ws is not None:
            from .ws_transport import WsTransport

            assert isinstance(self._ws, WsTransport)
            await self._ws.stop()
            self._ws = None

    async def serve_forever(self) -> None:
        """Run until `stop` is called from elsewhere (the CLI's signal handler)."""
        self._stopped = asyncio.Event()
        await self.start()
        try:
            await self._stopped.wait()
        finally:
            await self.stop()

    def request_stop(self) -> None:
        if self._stopped is not None:
            self._stopped.set()

    async def __aenter__(self) -> ChaosServer:
        return await self.start()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    # -- thread lifecycle ---------------------------------------------------
    def run_in_thread(self) -> ChaosServer:
        """Start on a private loop in a daemon thread; use as ``with srv.run_in_thread():``."""
        if self._thread is not None:
            raise RuntimeError("server already running in a thread")
        ready = threading.Event()
        failure: list[BaseException] = []

        def main() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                loop.run_until_complete(self.start())
            except BaseException as e:
                failure.append(e)
                ready.set()
                loop.close()
                return
            ready.set()
            try:
                loop.run_forever()
            finally:
                loop.run_until_complete(self.stop())
                loop.run_until_complete(loop.shutdown_default_executor())
                loop.close()

        self._thread = threading.Thread(target=main, name=f"chaos-{self.transport}", daemon=True)
        self._thread.start()
        if not ready.wait(START_TIMEOUT):
            raise RuntimeError("chaos server did not start in time")
        if failure:
            self._thread = None
            raise failure[0]
        return self

    def stop_thread(self) -> None:
        thread, loop = self._thread, self._loop
        if thread is None or loop is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        thread.join(START_TIMEOUT)
        self._thread = self._loop = None

    def __enter__(self) -> ChaosServer:
        if self._thread is None:
            self.run_in_thread()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop_thread()
