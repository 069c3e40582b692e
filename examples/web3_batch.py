"""web3.py's silent shift against a real anvil node, then pairwatch revealing and repairing it.

A chaos proxy (pairwatch.chaos) sits between web3 and anvil and drops the first response of a
batch.  web3 8 sorts the reply by id and pairs it with the requests by position, so
``chain_id`` receives the block number and ``block_number`` the gas price, with no error.
With ``pairwatch.instrument(w3)`` the counters show it; with ``repair=True`` web3 gets the
reply in request order with an explicit error where the response is missing (web3 8 then
raises ``Web3RPCError`` for the batch instead of handing out wrong values).

Needs anvil: ``npm ci --prefix tests/servers`` (scripts/bootstrap.sh does it) or one on PATH.

Run:  python examples/web3_batch.py
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from web3 import HTTPProvider, Web3

import pairwatch
from pairwatch.chaos import ChaosServer, Fault

LOCAL = (
    Path(__file__).resolve().parents[1]
    / "tests/servers/node_modules/@foundry-rs/anvil-linux-amd64/bin/anvil"
)


def start_anvil() -> tuple[subprocess.Popen[bytes], int]:
    binary = str(LOCAL) if LOCAL.is_file() else shutil.which("anvil")
    if binary is None:
        sys.exit("anvil not found: run `npm ci --prefix tests/servers` or put anvil on PATH")
    log = Path(tempfile.mkdtemp()) / "anvil.log"
    proc = subprocess.Popen(
        [binary, "--host", "127.0.0.1", "--port", "0"],
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )
    for _ in range(400):
        found = re.search(r"Listening on 127\.0\.0\.1:(\d+)", log.read_text(errors="replace"))
        if found:
            return proc, int(found.group(1))
        time.sleep(0.05)
    proc.kill()
    sys.exit("anvil did not start")


def batch(w3: Web3) -> object:
    with w3.batch_requests() as b:
        b.add(w3.eth.chain_id)
        b.add(w3.eth.block_number)
        b.add(w3.eth.gas_price)
        try:
            return b.execute()
        except Exception as exc:
            return f"raised {type(exc).__name__}: {exc}"


def counters(reader: InMemoryMetricReader) -> dict[str, int]:
    out: dict[str, int] = {}
    data = reader.get_metrics_data()
    for rm in data.resource_metrics if data else ():
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                for point in metric.data.data_points:
                    value = getattr(point, "value", None)
                    if not value:
                        continue
                    action = (point.attributes or {}).get("pairwatch.repair_action")
                    name = f"{metric.name}[{action}]" if action else metric.name
                    out[name] = out.get(name, 0) + int(value)
    return out


def main() -> None:
    warnings.simplefilter("ignore", RuntimeWarning)
    anvil, port = start_anvil()
    try:
        direct = Web3(HTTPProvider(f"http://127.0.0.1:{port}/"))
        truth = [direct.eth.chain_id, direct.eth.block_number, direct.eth.gas_price]
        print(f"direct single calls       {truth}   (chain_id, block_number, gas_price)")
        with ChaosServer(upstream=f"http://127.0.0.1:{port}/") as proxy:
            for label, options in (
                ("web3 alone", None),
                ("with pairwatch", {}),
                ("with repair=True", {"repair": True}),
            ):
                reader = InMemoryMetricReader()
                w3 = Web3(HTTPProvider(proxy.url))
                if options is not None:
                    meter_provider = MeterProvider(metric_readers=[reader])
                    pairwatch.instrument(w3, meter_provider=meter_provider, **options)
                proxy.set_faults([Fault("drop", indices=[0])])  # the next reply loses one
                print(f"{label:<25} {batch(w3)}")
                if options is not None:
                    for name, value in sorted(counters(reader).items()):
                        print(f"    {name:<40} {value}")
    finally:
        anvil.terminate()
        anvil.wait(10)


if __name__ == "__main__":
    main()
