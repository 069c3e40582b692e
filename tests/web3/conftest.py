"""Fixtures for the web3 tests (HTTP and WebSocket providers): a real anvil node, chaos proxies."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator

import pytest
from anvil_node import INSTALL, Anvil, find_anvil
from components import require


@pytest.fixture(scope="session")
def anvil(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Anvil]:
    require(importlib.util.find_spec("web3") is not None, "web3", "pip install 'pairwatch[web3]'")
    binary = find_anvil()
    require(binary is not None, "anvil (@foundry-rs/anvil-linux-amd64)", INSTALL)
    assert binary is not None
    node = Anvil(binary, tmp_path_factory.mktemp("anvil") / "anvil.log")
    yield node
    node.stop()


@pytest.fixture(scope="session")
def truth(anvil: Anvil) -> list[int]:
    """What direct single calls return for the batch the tests send."""
    from web3 import HTTPProvider, Web3

    w3 = Web3(HTTPProvider(anvil.http_url))
    return [w3.eth.chain_id, w3.eth.block_number, w3.eth.gas_price]
