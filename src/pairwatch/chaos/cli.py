"""Command line: start a chaos server from another process (demo, MCP/anvil tests).

The first stdout line of the network modes is the listening URL, so a parent
process can read one line and connect. The stdio modes own stdout for the
protocol, so their readiness line goes to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
import sys
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from .backend import METHOD_HELP, Backend
from .engine import Engine
from .faults import (
    FAULT_HELP,
    KINDS,
    Fault,
    FaultMix,
    FaultPlan,
    FaultScript,
    Reply,
    parse_fault,
)
from .server import ChaosServer, Transport


def parse_mix(text: str) -> dict[str, float]:
    """``reorder=0.2,drop=0.1`` -> probabilities per kind."""
    mix: dict[str, float] = {}
    for item in filter(None, (p.strip() for p in text.split(","))):
        kind, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"expected kind=probability, got {item!r}")
        mix[kind.strip()] = float(value)
    return mix


def parse_step(text: str) -> list[Fault] | None:
    """``reorder+drop:count=2`` is one step; ``-`` (or nothing) is a clean reply."""
    text = text.strip()
    if text in ("", "-", "none"):
        return None
    return [parse_fault(part) for part in text.split("+")]


def build_plan(args: argparse.Namespace) -> FaultPlan | None:
    if args.script:
        steps = [parse_step(s) for s in args.script.split(";")]
        return FaultScript(steps, seed=args.seed, cycle=args.cycle)
    if args.fault_mix:
        templates: dict[str, Fault] = {}
        for spec in args.template:
            fault = parse_fault(spec)
            templates[fault.kind] = fault
        return FaultMix(parse_mix(args.fault_mix), seed=args.seed, templates=templates)
    if args.fault:
        return FaultScript([[parse_fault(f) for f in args.fault]], seed=args.seed, cycle=True)
    return None


def _fault_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("faults (pick one of --fault, --fault-mix, --script)")
    g.add_argument(
        "--fault",
        action="append",
        default=[],
        metavar="KIND[:k=v,...]",
        help="inject on every exchange (repeat to combine), e.g. drop:count=2",
    )
    g.add_argument("--fault-mix", metavar="KIND=P,...", help="probabilistic, e.g. reorder=0.2")
    g.add_argument(
        "--template",
        action="append",
        default=[],
        metavar="KIND[:k=v,...]",
        help="parameters for a --fault-mix kind, e.g. drop:fraction=0.5",
    )
    g.add_argument("--script", metavar="STEP;STEP;...", help="one step per exchange; - = clean")
    g.add_argument("--cycle", action="store_true", help="repeat the --script")
    g.add_argument("--seed", type=int, default=0, help="RNG seed (default 0)")
    g.add_argument("--record", metavar="FILE", help="write what was injected as JSON lines")


def _net_options(p: argparse.ArgumentParser, *, sse: bool) -> None:
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0, help="0 = ephemeral (default)")
    if sse:
        p.add_argument("--sse", choices=("auto", "always", "never"), default="auto")
        p.add_argument("--sse-mode", choices=("elements", "array"), default="elements")
        p.add_argument(
            "--empty-status",
            type=int,
            choices=(200, 202, 204),
            default=200,
            help="HTTP status when there is no reply (notifications only)",
        )


def make_parser(prog: str = "python -m pairwatch.chaos") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Fault-injecting JSON-RPC 2.0 server/proxy.",
        epilog=epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="mode", required=True)
    for name, text in (("http", "HTTP server (JSON and SSE)"), ("ws", "websocket server")):
        p = sub.add_parser(name, help=text)
        _net_options(p, sse=name == "http")
        _fault_options(p)
    p = sub.add_parser("proxy", help="HTTP (or ws://) proxy in front of --upstream")
    p.add_argument("--upstream", required=True, help="http://... or ws://... JSON-RPC endpoint")
    p.add_argument("--timeout", type=float, default=30.0, help="upstream timeout, seconds")
    _net_options(p, sse=True)
    _fault_options(p)
    p = sub.add_parser("stdio", help="line-delimited server on stdin/stdout")
    _fault_options(p)
    p.set_defaults(command=[])
    p = sub.add_parser("lsp", help="a language server's framing (Content-Length) on stdin/stdout")
    _fault_options(p)
    p.set_defaults(command=[])
    p = sub.add_parser("stdio-proxy", help="line proxy: stdio-proxy [options] -- CMD ARGS...")
    _fault_options(p)
    p.add_argument("command", nargs=argparse.REMAINDER, help="upstream command after --")
    return parser


def epilog() -> str:
    """The methods the server answers and the faults it injects, for ``--help``."""
    methods = "\n".join(f"  {name:<24}{text}" for name, text in METHOD_HELP.items())
    faults = "\n".join(f"  {name:<24}{FAULT_HELP[name]}" for name in KINDS)
    return (
        f"methods (any other: error -32601):\n{methods}\n\n"
        f"faults (--fault KIND[:key=value,...]; keys: count, fraction, indices, mode,"
        f" seconds):\n{faults}\n\n"
        "The network modes print their URL as the first line of stdout."
    )


def _write_record(path: str | None, engine: Engine) -> None:
    if not path:
        return
    with open(path, "w", encoding="utf-8") as f:
        for item in engine.injected:
            f.write(json.dumps(asdict(item), default=repr) + "\n")


async def _run_network(args: argparse.Namespace, plan: FaultPlan | None) -> int:
    kw: dict[str, Any] = {}
    transport: Transport = "ws" if args.mode == "ws" else "http"
    if args.mode == "proxy":
        kw["upstream"] = args.upstream
        kw["upstream_timeout"] = args.timeout
        if args.upstream.startswith(("ws://", "wss://")):
            transport = "ws"
    if transport == "http":
        kw.update(sse=args.sse, sse_mode=args.sse_mode, empty_status=args.empty_status)
    srv = ChaosServer(plan, transport=transport, host=args.host, port=args.port, **kw)
    await srv.start()
    print(srv.url, flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await srv.stop()
        _write_record(args.record, srv.engine)
    return 0


async def _unused_source(body: bytes) -> Reply:
    raise RuntimeError("the stdio proxy takes replies from its upstream process")


async def _run_stdio(args: argparse.Namespace, plan: FaultPlan | None) -> int:
    from .stdio_transport import LineOut, proxy_stdio, serve_stdio, stdin_reader

    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if args.mode == "stdio-proxy" and not command:
        print("stdio-proxy needs an upstream command after --", file=sys.stderr)
        return 2
    if args.mode == "lsp":
        from .lsp_transport import lsp_backend
        from .lsp_transport import run as run_lsp

        engine = Engine(lsp_backend(), plan)
        print("pairwatch.chaos lsp ready", file=sys.stderr, flush=True)
        try:
            return await run_lsp(engine)
        finally:
            _write_record(args.record, engine)
    engine = Engine(Backend() if args.mode == "stdio" else _unused_source, plan)
    reader = await stdin_reader()
    sink = LineOut(sys.stdout.buffer)
    print(f"pairwatch.chaos {args.mode} ready", file=sys.stderr, flush=True)
    try:
        if args.mode == "stdio":
            return await serve_stdio(engine, reader, sink)
        return await proxy_stdio(engine, command, reader, sink)
    finally:
        _write_record(args.record, engine)


def main(argv: Sequence[str] | None = None, prog: str = "python -m pairwatch.chaos") -> int:
    args = make_parser(prog).parse_args(argv)
    chosen = [bool(args.fault), bool(args.fault_mix), bool(args.script)]
    if sum(chosen) > 1:
        print("choose one of --fault, --fault-mix, --script", file=sys.stderr)
        return 2
    try:
        plan = build_plan(args)
    except ValueError as e:
        print(f"bad fault option: {e}", file=sys.stderr)
        return 2
    runner = _run_stdio if args.mode in ("stdio", "stdio-proxy", "lsp") else _run_network
    try:
        return asyncio.run(runner(args, plan))
    except KeyboardInterrupt:
        return 130
