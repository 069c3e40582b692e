"""Real language servers, driven by real client libraries: the books are exact.

pyright (npm) through pygls's ``LanguageClient`` and through python-lsp-jsonrpc; pylsp
(PyPI) through python-lsp-jsonrpc (pygls 2.1 cannot read pylsp 1.15's initialize reply, with
or without pairwatch).  Each healthy session opens a document, sends hover, completion and
definition concurrently plus one request it cancels with ``$/cancelRequest`` (the server
still answers it, with its result or error -32800: it pairs), then shuts down in order.
A killed server is frozen first (SIGSTOP), so that exactly the requests sent afterwards are
in flight when it dies (SIGKILL): each is missing, ``stream_dropped``.
"""

from __future__ import annotations

import asyncio
import subprocess
import threading
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest
from components import need
from lsp_support import FAULTS, SOURCE, freeze, kill, pylsp_command, pyright_command
from otel_support import Otel

import pairwatch

pytestmark = pytest.mark.timeout(90)

INSTALL = "pip install -e '.[dev]' (the lsp extra: pygls, python-lsp-jsonrpc)"
IN_FLIGHT = 21
HOVER, COMPLETE, DEFINE = (8, 1), (9, 5), (8, 1)  # on twice(1), after "os.pa", on twice
CAPABILITIES = {
    "workspace": {
        "configuration": True,  # pyright then asks workspace/configuration, with its own ids
        "didChangeConfiguration": {"dynamicRegistration": True},  # client/registerCapability
        "workspaceFolders": True,
    },
    "window": {"workDoneProgress": True},
}


def no_faults(otel: Otel) -> None:
    assert {name: otel.value(name) for name in FAULTS} == dict.fromkeys(FAULTS, 0)
    # 6 requests; initialized, didOpen, $/cancelRequest and exit close as notifications
    assert otel.counters() == {"batch.requests": 6, "batch.closed": 10}


KILLED = {
    "batch.requests": 2 + IN_FLIGHT,
    "batch.closed": 2 + IN_FLIGHT + 2,  # and initialized, didOpen
    "batch.missing_response": IN_FLIGHT,
    "batch.response_count_mismatch": IN_FLIGHT,
}


def labels(otel: Otel) -> set[tuple[str, str]]:
    return {
        (a["pairwatch.integration"], a["pairwatch.transport"]) for a in otel.attrs("batch.requests")
    }


def answered(outcome: object) -> None:
    """A cancelled request's reply is the server's choice: its result, or error -32800."""
    if isinstance(outcome, BaseException):
        assert "cancel" in str(outcome).lower(), outcome


# --------------------------------------------------------------------------------- pygls
async def pygls_client(otel: Otel, root: Path) -> Any:
    need("pygls", INSTALL)
    from lsprotocol import types
    from pygls.lsp.client import LanguageClient

    client = LanguageClient("pairwatch-test", "v1")
    pairwatch.instrument(  # the one line
        client, meter_provider=otel.meter_provider, tracer_provider=otel.tracer_provider
    )

    asked: list[str] = []

    @client.feature(types.WORKSPACE_CONFIGURATION)
    def configuration(params: types.ConfigurationParams) -> list[Any]:
        asked.append(types.WORKSPACE_CONFIGURATION)
        return [None for _ in params.items]

    await client.start_io(*pyright_command())
    uri = root.as_uri()
    await client.initialize_async(
        types.InitializeParams(
            capabilities=client.protocol._converter.structure(
                CAPABILITIES, types.ClientCapabilities
            ),
            root_uri=uri,
            workspace_folders=[types.WorkspaceFolder(uri=uri, name="w")],
        )
    )
    client.initialized(types.InitializedParams())
    doc = root / "m.py"
    doc.write_text(SOURCE)
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            types.TextDocumentItem(uri=doc.as_uri(), language_id="python", version=1, text=SOURCE)
        )
    )
    client.asked = asked
    return client, types, types.TextDocumentIdentifier(uri=doc.as_uri())


