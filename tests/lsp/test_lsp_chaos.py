"""Faults injected by ``python -m pairwatch.chaos lsp``, counted exactly, through both libraries.

Each session sends ``initialize`` (the server first asks ``window/workDoneProgress/create``
under the same id, and sends ``$/progress``), then two concurrent ``echo`` requests, then
``shutdown`` and ``exit``.  The script's steps hit, in order: initialize, the two echoes,
shutdown; the fault under test is on the first echo.  Neither client library is told about
faults: what they see is theirs, what pairwatch counts is compared exactly.
"""

from __future__ import annotations

import asyncio
import subprocess
import threading

import pytest
from components import need
from lsp_support import ENV, chaos_command
from otel_support import Otel

import pairwatch

pytestmark = pytest.mark.timeout(60)

INSTALL = "pip install -e '.[dev]' (the lsp extra: pygls, python-lsp-jsonrpc)"

BOOKS = {"batch.requests": 4, "batch.closed": 5}  # 4 requests, and exit (a notification)
LOST = {"batch.missing_response[stream_end]": 1, "batch.response_count_mismatch": 1}
# fault on the first echo -> every counter that moved, missing by close reason
EXPECTED: dict[str, dict[str, int]] = {
    # the first echo's reply comes 0.3 s late: the second overtakes it; ids pair both
    "delay:seconds=0.3": {},
    # the reply is never written: missing when the session ends in order (after exit)
    "drop": LOST,
    # an id never sent: unknown, and the request it answers is missing
    "wrong_id": {"batch.unknown_id_response": 1, **LOST},
    # id null: a null-id reply, and the request is missing
    "null_id": {"batch.null_id_response": 1, **LOST},
    # the same reply twice: the copy matches nothing pending any more
    "duplicate": {"batch.unknown_id_response": 1},
}


def moved(otel: Otel) -> dict[str, int]:
    """Every counter that moved, beyond the books of a healthy session; missing by reason."""
    found = {k: v for k, v in otel.counters().items() if BOOKS.get(k) != v}
    found.pop("batch.missing_response", None)  # by close reason, below
    for attrs in otel.attrs("batch.missing_response"):
        reason = attrs["pairwatch.close_reason"]
        found[f"batch.missing_response[{reason}]"] = otel.value(
            "batch.missing_response", pairwatch__close_reason=reason
        )
    return found


async def pygls_session(fault: str, otel: Otel) -> None:
    need("pygls", INSTALL)
    from lsprotocol import types
    from pygls.lsp.client import LanguageClient

    client = LanguageClient("pairwatch-test", "v1")
    pairwatch.instrument(
        client, meter_provider=otel.meter_provider, tracer_provider=otel.tracer_provider
    )
    argv = chaos_command(f"-;{fault};-;-")
    await client.start_io(*argv, env=ENV)
    await client.initialize_async(types.InitializeParams(capabilities=types.ClientCapabilities()))
    protocol = client.protocol
    first = protocol.send_request_async("echo", ["first"])
    second = protocol.send_request_async("echo", ["second"])
    if fault.startswith("delay"):
        assert await asyncio.wait_for(first, 5) == ["first"]
    await asyncio.wait_for(second, 5)
    await client.shutdown_async(None)
    first.cancel()  # never answered under a fault: the caller stops waiting (no cancel sent)
    client.exit(None)
    await client.stop()


def pylsp_session(fault: str, otel: Otel) -> None:
    need("pylsp_jsonrpc", INSTALL)
    from pylsp_jsonrpc.endpoint import Endpoint
    from pylsp_jsonrpc.streams import JsonRpcStreamReader, JsonRpcStreamWriter

    proc = subprocess.Popen(
        chaos_command(f"-;{fault};-;-"),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=ENV,
    )
    assert proc.stdout is not None
    assert proc.stdin is not None
    reader, writer = pairwatch.instrument_streams(
        JsonRpcStreamReader(proc.stdout),
        JsonRpcStreamWriter(proc.stdin),
        meter_provider=otel.meter_provider,
        tracer_provider=otel.tracer_provider,
    )
    endpoint = Endpoint({"window/workDoneProgress/create": lambda _p: None}, writer.write)
    listener = threading.Thread(target=reader.listen, args=(endpoint.consume,), daemon=True)
    listener.start()
    endpoint.request("initialize", {"capabilities": {}}).result(10)
    first = endpoint.request("echo", ["first"])
    second = endpoint.request("echo", ["second"])
    if fault.startswith("delay"):
        assert first.result(5) == ["first"]
    assert second.result(5) == ["second"]
    endpoint.request("shutdown").result(5)
    endpoint.notify("exit")
    assert proc.wait(10) == 0
    listener.join(10)
    pairwatch.uninstrument(reader)


@pytest.mark.parametrize("fault", sorted(EXPECTED))
@pytest.mark.parametrize("library", ["pygls", "pylsp-jsonrpc"])
def test_each_fault_is_counted_exactly(library: str, fault: str):
    otel = Otel()
    if library == "pygls":
        asyncio.run(pygls_session(fault, otel))
    else:
        pylsp_session(fault, otel)
    assert otel.value("batch.requests") == 4  # initialize, two echoes, shutdown
    assert otel.value("batch.closed") == 5
    assert moved(otel) == EXPECTED[fault]
    assert {a["pairwatch.integration"] for a in otel.attrs("batch.requests")} == {library}
    assert {a["pairwatch.transport"] for a in otel.attrs("batch.requests")} == {"stdio"}
    outcomes = sorted(
        sp.attributes["pairwatch.outcome"] for sp in otel.spans() if sp.name == "echo"
    )
    lost = fault in ("drop", "wrong_id", "null_id")
    assert outcomes == (["missing", "paired"] if lost else ["paired", "paired"])


def test_the_servers_request_under_the_clients_id_is_no_pairing_event():
    """initialize's id is also the id of the server's own request, sent before the reply:
    it pairs in the inbound table, the client's answer there too; nothing is unknown."""
    otel = Otel()
    asyncio.run(pygls_session("-", otel))
    assert otel.counters() == BOOKS
    assert otel.hist("batch.pair_latency")[0] == 4
    assert moved(otel) == {}
    calls = [sp for sp in otel.spans() if sp.parent is not None]  # one per request
    assert sorted(sp.name for sp in calls) == ["echo", "echo", "initialize", "shutdown"]
    assert {sp.attributes["pairwatch.outcome"] for sp in calls} == {"paired"}
