"""Instrument a toy JSON-RPC client with the generic form and print the counters.

The toy server below misbehaves the three ways the reference article describes: it answers
a batch in reverse order, drops one response, and answers one element with ``"id": null``.
A client pairing by position would silently hand out wrong results; pairwatch counts it.

Run:  python examples/generic_client.py
"""

from __future__ import annotations

import json
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

import pairwatch


def misbehaving_server(body: bytes, fault: str) -> bytes:
    requests = json.loads(body)
    replies: list[dict[str, Any]] = [
        {"jsonrpc": "2.0", "id": r["id"], "result": r["params"][0] * 2} for r in requests
    ]
    if fault == "reorder":
        replies.reverse()
    elif fault == "drop":
        replies.pop()
    elif fault == "null":
        replies[0] = {
            "jsonrpc": "2.0",
            "id": None,
            "error": {"code": -32600, "message": "Invalid Request"},
        }
    return json.dumps(replies).encode()


class ToyClient:
    """Writes a body with send(), reads the reply with receive(): a socket-like client."""

    def __init__(self) -> None:
        self.next_id = 0
        self.fault = "none"
        self._reply = b""

    def batch(self, values: list[int]) -> list[dict[str, Any]]:
        body = []
        for v in values:
            self.next_id += 1
            body.append({"jsonrpc": "2.0", "id": self.next_id, "method": "double", "params": [v]})
        return body

    def send(self, body: bytes) -> None:
        self._reply = misbehaving_server(body, self.fault)

    def receive(self) -> bytes:
        return self._reply

    def close(self) -> None:
        self._reply = b""


def main() -> None:
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])

    client = ToyClient()
    pairwatch.instrument(
        client, send="send", receive="receive", close="close", meter_provider=provider, spans=False
    )

    for fault in ("none", "reorder", "drop", "null"):
        client.fault = fault
        client.send(json.dumps(client.batch([1, 2, 3])).encode())
        client.receive()
    client.close()  # whatever is still pending now counts as missing

    totals: dict[str, int] = {}
    diagnoses: dict[str, int] = {}
    data = reader.get_metrics_data()
    for rm in data.resource_metrics if data else []:
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                for point in metric.data.data_points:
                    value = getattr(point, "value", getattr(point, "count", 0))
                    totals[metric.name] = totals.get(metric.name, 0) + value
                    if metric.name == "batch.closed":
                        d = str(point.attributes.get("pairwatch.diagnosis"))
                        diagnoses[d] = diagnoses.get(d, 0) + value
    print("pairwatch counters after 4 batches of 3 requests:")
    for name in sorted(totals):
        print(f"  {name:34} {totals[name]}")
    print("batches by diagnosis:")
    for name, count in sorted(diagnoses.items()):
        print(f"  {name:34} {count}  ({pairwatch.diagnosis.EXPLANATION[name]})")


if __name__ == "__main__":
    main()
