"""``pairwatch demo``: watch the counters move against a misbehaving JSON-RPC server.

It starts the chaos server on 127.0.0.1 with a fault mix, instruments ordinary HTTP clients
with one line each, sends batches through them, serves the metrics for Prometheus, and shows
a live view: batches per second, the ``batch.*`` counters, pair-latency percentiles and, in
words, what the counters point to.  Ctrl-C (or ``--duration``) stops it with a summary.
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import random
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from opentelemetry.sdk.metrics.export import InMemoryMetricReader

import pairwatch
from pairwatch.cli import view
from pairwatch.otel import exposition

DEFAULT_FAULTS = (
    "reorder=0.3,drop=0.08,null_id=0.04,wrong_id=0.04,duplicate=0.04,id_type=0.02,bad_version=0.02"
)
METHODS = ("eth_blockNumber", "eth_getBalance", "eth_call", "echo")


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "demo",
        help="run clients against a fault-injecting server and watch the counters",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--duration",
        type=float,
        default=30.0,
        help="seconds to run; 0 runs until Ctrl-C (default 30)",
    )
    p.add_argument(
        "--faults",
        default=DEFAULT_FAULTS,
        help="fault probabilities per batch, kind=p,... ('none' for none)",
    )
    p.add_argument(
        "--client-bug",
        type=float,
        default=0.02,
        metavar="P",
        help="probability that the client reuses an id inside a batch (default 0.02)",
    )
    p.add_argument("--rate", type=float, default=25.0, help="batches per second (default 25)")
    p.add_argument("--batch-size", type=int, default=8, help="requests per batch (default 8)")
    p.add_argument("--port", type=int, default=0, help="chaos server port (default: any free)")
    p.add_argument(
        "--metrics-port",
        type=int,
        default=9464,
        help="Prometheus metrics port (default 9464; 0 picks a free one)",
    )
    p.add_argument(
        "--metrics-addr",
        default="127.0.0.1",
        help="address the metrics endpoint binds (default 127.0.0.1)",
    )
    p.add_argument("--seed", type=int, default=1, help="seed for faults and the driver")
    p.add_argument("--timeout", type=float, default=5.0, help="pairwatch batch timeout")
    p.add_argument(
        "--plain",
        action="store_true",
        help="print a status line every few seconds instead of the live view",
    )
    p.set_defaults(handler=run)


def parse_mix(text: str) -> dict[str, float]:
    if text.strip().lower() in ("", "none"):
        return {}
    mix: dict[str, float] = {}
    for item in text.split(","):
        kind, _, p = item.partition("=")
        mix[kind.strip()] = float(p) if p else 1.0
    return mix


class Driver:
    """Sends batches through each instrumented client in turn, as an application would."""

    def __init__(
        self,
        url: str,
        clients: list[tuple[str, Callable[[bytes, bool], object]]],
        *,
        batch_size: int,
        client_bug: float,
        seed: int,
    ) -> None:
        self.url = url
        self.clients = clients
        self.batch_size = batch_size
        self.client_bug = client_bug
        self.rng = random.Random(seed)
        self.ids = itertools.count(1)
        self.errors = 0
        self.sent = 0

    def body(self) -> bytes:
        batch = []
        for _ in range(self.batch_size):
            method = self.rng.choice(METHODS)
            batch.append(
                {
                    "jsonrpc": "2.0",
                    "id": next(self.ids),
                    "method": method,
                    "params": [self.rng.randrange(1000)],
                }
            )
        if self.rng.random() < self.client_bug and len(batch) > 1:
            batch[-1]["id"] = batch[0]["id"]  # a shared counter without a lock
        return json.dumps(batch).encode()

    def step(self) -> None:
        _, send = self.clients[self.sent % len(self.clients)]
        sse = self.sent % 4 == 3
        self.sent += 1
        try:
            send(self.body(), sse)
        except Exception:
            self.errors += 1  # cut streams and garbage replies raise in clients: expected


def http_clients(url: str, provider: Any, timeout: float) -> tuple[list[Any], list[Any]]:
    """One instrumented client per installed HTTP library; pairwatch needs one line each."""
    clients: list[tuple[str, Callable[[bytes, bool], object]]] = []
    closers: list[Any] = []
    headers = {"Content-Type": "application/json"}
    sse_headers = {**headers, "Accept": "text/event-stream"}
    try:
        import httpx

        hx = pairwatch.instrument(
            httpx.Client(timeout=10), meter_provider=provider, timeout=timeout
        )

        def via_httpx(body: bytes, sse: bool) -> object:
            if sse:
                with hx.stream("POST", url, content=body, headers=sse_headers) as r:
                    return b"".join(r.iter_bytes())
            return hx.post(url, content=body, headers=headers).content

        clients.append(("httpx", via_httpx))
        closers.append(hx)
    except ImportError:
        pass
    try:
        import requests

        rq = pairwatch.instrument(requests.Session(), meter_provider=provider, timeout=timeout)

        def via_requests(body: bytes, sse: bool) -> object:
            if sse:
                with rq.post(url, data=body, headers=sse_headers, stream=True, timeout=10) as r:
                    return b"".join(r.iter_content(None))
            return rq.post(url, data=body, headers=headers, timeout=10).content

        clients.append(("requests", via_requests))
        closers.append(rq)
    except ImportError:
        pass
    return clients, closers


def run(args: argparse.Namespace) -> int:
    from pairwatch.chaos import ChaosServer, FaultMix

    mix = parse_mix(args.faults)
    # The view already says what each failing batch points to; per-batch log lines would
    # only scroll it away.
    logging.getLogger("pairwatch").setLevel(logging.ERROR)
    reader = InMemoryMetricReader()
    provider, metrics_server = exposition.serve(
        args.metrics_port, args.metrics_addr, readers=[reader]
    )
    metrics_url = f"http://{args.metrics_addr}:{metrics_server.server_port}/metrics"
    chaos = ChaosServer(FaultMix(mix, seed=args.seed) if mix else None, port=args.port)
    chaos.run_in_thread()
    clients, closers = http_clients(chaos.url, provider, args.timeout)
    if not clients:
        print(
            "pairwatch demo needs httpx or requests: pip install 'pairwatch[httpx]'",
            file=sys.stderr,
        )
        return 2
    driver = Driver(
        chaos.url, clients, batch_size=args.batch_size, client_bug=args.client_bug, seed=args.seed
    )
    stop = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    live = sys.stdout.isatty() and not args.plain
    title = (
        f"pairwatch demo  server {chaos.url}  metrics {metrics_url}\n"
        f"  clients: {', '.join(n for n, _ in clients)}   faults: {args.faults}"
        f"   client bug: {args.client_bug}"
    )
    if not live:
        print(title, flush=True)
    first = view.snapshot(reader)
    window = view.Window()
    started = time.monotonic()
    next_view = started
    interval = 1.0 / args.rate if args.rate > 0 else 0.0
    try:
        while not stop.is_set():
            now = time.monotonic()
            if args.duration and now - started >= args.duration:
                break
            driver.step()
            if now >= next_view:
                snap = view.snapshot(reader)
                old = window.push(snap)
                if live:
                    sys.stdout.write(
                        "\x1b[H\x1b[2J"
                        + view.render(first, old, snap, title=title)
                        + "\n\n  Ctrl-C stops.\n"
                    )
                    sys.stdout.flush()
                elif now - started >= 0.5:
                    print(
                        f"[{now - started:5.1f}s] batches {snap.get('batch.closed'):.0f}  "
                        f"unknown {snap.get('batch.unknown_id_response'):.0f}  "
                        f"missing {snap.get('batch.missing_response'):.0f}  "
                        f"null {snap.get('batch.null_id_response'):.0f}  "
                        f"-- {view.reading(old, snap)}",
                        flush=True,
                    )
                next_view = now + (1.0 if live else 5.0)
            if interval:
                stop.wait(interval)
    finally:
        for client in closers:
            client.close()
        chaos.stop_thread()
    final = view.snapshot(reader)
    print("\n" + view.render(first, first, final, title="pairwatch demo summary"))
    print(f"\n  injected by the server: {dict(chaos.counts)}   client errors seen: {driver.errors}")
    metrics_server.shutdown()
    return 0
