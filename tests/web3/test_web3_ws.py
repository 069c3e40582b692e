"""web3's WebSocketProvider against a real anvil, behind the chaos websocket relay."""

from __future__ import annotations

import pytest

import pairwatch
from pairwatch.chaos import Fault
from pairwatch.pairing.repair import MISSING_CODE

pytestmark = pytest.mark.filterwarnings(
    "ignore:Received batch response with missing:RuntimeWarning"
)

# fault -> (what web3 8 returns without repair, exact counters for the batch and one single)
FAULTS = {
    "reorder": (Fault("reorder"), "truth", {"batch.out_of_order": 1}),
    "drop": (
        Fault("drop", indices=[0]),
        "shifted",
        {"batch.missing_response": 1, "batch.response_count_mismatch": 1},
    ),
    "duplicate": (
        Fault("duplicate", indices=[0]),
        "raw_dict",  # the second copy has no request info left: web3 returns the raw dict
        {"batch.unknown_id_response": 1, "batch.response_count_mismatch": 1},
    ),
    "unknown": (
        Fault("wrong_id", indices=[1]),
        "raw_dict",
        {"batch.unknown_id_response": 1, "batch.missing_response": 1},
    ),
}
REPAIRS = {
    "reorder": {"reordered": 1},
    "drop": {"filled_missing": 1},
    "duplicate": {"removed_duplicate": 1},
    "unknown": {"removed_unknown": 1, "filled_missing": 1},
}


async def batch(w3):
    async with w3.batch_requests() as b:
        b.add(w3.eth.chain_id)
        b.add(w3.eth.block_number)
        b.add(w3.eth.gas_price)
        return await b.async_execute()


def repaired(otel):
    actions = {a["pairwatch.repair_action"] for a in otel.attrs("batch.repaired")}
    return {a: otel.value("batch.repaired", pairwatch__repair_action=a) for a in actions}


@pytest.mark.parametrize("name", list(FAULTS))
async def test_ws_exact_counts_and_the_silent_shift(name, anvil, chaos, otel, truth):
    from web3 import AsyncWeb3, WebSocketProvider

    fault, plain, counters = FAULTS[name]
    srv = chaos(transport="ws", upstream=anvil.ws_url)
    w3 = AsyncWeb3(WebSocketProvider(srv.url, request_timeout=5))
    pairwatch.instrument(w3, meter_provider=otel.meter_provider)  # before connecting
    async with w3:
        assert await w3.eth.chain_id == truth[0]  # a single request on the same socket
        srv.set_faults([fault])
        result = await batch(w3)
    _, block, gas = truth
    if plain == "truth":
        assert result == truth
    elif plain == "shifted":
        assert result == [block, gas]
    else:
        assert any(isinstance(v, dict) for v in result)  # a raw response dict as a value
    got = {k: v for k, v in otel.counters().items() if v}
    assert got == {"batch.closed": 2, "batch.requests": 4, **counters}
    assert (
        otel.value("batch.requests", pairwatch__transport="websocket", jsonrpc__batch="false") == 1
    )
    assert otel.value("batch.requests", pairwatch__integration="web3", jsonrpc__batch="true") == 3


@pytest.mark.parametrize("name", list(FAULTS))
async def test_ws_repair(name, anvil, chaos, otel, truth):
    from web3 import AsyncWeb3, WebSocketProvider
    from web3.exceptions import Web3RPCError

    fault = FAULTS[name][0]
    srv = chaos(transport="ws", upstream=anvil.ws_url)
    async with AsyncWeb3(WebSocketProvider(srv.url, request_timeout=5)) as w3:
        assert await w3.eth.chain_id == truth[0]  # used before instrument
        pairwatch.instrument(w3, meter_provider=otel.meter_provider, repair=True)
        assert await w3.eth.gas_price == truth[2]
        srv.set_faults([fault])
        if name in ("reorder", "duplicate"):
            assert await batch(w3) == truth
        else:
            # web3 8 raises for the whole batch on one error element: never a neighbour's value.
            with pytest.raises(Web3RPCError, match=str(MISSING_CODE)):
                await batch(w3)
        assert await w3.eth.block_number == truth[1]  # the socket still works
    assert repaired(otel) == REPAIRS[name]


@pytest.mark.parametrize("repair", [False, True])
async def test_ws_instrumented_while_connected_sees_the_message_already_awaited(
    repair, anvil, chaos, otel, truth
):
    """web3's listener already waits inside the original recv: that message still counts."""
    from web3 import AsyncWeb3, WebSocketProvider
    from web3.exceptions import Web3RPCError

    srv = chaos(transport="ws", upstream=anvil.ws_url)
    async with AsyncWeb3(WebSocketProvider(srv.url, request_timeout=5)) as w3:
        assert await w3.eth.chain_id == truth[0]
        pairwatch.instrument(w3, meter_provider=otel.meter_provider, repair=repair)
        srv.set_faults([Fault("drop", indices=[0])])
        if repair:
            with pytest.raises(Web3RPCError, match=str(MISSING_CODE)):
                await batch(w3)
        else:
            assert await batch(w3) == truth[1:]  # shifted silently
        assert await w3.eth.chain_id == truth[0]
    got = {k: v for k, v in otel.counters().items() if v}
    expected = {"batch.closed": 2, "batch.requests": 4, "batch.response_count_mismatch": 1}
    expected["batch.missing_response"] = 1
    if repair:
        expected["batch.repaired"] = 1
    assert got == expected


async def test_ws_stream_drop_closes_pending_as_stream_dropped(anvil, chaos, otel):
    from web3 import AsyncWeb3, WebSocketProvider

    srv = chaos(transport="ws", upstream=anvil.ws_url)
    w3 = AsyncWeb3(WebSocketProvider(srv.url, request_timeout=2))
    pairwatch.instrument(w3, meter_provider=otel.meter_provider)
    async with w3:
        srv.set_faults([Fault("cut")])
        with pytest.raises(Exception):  # noqa: B017,PT011 - web3's own error, unchanged
            await batch(w3)
    assert otel.value("batch.missing_response", pairwatch__close_reason="stream_dropped") == 3
    assert otel.value("batch.closed", pairwatch__close_reason="stream_dropped") == 1


async def test_ws_reconnect_gets_a_new_channel(anvil, otel, truth):
    from web3 import AsyncWeb3, WebSocketProvider

    provider = WebSocketProvider(anvil.ws_url)
    w3 = AsyncWeb3(provider)
    pairwatch.instrument(provider, meter_provider=otel.meter_provider)
    for _ in range(2):
        async with w3:
            assert await w3.eth.chain_id == truth[0]
    assert otel.value("batch.requests") == 2
    assert otel.value("batch.closed", pairwatch__close_reason="complete") == 2
    pairwatch.uninstrument(provider)
    assert "_provider_specific_connect" not in vars(provider)
