"""``pairwatch demo``: watch the counters move against a misbehaving JSON-RPC server.

The demo is the first thing a new user runs, so it must never answer a typo with a traceback
(every bad argument is one line and status 2), must survive the metrics port being taken
(9464 is also the OpenTelemetry Prometheus exporter's default), and must end with numbers a
reader can check: the summary puts every counter next to what the server's own record says
it must read, and they agree exactly.
"""

from __future__ import annotations

import argparse
import errno
import logging
import shutil
import signal
import socket
import sys
import threading
import time
from collections.abc import Mapping
from typing import Any, Protocol

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

import pairwatch
from pairwatch.chaos import KINDS, ChaosServer, FaultMix, parse_fault
from pairwatch.chaos.faults import Fault
from pairwatch.cli import view
from pairwatch.cli.args import PORT, PROBABILITY, fail, number
from pairwatch.cli.driver import Driver, http_clients
from pairwatch.cli.expected import CHECKED, ServerRecord
from pairwatch.otel import exposition

PROG = "pairwatch demo"
DEFAULT_FAULTS = (
    "reorder=0.3,drop=0.08,null_id=0.04,wrong_id=0.04,duplicate=0.04,id_type=0.02,bad_version=0.02"
)
LSP_FAULTS = "drop=0.04,null_id=0.03,wrong_id=0.03,duplicate=0.03,delay=0.2"
"""The default mix of ``--transport lsp``: what a language server can do to single requests."""
DEFAULT_METRICS_PORT = 9464
WINDOW = 5.0  # seconds the live rates and the reading cover

DESCRIPTION = """\
Watch pairwatch's counters move against a misbehaving JSON-RPC server.

Starts the chaos server on 127.0.0.1 with a fault mix, instruments an
httpx.Client and a requests.Session with one line each, sends batches through
them (every fourth as a server-sent-event stream), serves the metrics for
Prometheus, and shows a live view: batches per second, the batch.* counters,
pair-latency percentiles and, in words, what the last seconds point to.
Ctrl-C (or --duration) stops it with a summary that checks every counter
against what the server wrote.
"""

EPILOG = (
    "fault kinds for --faults KIND=P,... (P: probability per batch, 0..1):\n  "
    + "\n  ".join(", ".join(KINDS[i : i + 4]) for i in range(0, len(KINDS), 4))
    + "\nKIND:param=value=P sets one parameter, e.g. drop:count=2=0.1;"
    + "\n'none' runs a clean server.\ndefault mix:\n  "
    + DEFAULT_FAULTS.replace("wrong_id", "\n  wrong_id", 1)
)


def fault_mix(text: str) -> tuple[dict[str, float], dict[str, Fault]]:
    """Parse ``--faults``: probabilities per kind, and the fault each kind is injected as."""
    if text.strip().lower() in ("", "none"):
        return {}, {}
    probabilities: dict[str, float] = {}
    templates: dict[str, Fault] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        spec, _, p = item.rpartition("=") if "=" in item else (item, "", "1")
        kind = spec.partition(":")[0].strip()
        if kind not in KINDS:
            raise argparse.ArgumentTypeError(
                f"unknown fault kind {kind!r} in {item!r} (kinds: {', '.join(KINDS)})"
            )
        try:
            templates[kind] = parse_fault(spec)
        except ValueError as e:
            raise argparse.ArgumentTypeError(f"bad fault {spec!r}: {e}") from None
        try:
            probabilities[kind] = PROBABILITY(p.strip())
        except argparse.ArgumentTypeError as e:
            raise argparse.ArgumentTypeError(f"probability for {kind}: {e}") from None
    return probabilities, templates


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "demo",
        help="run clients against a fault-injecting server and watch the counters",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add = p.add_argument
    add(
        "--duration",
        type=number(float, low=0),
        default=30.0,
        metavar="S",
        help="seconds to run; 0 runs until Ctrl-C (default 30)",
    )
    add(
        "--faults",
        type=fault_mix,
        default=fault_mix(DEFAULT_FAULTS),
        metavar="KIND=P,...",
        help="fault probabilities per batch; 'none' for a clean server (kinds below)",
    )
    add(
        "--client-bug",
        type=PROBABILITY,
        default=0.02,
        metavar="P",
        help="probability that the client reuses an id inside a batch (default 0.02)",
    )
    add(
        "--rate",
        type=number(float, low=0, low_open=True, high=10_000),
        default=25.0,
        metavar="N",
        help="batches per second, above 0 (default 25)",
    )
    add(
        "--batch-size",
        type=number(int, low=1, high=10_000),
        default=8,
        metavar="N",
        help="requests per batch, 1..10000 (default 8)",
    )
    add(
        "--transport",
        choices=("http", "lsp"),
        default="http",
        help="http: httpx and requests batches (default); lsp: a language-server session "
        "(Content-Length frames on a socket pair, single requests, instrument_streams)",
    )
    add("--port", type=PORT, default=0, metavar="P", help="chaos server port (default: any free)")
    add(
        "--metrics-port",
        type=PORT,
        default=None,
        metavar="P",
        help=f"Prometheus metrics port (default {DEFAULT_METRICS_PORT}, or a free one when "
        f"that is taken; 0 picks a free one)",
    )
    add(
        "--metrics-addr",
        default="127.0.0.1",
        metavar="A",
        help="address the metrics endpoint binds (default 127.0.0.1)",
    )
    add("--seed", type=int, default=1, metavar="N", help="seed for faults and the driver")
    add(
        "--timeout",
        type=number(float, low=0, low_open=True),
        default=5.0,
        metavar="S",
        help="pairwatch batch timeout in seconds (default 5)",
    )
    add(
        "--plain",
        action="store_true",
        help="a status line every 5 s instead of the live view (automatic off a terminal)",
    )
    p.set_defaults(handler=run)


