"""web3's HTTPProvider and AsyncHTTPProvider against a real anvil, behind a chaos proxy."""

from __future__ import annotations

import warnings

import pytest

import pairwatch
from pairwatch.chaos import Fault
from pairwatch.pairing.repair import MISSING_CODE

pytestmark = pytest.mark.filterwarnings(
    "ignore:Received batch response with missing:RuntimeWarning"
)

# fault -> (what web3 8 returns without pairwatch's repair, exact counters)
FAULTS = {
    "clean": (None, "truth", {}),
    "reorder": (Fault("reorder"), "truth", {"batch.out_of_order": 1}),
    "drop": (
        Fault("drop", indices=[0]),
        "shifted",  # chain_id gets block_number's value, block_number the gas price: no error
        {"batch.missing_response": 1, "batch.response_count_mismatch": 1},
    ),
    "duplicate": (
        Fault("duplicate", indices=[0]),
        "duplicated",  # block_number == chain_id, gas_price == block_number: no error
        {"batch.unknown_id_response": 1, "batch.response_count_mismatch": 1},
    ),
    "unknown": (
        Fault("wrong_id", indices=[1]),
        "swapped",  # the stray id sorts last: block_number and gas_price swap values
        {"batch.unknown_id_response": 1, "batch.missing_response": 1},
    ),
    "null": (
        Fault("null_id", indices=[0]),
        "raises",
        {
            "batch.null_id_response": 1,
            "batch.missing_response": 1,
            "batch.response_count_mismatch": 1,
        },
    ),
}
BASE = {"batch.closed": 1, "batch.requests": 3}


def expected_plain(kind, truth):
    chain, block, gas = truth
    return {
        "truth": truth,
        "shifted": [block, gas],
        "duplicated": [chain, chain, block],
        "swapped": [chain, gas, block],
    }.get(kind)


def sync_batch(w3):
    with w3.batch_requests() as b:
        b.add(w3.eth.chain_id)
        b.add(w3.eth.block_number)
        b.add(w3.eth.gas_price)
        return b.execute()


async def async_batch(w3):
    async with w3.batch_requests() as b:
        b.add(w3.eth.chain_id)
        b.add(w3.eth.block_number)
        b.add(w3.eth.gas_price)
        return await b.async_execute()


def pairing_counters(otel):
    return {k: v for k, v in otel.counters().items() if v and k != "batch.repaired"}


@pytest.mark.parametrize("name", list(FAULTS))
def test_http_exact_counts_and_the_silent_shift(name, anvil, chaos, otel, truth):
    from web3 import HTTPProvider, Web3

    fault, plain, counters = FAULTS[name]
    srv = chaos(upstream=anvil.http_url)
    w3 = Web3(HTTPProvider(srv.url))
    pairwatch.instrument(
        w3, meter_provider=otel.meter_provider, tracer_provider=otel.tracer_provider
    )
    srv.set_faults([fault] if fault else None)
    if plain == "raises":
        with pytest.raises(Exception):  # noqa: B017,PT011 - web3's own error, whatever it is
            sync_batch(w3)
    else:
        assert sync_batch(w3) == expected_plain(plain, truth)
    assert pairing_counters(otel) == {**BASE, **counters}
    assert otel.value("batch.requests", pairwatch__integration="web3", jsonrpc__batch="true") == 3


@pytest.mark.parametrize("name", list(FAULTS))
async def test_async_http_exact_counts(name, anvil, chaos, otel, truth):
    from web3 import AsyncHTTPProvider, AsyncWeb3

    fault, plain, counters = FAULTS[name]
    srv = chaos(upstream=anvil.http_url)
    w3 = AsyncWeb3(AsyncHTTPProvider(srv.url))
    pairwatch.instrument(
        w3, meter_provider=otel.meter_provider, tracer_provider=otel.tracer_provider
    )
    srv.set_faults([fault] if fault else None)
    try:
        if plain == "raises":
            with pytest.raises(Exception):  # noqa: B017,PT011
                await async_batch(w3)
        else:
            assert await async_batch(w3) == expected_plain(plain, truth)
    finally:
        await w3.provider.disconnect()
    assert pairing_counters(otel) == {**BASE, **counters}


REPAIRS = {
    "clean": {},
    "reorder": {"reordered": 1},
    "drop": {"filled_missing": 1},
    "duplicate": {"removed_duplicate": 1},
    "unknown": {"removed_unknown": 1, "filled_missing": 1},
    "null": {"removed_null": 1, "filled_missing": 1},
}


def repaired(otel):
    return {
        a["pairwatch.repair_action"]: otel.value(
            "batch.repaired", pairwatch__repair_action=a["pairwatch.repair_action"]
        )
        for a in otel.attrs("batch.repaired")
    }


def check_repaired_outcome(run, fault, truth):
    """With repair, the batch equals the direct single calls, or raises pairwatch's error."""
    from web3.exceptions import Web3RPCError

    answered = fault is None or fault.kind in ("reorder", "duplicate")
    if answered:
        assert run() == truth
        return
    # web3 8 raises for the whole batch on one error element: never a neighbour's value.
    with pytest.raises(Web3RPCError) as info:
        run()
    assert str(MISSING_CODE) in str(info.value)


