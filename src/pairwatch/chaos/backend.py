"""A tiny, spec-following JSON-RPC 2.0 backend: the *correct* answers.

It is written from the specification on purpose and shares nothing with
pairwatch's own wire/ledger code: a test server that reused the logic under
test would agree with its bugs. Handlers are deterministic so that a test can
check every caller got its own result (``echo`` with a unique param per call).
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from .faults import Reply

Handler = Callable[[Any], Any | Awaitable[Any]]

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603

MAX_SLEEP = 30.0
BLOCK_NUMBER = 0x1B4
CHAIN_ID = 1337


class RpcError(Exception):
    """Raise from a handler to answer with this JSON-RPC error."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def to_json(self) -> dict[str, Any]:
        err: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            err["data"] = self.data
        return err


def _first(params: Any) -> Any:
    if isinstance(params, list):
        if not params:
            raise RpcError(INVALID_PARAMS, "expected one positional parameter")
        return params[0]
    if isinstance(params, dict):
        if len(params) != 1:
            raise RpcError(INVALID_PARAMS, "expected one named parameter")
        return next(iter(params.values()))
    return params


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def echo(params: Any) -> Any:
    return params


def add(params: Any) -> Any:
    values = list(params.values()) if isinstance(params, dict) else params
    if not isinstance(values, list) or not all(_is_number(v) for v in values):
        raise RpcError(INVALID_PARAMS, "add takes a list of numbers")
    return sum(values)


async def sleep(params: Any) -> None:
    seconds = _first(params)
    if not _is_number(seconds) or seconds < 0:
        raise RpcError(INVALID_PARAMS, "sleep takes a non-negative number of seconds")
    await asyncio.sleep(min(float(seconds), MAX_SLEEP))


def get_value(params: Any) -> Any:
    key = _first(params)
    if isinstance(key, (dict, list)):
        raise RpcError(INVALID_PARAMS, "get_value takes a scalar key")
    return f"value:{key}"


def fail(params: Any) -> Any:
    p = params if isinstance(params, dict) else {}
    code = p.get("code", INTERNAL_ERROR)
    raise RpcError(code if isinstance(code, int) else INTERNAL_ERROR, str(p.get("message", "fail")))


def eth_block_number(params: Any) -> Any:
    return hex(BLOCK_NUMBER)


def eth_chain_id(params: Any) -> Any:
    return hex(CHAIN_ID)


def eth_get_balance(params: Any) -> Any:
    address = _first(params)
    if not isinstance(address, str):
        raise RpcError(INVALID_PARAMS, "eth_getBalance takes an address")
    digest = hashlib.sha256(address.lower().encode()).digest()
    return hex(int.from_bytes(digest[:6], "big"))


METHOD_HELP: dict[str, str] = {
    "echo": "returns its params",
    "add": "the sum of a list (or object) of numbers",
    "sleep": "waits params[0] seconds (at most 30), then returns null",
    "get_value": '"value:<key>" for params[0]',
    "fail": 'an error reply (params: {"code": ..., "message": ...})',
    "eth_blockNumber": "a fixed block number, as hex",
    "eth_chainId": "1337, as hex",
    "eth_getBalance": "a balance derived from the address",
    "net_version": '"1337"',
}
"""What each method of the test server answers (``pairwatch serve --help``)."""

DEFAULT_HANDLERS: dict[str, Handler] = {
    "echo": echo,
    "add": add,
    "sleep": sleep,
    "get_value": get_value,
    "fail": fail,
    "eth_blockNumber": eth_block_number,
    "eth_chainId": eth_chain_id,
    "eth_getBalance": eth_get_balance,
    "net_version": lambda _p: str(CHAIN_ID),
}


def error_response(id_: Any, code: int, message: str, data: Any = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id_, "error": RpcError(code, message, data).to_json()}


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def decode(body: bytes | str) -> Any:
    """Strict JSON: NaN/Infinity are parse errors, as for most real servers."""
    return json.loads(body, parse_constant=_reject_constant)


def _valid_id(v: Any) -> bool:
    return v is None or isinstance(v, str) or _is_number(v)


def is_valid_request(el: Any) -> bool:
    return (
        isinstance(el, dict)
        and el.get("jsonrpc") == "2.0"
        and isinstance(el.get("method"), str)
        and isinstance(el.get("params", []), (list, dict))
        and _valid_id(el.get("id"))
    )


class Backend:
    """Answers requests with the built-in (or given) handlers."""

    def __init__(
        self, handlers: Mapping[str, Handler] | None = None, *, include_defaults: bool = True
    ) -> None:
        self.handlers: dict[str, Handler] = dict(DEFAULT_HANDLERS) if include_defaults else {}
        self.handlers.update(handlers or {})

    async def __call__(self, body: bytes) -> Reply:
        return await self.handle_body(body)

    async def handle_body(self, body: bytes | str) -> Reply:
        try:
            message = decode(body)
        except (ValueError, UnicodeDecodeError):
            return Reply([error_response(None, PARSE_ERROR, "Parse error")], batch=False)
        return await self.handle_message(message)

    async def handle_message(self, message: Any) -> Reply:
        if isinstance(message, list):
            if not message:
                # The spec answers an empty array with one error object, not an array.
                return Reply([error_response(None, INVALID_REQUEST, "Invalid Request")], False)
            # Elements run concurrently, as on a real node; answers keep request order
            # here and only the reorder fault changes it.
            answers = await asyncio.gather(*(self.handle_element(el) for el in message))
            return Reply([a for a in answers if a is not None], batch=True)
        answer = await self.handle_element(message)
        return Reply([] if answer is None else [answer], batch=False)

    async def handle_element(self, el: Any) -> dict[str, Any] | None:
        if not is_valid_request(el):
            return error_response(None, INVALID_REQUEST, "Invalid Request")
        is_notification = "id" not in el
        id_ = el.get("id")
        handler = self.handlers.get(el["method"])
        if handler is None:
            if is_notification:
                return None
            return error_response(id_, METHOD_NOT_FOUND, "Method not found")
        try:
            result = handler(el.get("params"))
            if inspect.isawaitable(result):
                result = await result
        except RpcError as e:
            answer = {"jsonrpc": "2.0", "id": id_, "error": e.to_json()}
        except (TypeError, ValueError, KeyError, IndexError) as e:
            answer = error_response(id_, INVALID_PARAMS, f"Invalid params: {e}")
        except Exception as e:
            answer = error_response(id_, INTERNAL_ERROR, f"Internal error: {e}")
        else:
            answer = {"jsonrpc": "2.0", "id": id_, "result": result}
        return None if is_notification else answer