def _in_use(e: OSError) -> bool:
    return e.errno in (errno.EADDRINUSE, errno.EACCES)


def start_metrics(
    args: argparse.Namespace,
) -> tuple[MeterProvider, Any, InMemoryMetricReader, str] | str:
    """The metrics endpoint and the reader the view reads, or why it could not start.

    The default port falls back to a free one (it is the OTel exporter's default too, so
    it is often taken by the user's own app); a port the user asked for is not silently
    replaced: they are told it is busy and how to choose another.
    """
    port = DEFAULT_METRICS_PORT if args.metrics_port is None else args.metrics_port
    note = ""
    try:
        reader = InMemoryMetricReader()  # a reader belongs to one provider: one per attempt
        provider, server = exposition.serve(port, args.metrics_addr, readers=[reader])
    except OSError as e:
        if not _in_use(e):
            return f"cannot serve metrics on {args.metrics_addr}:{port}: {e.strerror or e}"
        if args.metrics_port is not None:
            return (
                f"metrics port {port} on {args.metrics_addr} is in use; pick another with "
                f"--metrics-port P, or --metrics-port 0 for any free port"
            )
        try:
            reader = InMemoryMetricReader()
            provider, server = exposition.serve(0, args.metrics_addr, readers=[reader])
        except OSError as e2:
            return f"cannot serve metrics on {args.metrics_addr}: {e2.strerror or e2}"
        note = f"(port {port} is in use, so the metrics are on port {server.server_port})"
    return provider, server, reader, note


