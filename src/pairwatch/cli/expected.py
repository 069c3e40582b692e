"""What the demo's counters must read, worked out from what the chaos server actually wrote.

The demo ends by putting pairwatch's exported counters next to the server's own account.
A count of faults by kind cannot be that account: one reply may be hit by several faults
(a duplicated element that is then nulled is one null-id response and no missing one), and
a fault that took effect says nothing about the counters it moves.  So the server's reply
for every exchange is captured as it is written, and each reply is tallied here against the
request it answers by the pairing contract (docs/metrics.md): ids compare by JSON type and
value, every response is paired, unknown-id or null-id, what is left unpaired is missing.

This is a second, independent reading of the contract, written from the server's side and
sharing no code with :mod:`pairwatch.pairing`: the summary checks one against the other.
A reply the server cut short counts what the client could read whole before the cut.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

from pairwatch.chaos import ChaosServer
from pairwatch.chaos.faults import Outgoing

#: The counters the server's record determines, in the order the summary lists them.
CHECKED = (
    "batch.closed",
    "batch.requests",
    "batch.unknown_id_response",
    "batch.missing_response",
    "batch.null_id_response",
    "batch.response_count_mismatch",
    "batch.out_of_order",
    "batch.duplicate_id",
    "batch.invalid_response",
    "batch.protocol_violation",
)


def id_key(value: Any) -> tuple[str, Any] | None:
    """An id as JSON sees it: ``1`` and ``1.0`` are one number, ``"1"`` is another id."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return ("number", float(value))
    if isinstance(value, str):
        return ("string", value)
    return None


def _valid(element: dict[str, Any]) -> bool:
    if element.get("jsonrpc") != "2.0" or (("result" in element) == ("error" in element)):
        return False
    error = element.get("error")
    if "error" in element:
        return (
            isinstance(error, dict)
            and type(error.get("code")) is int
            and isinstance(error.get("message"), str)
        )
    return True


def tally(
    request: Any, reply: Any, reply_is_array: bool, *, sse: bool = False, shape: bool = True
) -> Counter[str]:
    """The counters one HTTP exchange moves: ``request`` and ``reply`` as decoded JSON.

    Written for what the demo sends: a batch (a JSON array) of requests with ids.  Over a
    server-sent-event stream each response element is an event of its own, so a batch
    answered with one object looks like any one-element answer: no shape violation shows.
    ``shape=False``: the reply's shape never reached the client (a cut), only its elements.
    """
    out: Counter[str] = Counter({name: 0 for name in CHECKED})
    elements = request if isinstance(request, list) else [request]
    keys = [id_key(e.get("id")) for e in elements if isinstance(e, dict) and "id" in e]
    out["batch.closed"] = 1
    out["batch.requests"] = len(keys)
    seen: set[Any] = set()
    pending: dict[Any, list[int]] = {}
    for index, key in enumerate(keys):
        if key in seen:
            out["batch.duplicate_id"] += 1
        seen.add(key)
        pending.setdefault(key, []).append(index)  # a repeated id pairs first in, first out
    if reply_is_array and not reply and shape:
        out["batch.protocol_violation"] += 1  # `[]` answers nothing
    if isinstance(request, list) and not reply_is_array and reply is not None and shape and not sse:
        out["batch.protocol_violation"] += 1  # one object for a batch
    if reply is None and not reply_is_array:
        responses: list[Any] = []  # no body at all: nothing to pair, nothing to blame yet
    else:
        responses = reply if reply_is_array else [reply]
    paired = unknown = 0
    high = -1
    for element in responses:
        if not isinstance(element, dict):
            out["batch.invalid_response"] += 1
            continue
        if not _valid(element):
            out["batch.invalid_response"] += 1
        if element.get("id") is None:
            out["batch.null_id_response"] += 1  # null or absent: answers no one in particular
            continue
        key = id_key(element["id"])
        if key is None:
            unknown += 1  # not a legal id (true, an object): it can match nothing sent
            continue
        waiting = pending.get(key)
        if not waiting:
            unknown += 1
            continue
        index = waiting.pop(0)
        paired += 1
        if index < high:
            out["batch.out_of_order"] = 1
        high = max(high, index)
    out["batch.unknown_id_response"] = unknown
    out["batch.missing_response"] = len(keys) - paired
    out["batch.response_count_mismatch"] = int(paired + unknown != len(keys))
    return out


def tally_outgoing(request: Any, out: Outgoing, *, sse: bool) -> Counter[str]:
    """The counters one reply moves, as the chaos server wrote it (faults applied).

    A reply cut short counts what the client could read whole: nothing of a JSON body (it
    is never complete), the events before the cut of a stream.  A garbage body is one
    invalid response and answers nothing.
    """
    if out.cut:
        if not sse or out.raw is not None or out.silent:
            return tally(request, [], True, shape=False)
        events = 1 if out.as_array and not out.elements else len(out.elements)
        whole = min(out.cut_events or 0, max(events - 1, 0))
        return tally(request, [e.value for e in out.elements[:whole]], True, shape=False)
    if out.raw is not None:
        counts = tally(request, [], True, shape=False)
        counts["batch.invalid_response"] += 1
        return counts
    return tally(request, out.value(), out.as_array, sse=sse)


def tally_stream(message: Any, out: Outgoing) -> Counter[str]:
    """The counters one language-server exchange moves: a single request (or notification)
    answered by the frames the server wrote, each a message of its own, in order.

    On a stream each frame is read on its own: the request closes at the first frame that
    answers it, and a later one (a duplicate) is a stray of no batch; a request nothing
    answered closes missing, and its batch saw no response at all (a count mismatch: a
    wrong id, written as another id, is never the request's).
    """
    if out.raw is not None or out.cut:
        raise ValueError("the LSP demo injects no byte-level faults")
    frames = [e.value for e in out.elements]
    counts = tally(message, frames, True, shape=False)
    if isinstance(message, dict) and "id" in message:
        answered = counts["batch.missing_response"] == 0
        counts["batch.response_count_mismatch"] = int(not answered)
    return counts


class ServerRecord:
    """The expected counters, summed over every exchange the chaos server answered.

    Attached to a running server, it sees each reply after the faults and before it is
    written, so nothing the client could read is missing from it.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.expected: Counter[str] = Counter({name: 0 for name in CHECKED})
        self._streamed: set[bytes] = set()

    def expect_stream(self, body: bytes) -> None:
        """The client asks for this body's reply as an event stream (the server decides by
        the request's headers, which the engine does not see)."""
        with self._lock:
            self._streamed.add(body)

    def attach(self, server: ChaosServer) -> None:
        engine = server.engine
        answer: Callable[[bytes], Awaitable[Outgoing]] = engine.exchange

        async def recorded(body: bytes) -> Outgoing:
            out = await answer(body)
            self.add(body, out)
            return out

        engine.exchange = recorded  # type: ignore[method-assign]

    def add(self, body: bytes, out: Outgoing) -> None:
        with self._lock:
            sse = body in self._streamed
            self._streamed.discard(body)
        counts = tally_outgoing(json.loads(body), out, sse=sse)
        with self._lock:
            self.expected.update(counts)

    def snapshot(self) -> Counter[str]:
        with self._lock:
            return Counter(self.expected)
