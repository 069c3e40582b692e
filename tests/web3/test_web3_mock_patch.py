"""web3's HTTP providers under ``mock.patch``: as without pairwatch (see
tests/integrations/test_mock_patch.py for the rule and tests/mock_patch_support.py for the
runner).

The retry cases mirror web3.py 8's own ``tests/core/providers/test_http_request_retry.py``:
``HTTPSessionManager.make_post_request`` patched on the class to raise, and web3 retrying a
fixed number of times.  pairwatch used to keep the provider's original method on the
instance, bypass the patch and post to the real endpoint (10 of that file's tests failed
with pairwatch on).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

import pytest
from components import need
from mock_patch_support import Case, calls, check, counting_server, opened

WEB3_INSTALL = "pip install 'pairwatch[web3]' (scripts/bootstrap.sh does)"


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    need("web3", WEB3_INSTALL)
    with counting_server() as url:
        yield url


def _web3_target(is_async: bool) -> tuple[type, str]:
    from web3._utils.http_session_manager import HTTPSessionManager

    return HTTPSessionManager, "async_make_post_request" if is_async else "make_post_request"


def _web3_echo(endpoint_uri: str, data: bytes, **kwargs: Any) -> bytes:
    sent = json.loads(data)
    return json.dumps({"jsonrpc": "2.0", "id": sent["id"], "result": "0x1"}).encode()


def _web3(is_async: bool, failing: bool) -> Case:
    """web3 over HTTP; ``failing``: the patched post raises and web3 retries it."""

    def client(url: str) -> contextlib.AbstractAsyncContextManager[Any]:
        from web3 import AsyncHTTPProvider, AsyncWeb3, HTTPProvider, Web3
        from web3.providers.rpc.utils import ExceptionRetryConfiguration

        retry = ExceptionRetryConfiguration(errors=(ConnectionError,), retries=3, backoff_factor=0)
        if is_async:
            return opened(
                lambda: AsyncWeb3(AsyncHTTPProvider(url, exception_retry_configuration=retry))
            )
        return opened(lambda: Web3(HTTPProvider(url, exception_retry_configuration=retry)))

    async def call(w3: Any, url: str) -> Any:
        try:
            return (await w3.eth.chain_id) if is_async else w3.eth.chain_id
        except ConnectionError as exc:
            return f"raised {type(exc).__name__}"

    def mock_kwargs() -> dict[str, Any]:
        return {"side_effect": ConnectionError("mocked") if failing else _web3_echo}

    return Case(
        target=lambda: _web3_target(is_async),
        mock_kwargs=mock_kwargs,
        client=client,
        call=call,
        seen=calls,
        real=1,
        requests=1,
    )


CASES: dict[str, Case] = {
    "http": _web3(is_async=False, failing=False),
    "async_http": _web3(is_async=True, failing=False),
    "http_retry": _web3(is_async=False, failing=True),
    "async_http_retry": _web3(is_async=True, failing=True),
}


@pytest.mark.parametrize("order", ["before", "after"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_a_class_patch_behaves_as_without_pairwatch(otel, server, name, order):
    check(CASES[name], server, order, otel, calls=3 if name.endswith("retry") else 1)
