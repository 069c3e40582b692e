"""Large captures stream: memory stays flat however big the file, and chunk boundaries
anywhere in the file change nothing."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

from recording import iso

from pairwatch.audit import audit_file, jsonstream
from pairwatch.audit.report import build

# Per-id OpenTelemetry recording dominates the cost (as on the live path) and tracemalloc
# multiplies it, so the file is made large with big bodies rather than millions of entries.
ENTRIES = 12_000
PAD = 4096


def write_large_har(path: Path, n: int, pad: int = PAD) -> None:
    """Every 10th exchange loses one reply; every reply result is padded to ``pad`` bytes."""
    with path.open("w") as out:
        out.write(
            '{"log": {"version": "1.2", "creator": {"name": "gen"}, "pages": [], "entries": [\n'
        )
        for i in range(n):
            ids = [3 * i, 3 * i + 1, 3 * i + 2]
            sent = [
                {"jsonrpc": "2.0", "id": k, "method": "eth_call", "params": ["0x0"]} for k in ids
            ]
            replies = [{"jsonrpc": "2.0", "id": k, "result": "0x" + "1" * pad} for k in ids]
            if i % 10 == 0:
                replies.pop()
            entry = {
                "startedDateTime": iso(1712664000 + i / 10),
                "time": 5 + i % 50,
                "request": {
                    "method": "POST",
                    "url": "http://127.0.0.1:8545/",
                    "postData": {"mimeType": "application/json", "text": json.dumps(sent)},
                },
                "response": {
                    "status": 200,
                    "content": {"mimeType": "application/json", "text": json.dumps(replies)},
                },
                "timings": {
                    "blocked": -1,
                    "dns": -1,
                    "connect": -1,
                    "send": 0,
                    "wait": 5,
                    "receive": 0,
                },
            }
            out.write(("," if i else "") + json.dumps(entry) + "\n")
        out.write("]}}\n")


def test_large_har_streams_with_bounded_memory(tmp_path):
    path = tmp_path / "large.har"
    write_large_har(path, ENTRIES)
    size = path.stat().st_size
    assert size > 140 << 20
    tracemalloc.start()
    try:
        audit = audit_file(str(path))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    totals = build([audit], [])["totals"]
    assert totals["batches"] == ENTRIES
    assert totals["requests"] == 3 * ENTRIES
    assert totals["missing"] == ENTRIES // 10
    assert totals["count_mismatch"] == ENTRIES // 10
    # The whole file is > 140 MiB as text (and several times that decoded); a stream holds a
    # 1 MiB window (2 bytes a character at worst), one entry and the metric state.
    assert peak < 10 << 20, f"peak {peak / 2**20:.1f} MiB for a {size / 2**20:.0f} MiB file"


def test_tiny_chunks_change_nothing(tmp_path, monkeypatch):
    path = tmp_path / "small.har"
    write_large_har(path, 40)
    expected = build([audit_file(str(path))], [])["totals"]
    monkeypatch.setattr(jsonstream, "CHUNK", 7)
    assert build([audit_file(str(path))], [])["totals"] == expected
    assert expected["missing"] == 4