def run(args: argparse.Namespace) -> int:
    if args.transport == "lsp":
        return run_lsp(args)
    probabilities, templates = args.faults
    # The view already says what each failing batch points to; per-batch log lines would
    # only scroll it away.
    logging.getLogger("pairwatch").setLevel(logging.ERROR)
    try:
        started_metrics = start_metrics(args)
    except (socket.gaierror, UnicodeError) as e:
        return fail(PROG, f"cannot serve metrics on {args.metrics_addr!r}: {e}")
    if isinstance(started_metrics, str):
        return fail(PROG, started_metrics)
    provider, metrics_server, reader, note = started_metrics
    metrics_url = f"http://{args.metrics_addr}:{metrics_server.server_port}/metrics"
    plan = FaultMix(probabilities, seed=args.seed, templates=templates) if probabilities else None
    chaos = ChaosServer(plan, port=args.port)
    record = ServerRecord()
    record.attach(chaos)
    try:
        chaos.run_in_thread()
    except OSError as e:
        stop_metrics(metrics_server, provider)
        reason = "is in use" if _in_use(e) else f"cannot be used: {e.strerror or e}"
        return fail(PROG, f"chaos server port {args.port} {reason}; pick another with --port P")
    clients, closers = http_clients(chaos.url, provider, args.timeout)
    if not clients:
        chaos.stop_thread()
        stop_metrics(metrics_server, provider)
        return fail(PROG, "the demo needs httpx or requests: pip install 'pairwatch[httpx]'")
    driver = Driver(
        chaos.url,
        clients,
        batch_size=args.batch_size,
        client_bug=args.client_bug,
        seed=args.seed,
        on_stream=record.expect_stream,
    )
    faults = ",".join(f"{k}={p:g}" for k, p in probabilities.items()) or "none"
    title = (
        f"pairwatch demo  server {chaos.url}  metrics {metrics_url} {note}".rstrip()
        + f"\n  clients: {', '.join(n for n, _ in clients)}   faults: {faults}"
        + f"   client bug: {args.client_bug:g}"
    )
    live = sys.stdout.isatty() and not args.plain
    try:
        first, cut = loop(args, driver, reader, title, live)
    finally:
        for client in closers:
            client.close()
        chaos.stop_thread()
    # Every exchange has completed (the driver is synchronous); flush hands the metrics of
    # the last batches to the SDK, so the summary counts exactly what the server answered.
    pairwatch.flush()
    summary(first, reader, record, driver, cut)
    stop_metrics(metrics_server, provider)
    return 0


def run_lsp(args: argparse.Namespace) -> int:
    """The demo on a language-server session (see :mod:`pairwatch.cli.lsp_traffic`)."""
    from pairwatch.cli.lsp_traffic import KINDS as LSP_KINDS
    from pairwatch.cli.lsp_traffic import LspSession

    faults = args.faults
    if faults == fault_mix(DEFAULT_FAULTS):
        faults = fault_mix(LSP_FAULTS)
    probabilities, templates = faults
    other = sorted(set(probabilities) - set(LSP_KINDS))
    if other:
        return fail(
            PROG,
            f"--transport lsp injects {', '.join(LSP_KINDS)}; not {', '.join(other)} "
            "(single requests have no batch to reorder or answer with one object)",
        )
    logging.getLogger("pairwatch").setLevel(logging.ERROR)
    try:
        started_metrics = start_metrics(args)
    except (socket.gaierror, UnicodeError) as e:
        return fail(PROG, f"cannot serve metrics on {args.metrics_addr!r}: {e}")
    if isinstance(started_metrics, str):
        return fail(PROG, started_metrics)
    provider, metrics_server, reader, note = started_metrics
    metrics_url = f"http://{args.metrics_addr}:{metrics_server.server_port}/metrics"
    session = LspSession(
        probabilities,
        templates,
        seed=args.seed,
        batch_size=args.batch_size,
        provider=provider,
        timeout=args.timeout,
    )
    shown = ",".join(f"{k}={p:g}" for k, p in probabilities.items()) or "none"
    title = (
        f"pairwatch demo  LSP session (chaos lsp on a socket pair)  metrics {metrics_url} "
        f"{note}".rstrip()
        + f"\n  client: a home-grown LSP client, instrument_streams   faults: {shown}"
    )
    live = sys.stdout.isatty() and not args.plain
    try:
        first, cut = loop(args, session, reader, title, live)
    finally:
        session.close()  # shutdown, exit: what is still pending closes as stream_end
    pairwatch.flush()
    summary(first, reader, session, session, cut)
    stop_metrics(metrics_server, provider)
    return 0


class _Steps(Protocol):
    errors: int

    def step(self) -> None: ...


class _Record(Protocol):
    def snapshot(self) -> Mapping[str, int]: ...


