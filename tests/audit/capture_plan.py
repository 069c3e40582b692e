"""One session of traffic for the real-tool capture tests, and what it must count.

The same posts go through every recorder (Chromium under Playwright, mitmproxy): JSON-RPC
batches, each answered with one fault by the chaos server, a notification-only batch, one
batch over server-sent events, and an analytics beacon whose *value* says ``jsonrpc``.

The expected counters are not written down here as numbers: :func:`expected` derives them
from what the chaos server recorded it injected (``ChaosServer.injected``: the fault kind and
the original ids it touched, per exchange), through the meaning DESIGN.md gives each counter.
So a fault the server failed to inject, or injected on other ids, changes the expectation
rather than silently agreeing with whatever pairwatch reports.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from pairwatch.chaos import Fault

BEACON = {"event": "client_ready", "transport": "jsonrpc"}


def batch(first: int, n: int = 3) -> list[dict[str, Any]]:
    return [
        {"jsonrpc": "2.0", "id": first + i, "method": "echo", "params": [first + i]}
        for i in range(n)
    ]


@dataclass(frozen=True)
class Post:
    path: str
    body: Any
    fault: Fault | None = None
    content_type: str = "application/json"

    @property
    def jsonrpc(self) -> bool:
        return self.body is not BEACON

    @property
    def requests(self) -> int:
        return sum(1 for e in self.body if "id" in e) if self.jsonrpc else 0

    @property
    def sse(self) -> bool:
        return self.path == "/sse"


NOTIFY = [{"jsonrpc": "2.0", "method": "tick"}] * 2

POSTS: list[Post] = [
    Post("/", batch(0)),
    Post("/", batch(10), Fault("drop")),
    Post("/", batch(20), Fault("reorder", mode="reverse")),
    Post("/", batch(30), Fault("wrong_id")),
    Post("/", batch(40), Fault("id_type")),
    Post("/", batch(50), Fault("duplicate")),
    Post("/", batch(60), Fault("null_id")),
    Post("/", NOTIFY, Fault("reply_to_notifications", mode="empty")),
    Post("/", batch(80), Fault("bad_version")),
    Post("/beacon", BEACON, None, "text/plain"),
    Post("/sse", batch(100)),
]


def script(runs: int) -> list[Fault | None]:
    """The fault for every exchange of ``runs`` sessions, one after the other."""
    return [p.fault for p in POSTS] * runs


def plan_posts() -> list[dict[str, str]]:
    return [{"path": p.path, "body": json.dumps(p.body), "type": p.content_type} for p in POSTS]


@dataclass
class Expected:
    totals: Counter[str] = field(default_factory=Counter)
    diagnoses: dict[str, Counter[str]] = field(default_factory=dict)


COUNTERS = (
    "batches",
    "requests",
    "missing",
    "unknown_id",
    "null_id",
    "count_mismatch",
    "duplicate_id",
    "invalid_response",
    "invalid_request",
    "out_of_order",
    "protocol_violation",
    "internal_errors",
    "not_ok",
)


def expected(injected: list[Any], run: int) -> Expected:
    """The counters of session ``run`` (0-based), from the server's record of what it did.

    Per fault, what DESIGN.md says the client-side ledger sees: a dropped reply leaves its
    id missing and the reply one short (count mismatch); a rewritten id (``wrong_id``, or a
    number turned into a string by ``id_type``) leaves the request missing and the reply
    unknown; a duplicate reply is unknown and makes the reply one too long; a null id is
    missing plus null; ``bad_version`` makes that element an invalid response; ``reverse``
    breaks order only; ``[]`` for notifications is a protocol violation.
    """
    first = run * len(POSTS)
    mine = [i for i in injected if first <= i.exchange < first + len(POSTS)]
    out = Expected()
    t = out.totals
    for name in COUNTERS:
        t[name] = 0
    for index, post in enumerate(POSTS):
        if not post.jsonrpc:
            continue
        faults = [i for i in mine if i.exchange == first + index]
        kinds = [i.kind for i in faults]
        touched = {i.kind: len(i.ids) for i in faults}
        t["batches"] += 1
        t["requests"] += post.requests
        diagnosis = "ok"
        if "drop" in kinds:
            t["missing"] += touched["drop"]
            t["count_mismatch"] += 1
            diagnosis = "responses_missing"
        if "reorder" in kinds:
            t["out_of_order"] += 1
        if "wrong_id" in kinds:
            t["missing"] += touched["wrong_id"]
            t["unknown_id"] += touched["wrong_id"]
            diagnosis = "server_id_echo_fault"
        if "id_type" in kinds:
            t["missing"] += touched["id_type"]
            t["unknown_id"] += touched["id_type"]
            diagnosis = "id_type_mismatch"
        if "duplicate" in kinds:
            t["unknown_id"] += touched["duplicate"]
            t["count_mismatch"] += 1
            diagnosis = "server_id_echo_fault"
        if "null_id" in kinds:
            t["missing"] += touched["null_id"]
            t["null_id"] += touched["null_id"]
            t["count_mismatch"] += 1
            diagnosis = "server_null_id"
        if "bad_version" in kinds:
            t["invalid_response"] += touched["bad_version"]
        if "reply_to_notifications" in kinds:
            t["protocol_violation"] += 1
        t["not_ok"] += diagnosis != "ok"
        kind = "sse" if post.sse else "http"
        out.diagnoses.setdefault(kind, Counter())[diagnosis] += 1
    return out
