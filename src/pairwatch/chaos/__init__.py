"""pairwatch.chaos: a JSON-RPC 2.0 server and proxy that answers wrongly on purpose.

Why it exists: the pairing failures pairwatch counts (out-of-order batches, missing
replies, unknown or null ids, replies to notifications) are rare on a healthy node
and impossible to schedule. This package produces each of them on demand, on real
sockets, and records exactly what it did, so tests, the demo and benchmarks can
compare what the client saw with what was injected. It imports only the standard
library (``websockets`` only for the websocket transport) and shares no code with
pairwatch's wire/ledger: a test server must not share the logic it tests.

Quick start
-----------
Sync tests (requests, httpx.Client, web3)::

    from pairwatch.chaos import ChaosServer, Fault
    with ChaosServer(Fault("reorder")) as srv:      # event loop in a daemon thread
        httpx.post(srv.url, json=[...])             # srv.url == "http://127.0.0.1:PORT/"
        srv.set_faults([Fault("drop", count=1), None])
        assert srv.counts["reorder"] == 1

Async tests::

    async with ChaosServer(FaultMix(reorder=0.2, drop=0.1, seed=1)) as srv: ...

Websocket: ``ChaosServer(..., transport="ws")`` (``srv.url`` is ``ws://...``).
Proxy: ``ChaosServer(faults, upstream="http://127.0.0.1:8545/")`` forwards each body
and bends the upstream's reply; with ``transport="ws"`` and a ``ws://`` upstream it
relays a persistent connection (server-initiated messages pass through untouched).

Built-in methods (the "backend" when not proxying)
--------------------------------------------------
``echo`` returns its params (use a unique param per request to check each caller
got its own result); ``add`` sums a list (or the values of an object); ``sleep``
waits params seconds (number or ``[n]``, capped at 30) and returns null;
``get_value`` returns ``"value:<key>"``; ``fail`` answers the error given as
``{"code": .., "message": ..}``; ``eth_blockNumber`` ``"0x1b4"``, ``eth_chainId``
``"0x539"``, ``net_version`` ``"1337"``, ``eth_getBalance`` a hex derived from the
address. ``handlers={"name": fn}`` adds or overrides; raise `RpcError` for errors.
Batch elements run concurrently; answers keep request order unless a fault says
otherwise.

Correct replies (no fault)
--------------------------
* parse error: one object ``{"jsonrpc":"2.0","id":null,"error":{"code":-32700,...}}``.
* ``[]``: one object (not an array), ``id`` null, code -32600.
* invalid element (not an object, ``jsonrpc`` not "2.0", method not a string,
  params not array/object, id of type bool/array/object): error -32600 with id null,
  in its place in the batch; a non-array non-object body gets a single such error.
* unknown method: -32601 with the request's id; bad params: -32602.
* ``"id": null`` is a request (answered with id null), not a notification.
* notifications only (single or batch): no reply at all. HTTP answers 200 with
  ``Content-Length: 0`` and an empty body (go-ethereum style); ``empty_status=204``
  (or 202, MCP style) changes the status. stdio and websocket write nothing.
* HTTP: JSON-RPC errors are HTTP 200; GET /health is 200 "ok"; other non-POST 405;
  an unreachable upstream is 502 with a JSON-RPC error body (id null).

Faults (`Fault(kind, ...)`, applied to the correct reply before it is written)
-----------------------------------------------------------------------------
Per-element faults choose targets by ``indices`` (positions, negative allowed), else
``fraction`` of eligible elements (at least one), else ``count`` (default 1), with the
plan's seeded RNG. `Injected` records list the *original* ids touched.

=========================  ==========================================================
drop                       remove responses; all removed from a batch -> ``[]``;
                           a single reply removed -> no reply (empty HTTP body)
duplicate                  the response appears twice (copy right after it)
null_id                    id replaced by null
wrong_id                   id replaced by one never sent: int ``id + 1000000007``,
                           string ``id + "-wrong"``
id_type                    same id, other JSON type: ``0 -> "0"``, ``"7" -> 7``
                           (non-numeric strings are not eligible)
both_result_error          a result gets an ``error`` too (an error gets ``result``)
bad_version                ``jsonrpc`` set to ``version`` ("1.0"), or removed if None
reorder                    ``mode`` reverse (default) / rotate / shuffle (never identity)
single_for_batch           a batch answered with one object: ``mode`` error (default,
                           -32600 id null) or first (the first response)
reply_to_notifications     a message that expects no reply gets ``[]`` (``mode``
                           empty, default) or an error object with id null (error)
delay                      per-element delays from reply-ready time: ``delays=(..)`` or
                           staggered ``seconds*(i+1)``; JSON/stdio/ws wait for the
                           largest, SSE writes each event at its own time
cut                        HTTP JSON: full Content-Length, ``fraction`` (0.5) of the body,
                           close. SSE: ``count`` whole events then half an event, close
                           without the chunked terminator. stdio: half a line, then
                           stdout closes. ws: TCP abort. No reply due: close silently.
unparseable                body replaced by ``data`` (garbage bytes)
=========================  ==========================================================

Plans: one *step* per exchange (an HTTP body, a stdio line, a ws message and its
reply; a message expecting no reply is an exchange too). ``faults=`` takes
``Fault(...)`` (every exchange), a list of steps ``[Fault("reorder"), None,
[Fault("drop"), Fault("null_id")]]`` (a one-shot script; then clean),
``FaultScript(steps, seed=0, cycle=False)`` or ``FaultMix(reorder=0.2, drop=0.1,
seed=1, templates={"drop": Fault("drop", fraction=0.5)})`` (each kind drawn
independently per exchange, applied in the `KINDS` order). The step is drawn when the
request arrives, with a per-exchange RNG derived from the seed, so the same seed
gives the same faults whatever order concurrent replies complete in. (The stdio and
ws relays draw when the upstream's reply arrives: they cannot see which reply is
whose without pairing, which is the core's job.)

Record: ``srv.injected`` (list of `Injected(exchange, kind, ids, detail)`; only
faults that took effect), ``srv.counts`` (Counter by kind), ``srv.exchanges``,
``srv.reset()``, ``srv.set_faults(...)`` (thread-safe, on a running server).

SSE
---
An HTTP reply is an event stream (``text/event-stream``, chunked, one ``data:``
event per response element, flushed one by one) when the Accept header prefers
``text/event-stream`` over ``application/json`` (equal preference -> JSON), when the
path ends in ``/sse`` (``srv.sse_url``), or with ``?sse=1`` / ``?sse=elements`` /
``?sse=array`` (whole array as one event); ``?sse=0`` forces JSON.
``ChaosServer(sse="always"|"never", sse_mode="array")`` changes the defaults.

LSP
---
``python -m pairwatch.chaos lsp`` speaks a language server's framing on stdin/stdout
(``Content-Length`` frames, :mod:`.lsp_transport`): ``initialize`` (after asking the client
``window/workDoneProgress/create`` under the client's own id, and a ``$/progress``),
``shutdown``, ``exit``, ``$/cancelRequest`` (answered -32800) and the built-in methods; each
request or notification is one exchange of the plan, each reply element its own frame.

CLI
---
The first stdout line of http/ws/proxy is the listening URL; stdio modes print their
readiness line on stderr (stdout is the protocol)::

    python -m pairwatch.chaos http --port 0 --fault-mix reorder=0.2,drop=0.1 --seed 1
    python -m pairwatch.chaos http --fault drop:count=2 --fault reorder:mode=shuffle
    python -m pairwatch.chaos http --script="reorder;-;drop:indices=0+null_id" --cycle
    python -m pairwatch.chaos ws --fault-mix cut=0.05
    python -m pairwatch.chaos proxy --upstream http://127.0.0.1:8545/ --fault reorder
    python -m pairwatch.chaos stdio --fault delay:delays=0/0.2 --record injected.jsonl
    python -m pairwatch.chaos stdio-proxy --fault id_type -- python my_mcp_server.py
    python -m pairwatch.chaos lsp --script="-;drop;null_id"   # Content-Length frames, LSP

``KIND:k=v,...`` takes count, fraction, indices (``0/2/-1``), mode, seconds, delays
(``0.1/0.2``), version (``missing`` removes it), data. In a ``--script`` steps are
separated by ``;``, faults within a step by ``+``, ``-`` is a clean step (write
``--script=...`` when it starts with ``-``). ``--record FILE`` writes the injected
record as JSON lines at exit; SIGINT/SIGTERM stop the network modes cleanly.
"""

from .backend import DEFAULT_HANDLERS, Backend, Handler, RpcError
from .engine import Engine
from .faults import KINDS, Fault, FaultMix, FaultPlan, FaultScript, Injected, parse_fault
from .server import ChaosServer

__all__ = [
    "DEFAULT_HANDLERS",
    "KINDS",
    "Backend",
    "ChaosServer",
    "Engine",
    "Fault",
    "FaultMix",
    "FaultPlan",
    "FaultScript",
    "Handler",
    "Injected",
    "RpcError",
    "parse_fault",
]