def loop(
    args: argparse.Namespace,
    driver: _Steps,
    reader: InMemoryMetricReader,
    title: str,
    live: bool,
) -> tuple[view.Snapshot, bool]:
    """Drive batches until the duration or a signal; return the snapshot taken at the start,
    and whether a signal cut an exchange short."""
    stop = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    screen = Screen(live)
    screen.start(title)
    first = view.snapshot(reader)
    window = view.Window(WINDOW)
    window.push(first)  # the first reading covers the run so far, not an empty instant
    started = time.monotonic()
    cut = False
    # A status line at 0 s would only say that nothing happened yet.
    next_view = started if live else started + WINDOW
    interval = 1.0 / args.rate
    try:
        while not stop.is_set():
            now = time.monotonic()
            elapsed = now - started
            if args.duration and elapsed >= args.duration:
                break
            if not _step(driver, stop):
                cut = True  # stopped during a step: a hung server does not hold Ctrl-C
                break
            if now >= next_view:
                snap = view.snapshot(reader)
                old = window.push(snap)
                screen.frame(first, old, snap, title, view.clock(elapsed, args.duration))
                next_view = now + (1.0 if live else WINDOW)
            stop.wait(interval)
    finally:
        screen.end()
    return first, cut


def _step(driver: _Steps, stop: threading.Event) -> bool:
    """One step of traffic, in a thread of its own so that Ctrl-C ends the demo within a
    tenth of a second whatever the server does; False when stopped before the step ended
    (the step's exchange is abandoned, and its batch closes when its client does)."""
    done = threading.Event()

    def run() -> None:
        try:
            driver.step()
        finally:
            done.set()

    threading.Thread(target=run, name="pairwatch-demo-step", daemon=True).start()
    while not done.wait(0.1):
        if stop.is_set():
            return False
    return True


class Screen:
    """The live view redrawn in place on a terminal; plain status lines anywhere else.

    In place means cursor home, each line cleared to its end, the rest of the screen
    cleared: a frame replaces the last one instead of piling into the scrollback.
    """

    def __init__(self, live: bool) -> None:
        self.live = live

    @staticmethod
    def width() -> int:
        return shutil.get_terminal_size((100, 24)).columns - 1

    def start(self, title: str) -> None:
        if self.live:
            sys.stdout.write("\x1b[?25l\x1b[2J")  # hide the cursor, clear once
        else:
            print(title, flush=True)

    def frame(
        self, first: view.Snapshot, old: view.Snapshot, snap: view.Snapshot, title: str, when: str
    ) -> None:
        width = self.width()
        if self.live:
            text = view.render(first, old, snap, title=f"{title}\n  {when}", width=width)
            lines = view.fit([*text.split("\n"), "", "  Ctrl-C stops (with the summary)."], width)
            sys.stdout.write("\x1b[H" + "".join(line + "\x1b[K\n" for line in lines) + "\x1b[J")
            sys.stdout.flush()
            return
        status = (
            f"[{when}] batches {snap.get('batch.closed'):.0f}  "
            f"unknown {snap.get('batch.unknown_id_response'):.0f}  "
            f"missing {snap.get('batch.missing_response'):.0f}  "
            f"null {snap.get('batch.null_id_response'):.0f}"
        )
        label = f"  reading, {view.window_label(old, snap)}: "
        print("\n".join([status, *view.wrap(label, view.reading(old, snap), width)]), flush=True)

    def end(self) -> None:
        if self.live:
            sys.stdout.write("\x1b[?25h\n")  # the cursor back; the summary follows the frame
            sys.stdout.flush()


def summary(
    first: view.Snapshot,
    reader: InMemoryMetricReader,
    record: _Record,
    driver: _Steps,
    cut: bool = False,
) -> None:
    final = view.snapshot(reader)
    expected = record.snapshot()
    encoding = sys.stdout.encoding or "ascii"
    try:
        "✓✗".encode(encoding)
        marks = ("✓", "✗")
    except (UnicodeEncodeError, LookupError):
        marks = ("ok", "DIFFERS")
    table, agree = view.check_table(first, final, {n: expected[n] for n in CHECKED}, marks=marks)
    print()
    print(view.render(first, first, final, title="pairwatch demo summary", width=Screen.width()))
    print()
    print("  counted by pairwatch against what the server wrote (its own record):")
    print(table)
    verdict = "every counter agrees" if agree else "counters differ"
    if cut and not agree:
        verdict = (
            "counters differ by the exchange Ctrl-C cut short: the server's record counts the"
            "\n  reply it was writing, the client closed before reading it (its requests count"
            "\n  as missing)"
        )
    print(f"\n  {verdict}.   client errors seen: {driver.errors}")


def stop_metrics(server: Any, provider: MeterProvider) -> None:
    server.shutdown()
    server.server_close()
    provider.shutdown()
