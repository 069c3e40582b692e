"""A real MCP client, instrumented with one line, printing pairwatch's counters.

It starts examples/mcp_server.py over stdio (so it runs on a fresh machine with the ``mcp``
extra installed), calls a few tools, lets one call time out, and prints what pairwatch
counted.  ``--fault KIND`` puts ``python -m pairwatch.chaos stdio-proxy`` between client and
server, which bends every reply (try ``wrong_id``, ``id_type``, ``null_id``, ``drop``):
the caller sees a timeout or, for ``id_type``, nothing at all; the counters show why.

Run:  python examples/mcp_client.py [--fault id_type]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

import pairwatch

SERVER = str(Path(__file__).with_name("mcp_server.py"))


def server_command(fault: str | None) -> StdioServerParameters:
    if fault is None:
        return StdioServerParameters(command=sys.executable, args=[SERVER])
    proxy = ["-m", "pairwatch.chaos", "stdio-proxy", f"--script=-;-;{fault}"]
    return StdioServerParameters(
        command=sys.executable, args=[*proxy, "--", sys.executable, SERVER]
    )


async def run(fault: str | None, provider: MeterProvider) -> None:
    async with (
        stdio_client(server_command(fault)) as (read, write),
        ClientSession(read, write, read_timeout_seconds=10) as session,
    ):
        pairwatch.instrument(session, meter_provider=provider)  # the one line
        await session.initialize()
        for name, args, timeout in (
            ("add", {"a": 2, "b": 3}, 2.0),
            ("slow", {"seconds": 3}, 0.5),
        ):
            try:
                result = await session.call_tool(name, args, read_timeout_seconds=timeout)
                print(f"{name}: {getattr(result.content[0], 'text', result.content[0])}")
            except MCPError as exc:
                print(f"{name}: MCPError {exc.error.code} {exc.error.message}")


def report(reader: InMemoryMetricReader) -> None:
    totals: dict[str, float] = {}
    data = reader.get_metrics_data()
    for rm in data.resource_metrics if data else []:
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                for point in metric.data.data_points:
                    name = metric.name
                    if name == "batch.missing_response":
                        name += f" ({point.attributes.get('pairwatch.close_reason')})"
                    value = getattr(point, "value", getattr(point, "count", 0))
                    totals[name] = totals.get(name, 0) + value
    print("pairwatch counters:")
    for name in sorted(totals):
        print(f"  {name:44} {totals[name]:g}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fault", help="a pairwatch.chaos fault for the tools/call add reply")
    args = parser.parse_args()
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    anyio.run(run, args.fault, provider)
    report(reader)


if __name__ == "__main__":
    main()
