"""Tiny builders for JSON-RPC messages used across tests."""

from __future__ import annotations

import json
from typing import Any


def req(id_: Any, method: str = "m", params: Any = None) -> dict[str, Any]:
    out: dict[str, Any] = {"jsonrpc": "2.0", "id": id_, "method": method}
    if params is not None:
        out["params"] = params
    return out


def note(method: str = "n") -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": method}


def res(id_: Any, result: Any = "ok") -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id_, "result": result}


def err(id_: Any, code: int = -32000, message: str = "failed") -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id_, "error": {"code": code, "message": message}}


def dumps(value: Any) -> bytes:
    return json.dumps(value).encode()
