"""A new HTTP client integration built on the skeleton works like the shipped ones.

``urllib3_kit`` is the whole of a urllib3 integration (well under 100 lines): these tests run
it against the chaos server and read the exported counters, as for httpx or requests.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import urllib3
import urllib3_kit
from opentelemetry.instrumentation.utils import suppress_instrumentation

import pairwatch
from pairwatch.chaos import Fault
from pairwatch.integrations import REGISTRY

BATCH = json.dumps([{"jsonrpc": "2.0", "id": i, "method": "echo", "params": [i]} for i in range(3)])
JSON = {"Content-Type": "application/json"}


@pytest.fixture
def kit() -> Iterator[None]:
    integration = urllib3_kit.enable()
    yield
    REGISTRY.remove(integration)


def _post(pool: urllib3.PoolManager, url: str, **kwargs: object) -> bytes:
    response = pool.request("POST", url, body=BATCH, headers=JSON, **kwargs)
    if kwargs.get("preload_content") is False:
        body = b"".join(response.stream(16))  # a streamed read, 16 bytes at a time
        response.release_conn()
        return body
    return response.data


def test_the_kit_is_small():
    lines = Path(urllib3_kit.__file__).read_text().splitlines()
    assert len(lines) < 100


@pytest.mark.parametrize("streamed", [False, True], ids=["buffered", "streamed"])
def test_a_clean_batch_is_counted_once(otel, chaos_server, kit, streamed):
    chaos_server.set_faults(None)
    extra = {"preload_content": False} if streamed else {}
    plain = _post(urllib3.PoolManager(), chaos_server.url, **extra)
    pool = pairwatch.instrument(urllib3.PoolManager(), meter_provider=otel.meter_provider)
    assert "urlopen" in vars(pool)
    assert _post(pool, chaos_server.url, **extra) == plain
    assert [r["result"] for r in json.loads(plain)] == [[0], [1], [2]]
    assert otel.value("batch.closed", pairwatch__integration="urllib3") == 1
    assert otel.value("batch.requests") == 3
    assert otel.value("batch.missing_response") == 0
    pairwatch.uninstrument(pool)
    assert "urlopen" not in vars(pool)


def test_a_dropped_response_is_missing(otel, chaos_server, kit):
    chaos_server.set_faults([Fault("drop", indices=[0])])
    pool = pairwatch.instrument(urllib3.PoolManager(), meter_provider=otel.meter_provider)
    assert len(json.loads(_post(pool, chaos_server.url))) == 2
    assert otel.value("batch.missing_response") == 1
    assert otel.value("batch.response_count_mismatch") == 1
    assert otel.value("batch.unknown_id_response") == 0


def test_suppression_and_failures_come_with_the_skeleton(otel, chaos_server, kit):
    chaos_server.set_faults(None)
    pool = pairwatch.instrument(urllib3.PoolManager(), meter_provider=otel.meter_provider)
    with suppress_instrumentation():
        _post(pool, chaos_server.url)
    assert otel.value("batch.closed") == 0
    with pytest.raises(urllib3.exceptions.MaxRetryError):
        _post(pool, "http://127.0.0.1:1/", retries=0)  # nothing listens: the send fails
    assert otel.value("batch.missing_response", pairwatch__close_reason="send_failed") == 3