@pytest.mark.parametrize("name", list(FAULTS))
def test_http_repair_gives_each_request_its_own_value(name, anvil, chaos, otel, truth):
    from web3 import HTTPProvider, Web3

    fault = FAULTS[name][0]
    srv = chaos(upstream=anvil.http_url)
    w3 = Web3(HTTPProvider(srv.url))
    pairwatch.instrument(w3, meter_provider=otel.meter_provider, repair=True)

    def run():
        srv.set_faults([fault] if fault else None)
        return sync_batch(w3)

    check_repaired_outcome(run, fault, truth)
    assert repaired(otel) == REPAIRS[name]
    assert pairing_counters(otel) == {**BASE, **FAULTS[name][2]}  # repair hides nothing


@pytest.mark.parametrize("name", ["reorder", "drop", "duplicate", "unknown"])
async def test_async_http_repair(name, anvil, chaos, otel, truth):
    from web3 import AsyncHTTPProvider, AsyncWeb3
    from web3.exceptions import Web3RPCError

    fault = FAULTS[name][0]
    srv = chaos(upstream=anvil.http_url)
    w3 = AsyncWeb3(AsyncHTTPProvider(srv.url))
    pairwatch.instrument(w3, meter_provider=otel.meter_provider, repair=True)
    srv.set_faults([fault])
    try:
        if name in ("reorder", "duplicate"):
            assert await async_batch(w3) == truth
        else:
            with pytest.raises(Web3RPCError, match=str(MISSING_CODE)):
                await async_batch(w3)
    finally:
        await w3.provider.disconnect()
    assert repaired(otel) == REPAIRS[name]


def test_used_before_instrument_cache_pitfall_and_single_requests(anvil, chaos, otel, truth):
    """web3 caches make_request/make_batch_request at first use; pairwatch still sees all."""
    from web3 import HTTPProvider, Web3

    srv = chaos(upstream=anvil.http_url)
    w3 = Web3(HTTPProvider(srv.url))
    assert sync_batch(w3) == truth  # fills _batch_request_func_cache
    assert w3.eth.chain_id == truth[0]  # fills _request_func_cache
    pairwatch.instrument(
        w3, meter_provider=otel.meter_provider, tracer_provider=otel.tracer_provider
    )
    srv.set_faults([Fault("drop", indices=[2])])
    assert sync_batch(w3) == truth[:2]  # zip truncates: the gas price silently vanishes
    assert w3.eth.block_number == truth[1]
    assert w3.eth.gas_price == truth[2]
    assert otel.value("batch.requests", jsonrpc__batch="true") == 3
    assert otel.value("batch.requests", jsonrpc__batch="false") == 2
    assert (
        otel.value("batch.closed", jsonrpc__batch="false", pairwatch__close_reason="body_end") == 2
    )
    assert (
        otel.value("batch.missing_response", rpc__method="eth_gasPrice", jsonrpc__batch="true") == 1
    )
    assert otel.value("batch.missing_response") == 1
    assert otel.hist("batch.pair_latency")[0] == 4
    assert {s.name for s in otel.spans()} >= {"jsonrpc batch", "eth_chainId", "eth_gasPrice"}


def test_instrument_a_provider_and_uninstrument(anvil, otel, truth):
    from web3 import HTTPProvider, Web3

    provider = HTTPProvider(anvil.http_url)
    w3 = Web3(provider)
    pairwatch.instrument(provider, meter_provider=otel.meter_provider)
    assert w3.eth.chain_id == truth[0]
    assert otel.value("batch.requests") == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pairwatch.instrument(w3, meter_provider=otel.meter_provider)  # same provider: no-op
    assert w3.eth.chain_id == truth[0]
    assert otel.value("batch.requests") == 2
    pairwatch.uninstrument(provider)
    pairwatch.uninstrument(w3)
    assert "make_post_request" not in vars(provider._request_session_manager)
    assert w3.eth.chain_id == truth[0]
    assert otel.value("batch.requests") == 2


def test_without_repair_the_reply_objects_are_untouched(anvil, otel):
    from web3 import HTTPProvider, Web3

    w3 = Web3(HTTPProvider(anvil.http_url))
    seen = []
    original = w3.provider.decode_rpc_response

    def spy(raw):
        seen.append(original(raw))
        return seen[-1]

    w3.provider.decode_rpc_response = spy
    pairwatch.instrument(w3, meter_provider=otel.meter_provider)
    assert w3.provider.decode_rpc_response is spy
    sync_batch(w3)
    assert isinstance(seen[-1], list)


def test_failed_exchange_closes_as_send_failed(otel):
    from web3 import HTTPProvider, Web3

    w3 = Web3(HTTPProvider("http://127.0.0.1:9/"))  # nothing listens on the discard port
    pairwatch.instrument(w3, meter_provider=otel.meter_provider)
    with pytest.raises(Exception):  # noqa: B017,PT011 - requests' connection error, unchanged
        w3.eth.chain_id  # noqa: B018
    assert otel.value("batch.closed", pairwatch__close_reason="send_failed") >= 1
    assert otel.value("batch.missing_response", pairwatch__close_reason="send_failed") >= 1


def test_web3_with_the_global_http_instrumentation_counts_once(anvil, otel, truth):
    from web3 import HTTPProvider, Web3

    from pairwatch.instrumentor import PairwatchInstrumentor

    instrumentor = PairwatchInstrumentor()
    instrumentor.instrument(meter_provider=otel.meter_provider)
    try:
        w3 = Web3(HTTPProvider(anvil.http_url))
        pairwatch.instrument(w3, meter_provider=otel.meter_provider)
        assert sync_batch(w3) == truth
        # web3's exchange is the outer one: requests' wrapper sees it is tracked and passes.
        assert otel.value("batch.requests") == 3
        assert otel.value("batch.requests", pairwatch__integration="web3") == 3
    finally:
        instrumentor.uninstrument()