async def pygls_healthy(otel: Otel, root: Path) -> list[str]:
    client, types, doc = await pygls_client(otel, root)
    calls = [
        client.text_document_hover_async(types.HoverParams(doc, types.Position(*HOVER))),
        client.text_document_completion_async(
            types.CompletionParams(doc, types.Position(*COMPLETE))
        ),
        client.text_document_definition_async(types.DefinitionParams(doc, types.Position(*DEFINE))),
    ]
    cancelled = client.protocol.send_request_async(
        types.TEXT_DOCUMENT_HOVER, types.HoverParams(doc, types.Position(*HOVER)), msg_id="c-1"
    )
    client.cancel_request(types.CancelParams(id="c-1"))
    seen = [type(r).__name__ for r in await asyncio.gather(*calls)]
    outcome = await asyncio.gather(asyncio.wait_for(cancelled, 10), return_exceptions=True)
    answered(outcome[0])
    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()
    channel = pairwatch.api._handles[id(client)][1].channel
    assert channel.ledger.inbound_pending == 0  # every server request answered, apart
    assert client.asked  # pyright asked for configuration: server requests were there
    return seen


def test_pygls_and_pyright_healthy_books_are_exact(tmp_path: Path):
    otel = Otel()
    seen = asyncio.run(pygls_healthy(otel, tmp_path))
    assert seen == ["Hover", "CompletionList", "list"]
    # initialize, hover, completion, definition, the cancelled hover, shutdown
    assert otel.value("batch.requests") == 6
    assert otel.hist("batch.pair_latency")[0] == 6
    no_faults(otel)
    assert labels(otel) == {("pygls", "stdio")}


async def pygls_killed(otel: Otel, root: Path) -> None:
    client, types, doc = await pygls_client(otel, root)
    await client.text_document_hover_async(types.HoverParams(doc, types.Position(*HOVER)))
    freeze(client._server.pid)
    pending = [
        client.text_document_hover_async(types.HoverParams(doc, types.Position(*HOVER)))
        for _ in range(IN_FLIGHT)
    ]
    await asyncio.sleep(0.1)
    kill(client._server.pid)
    results = await asyncio.gather(*pending, return_exceptions=True)
    assert all(isinstance(r, RuntimeError) for r in results)  # pygls's "exited" error
    await client.stop()


def test_pygls_and_a_killed_pyright_every_request_in_flight_is_missing(tmp_path: Path):
    otel = Otel()
    asyncio.run(pygls_killed(otel, tmp_path))
    assert otel.value("batch.requests") == 2 + IN_FLIGHT  # initialize, one hover, the rest
    assert otel.counters() == KILLED
    assert otel.value("batch.missing_response", pairwatch__close_reason="stream_dropped") == (
        IN_FLIGHT
    )
    assert otel.value("batch.unknown_id_response") == 0
    assert otel.value("batch.null_id_response") == 0


