"""Reply sources for proxy mode: a real JSON-RPC server behind the faults.

The proxy only needs to know where a reply's elements are, not what they mean,
so parsing stays shallow: an array is a batch reply, an object is a single
reply, anything else is passed on byte for byte (and only byte-level faults
such as cut, delay or unparseable can touch it).
"""

from __future__ import annotations

import asyncio
import http.client
import json
from typing import Any
from urllib.parse import urlsplit

from .faults import Reply


class UpstreamError(Exception):
    """The upstream could not be reached or answered with an HTTP error."""


def parse_reply(data: bytes) -> Reply:
    if not data.strip():
        return Reply([], batch=False)
    try:
        value: Any = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        return Reply([], batch=False, raw=data)
    if isinstance(value, list) and value:
        return Reply(value, batch=True)
    if isinstance(value, dict):
        return Reply([value], batch=False)
    return Reply([], batch=False, raw=data)


def is_response(value: Any) -> bool:
    """A response (or a batch of them), as opposed to a server-initiated request."""
    if isinstance(value, list):
        return bool(value) and all(is_response(v) for v in value)
    return (
        isinstance(value, dict)
        and "method" not in value
        and ("result" in value or "error" in value or "id" in value)
    )


def expects_reply(value: Any) -> bool:
    """Whether a client message has at least one element a server must answer."""
    if isinstance(value, list):
        return not value or any(expects_reply(v) for v in value)
    return not (
        isinstance(value, dict) and isinstance(value.get("method"), str) and "id" not in value
    )


class HttpUpstream:
    """Forwards each body to ``url`` with a stdlib client in a worker thread."""

    def __init__(self, url: str, *, timeout: float = 30.0) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"upstream must be an http(s) URL, got {url!r}")
        self.url = url
        self.timeout = timeout
        self._parts = parts

    def _post(self, body: bytes) -> tuple[int, bytes]:
        p = self._parts
        cls = http.client.HTTPSConnection if p.scheme == "https" else http.client.HTTPConnection
        conn = cls(p.hostname or "127.0.0.1", p.port, timeout=self.timeout)
        try:
            path = (p.path or "/") + (f"?{p.query}" if p.query else "")
            headers = {"Content-Type": "application/json", "Accept": "application/json"}
            conn.request("POST", path, body=body, headers=headers)
            resp = conn.getresponse()
            return resp.status, resp.read()
        finally:
            conn.close()

    async def __call__(self, body: bytes) -> Reply:
        try:
            status, data = await asyncio.to_thread(self._post, body)
        except (OSError, http.client.HTTPException) as e:
            raise UpstreamError(f"upstream {self.url} failed: {e}") from e
        if not 200 <= status < 300:
            raise UpstreamError(f"upstream {self.url} answered HTTP {status}")
        return parse_reply(data)