# ---------------------------------------------------------------------- python-lsp-jsonrpc
class Session:
    """python-lsp-jsonrpc's Endpoint over a server's pipes, instrumented in one line."""

    def __init__(self, argv: list[str], otel: Otel, root: Path) -> None:
        need("pylsp_jsonrpc", INSTALL)
        from pylsp_jsonrpc.endpoint import Endpoint
        from pylsp_jsonrpc.streams import JsonRpcStreamReader, JsonRpcStreamWriter

        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
        )
        assert self.proc.stdin is not None
        assert self.proc.stdout is not None
        self.reader, writer = pairwatch.instrument_streams(  # the one line
            JsonRpcStreamReader(self.proc.stdout),
            JsonRpcStreamWriter(self.proc.stdin),
            meter_provider=otel.meter_provider,
            tracer_provider=otel.tracer_provider,
        )
        self.asked: list[str] = []

        def answer(method: str, value: Any) -> Any:
            def handler(params: Any) -> Any:
                self.asked.append(method)
                return value(params) if callable(value) else value

            return handler

        answers = {
            "workspace/configuration": answer("configuration", lambda p: [None] * len(p["items"])),
            "client/registerCapability": answer("registerCapability", None),
            "window/workDoneProgress/create": answer("workDoneProgress/create", None),
        }
        self.ids = 0
        self.endpoint = Endpoint(answers, writer.write, id_generator=self._next_id)
        self.listener = threading.Thread(
            target=self.reader.listen, args=(self.endpoint.consume,), daemon=True
        )
        self.listener.start()
        uri = root.as_uri()
        self.request(
            "initialize",
            {
                "processId": None,
                "rootUri": uri,
                "capabilities": CAPABILITIES,
                "workspaceFolders": [{"uri": uri, "name": "w"}],
            },
        ).result(30)
        self.endpoint.notify("initialized", {})
        doc = root / "m.py"
        doc.write_text(SOURCE)
        self.doc = {"uri": doc.as_uri()}
        item = {"uri": doc.as_uri(), "languageId": "python", "version": 1, "text": SOURCE}
        self.endpoint.notify("textDocument/didOpen", {"textDocument": item})

    def _next_id(self) -> int:
        self.ids += 1
        return self.ids

    def request(self, method: str, params: Any = None) -> Future[Any]:
        return self.endpoint.request(method, params)

    def at(self, method: str, where: tuple[int, int]) -> Future[Any]:
        position = {"line": where[0], "character": where[1]}
        return self.request(method, {"textDocument": self.doc, "position": position})

    def healthy(self) -> list[str]:
        calls = [
            self.at("textDocument/hover", HOVER),
            self.at("textDocument/completion", COMPLETE),
            self.at("textDocument/definition", DEFINE),
        ]
        cancelled = self.at("textDocument/hover", HOVER)
        # Not cancelled.cancel(): python-lsp-jsonrpc 1.1.2 then sends $/cancelRequest, but the
        # reply that LSP still requires raises InvalidStateError in its reader thread, which
        # dies (with or without pairwatch).  The notification itself, as any client sends it:
        self.endpoint.notify("$/cancelRequest", {"id": self.ids})
        seen = [type(c.result(30)).__name__ for c in calls]
        answered(cancelled.exception(30) or cancelled.result())
        self.request("shutdown").result(10)
        self.endpoint.notify("exit")
        self.proc.wait(10)
        self.listener.join(10)
        return seen

    def killed(self) -> None:
        self.at("textDocument/hover", HOVER).result(30)
        freeze(self.proc.pid)
        pending = [self.at("textDocument/hover", HOVER) for _ in range(IN_FLIGHT)]
        kill(self.proc.pid)
        self.proc.wait(10)
        self.listener.join(10)
        assert not any(p.done() for p in pending)  # python-lsp-jsonrpc waits for ever


SERVERS = {"pyright": pyright_command, "pylsp": pylsp_command}


@pytest.mark.parametrize("server", sorted(SERVERS))
def test_python_lsp_jsonrpc_healthy_books_are_exact(server: str, tmp_path: Path):
    otel = Otel()
    session = Session(SERVERS[server](), otel, tmp_path)
    assert session.healthy() == ["dict", "dict", "list"]
    if server == "pyright":  # its own requests, numbered from 0 like the client's from 1
        assert "configuration" in session.asked
    channel = pairwatch.api._handles[id(session.reader)][1].channel
    assert channel.ledger.inbound_pending == 0
    # initialize, hover, completion, definition, the cancelled hover, shutdown
    assert otel.value("batch.requests") == 6
    assert otel.hist("batch.pair_latency")[0] == 6
    no_faults(otel)
    assert labels(otel) == {("pylsp-jsonrpc", "stdio")}


@pytest.mark.parametrize("server", sorted(SERVERS))
def test_python_lsp_jsonrpc_and_a_killed_server(server: str, tmp_path: Path):
    otel = Otel()
    Session(SERVERS[server](), otel, tmp_path).killed()
    assert otel.counters() == KILLED
    assert otel.value("batch.missing_response", pairwatch__close_reason="stream_dropped") == (
        IN_FLIGHT
    )
    assert otel.value("batch.missing_response") == IN_FLIGHT
    assert otel.value("batch.unknown_id_response") == 0
