"""Bounded metric attribute sets: the method-label cap and the per-channel attribute dicts."""

from __future__ import annotations

import threading

from pairwatch.otel.names import (
    INTEGRATION,
    IS_BATCH,
    OTHER_METHOD,
    RPC_METHOD,
    RPC_SYSTEM_NAME,
    SERVER_ADDRESS,
    TRANSPORT,
)


class MethodLimiter:
    """Caps the distinct ``rpc.method`` values per process; the rest become ``_OTHER``.

    A server can send, or a client can call, arbitrarily many method names; unbounded label
    values would grow every metric backend without limit.
    """

    def __init__(self, cap: int = 32) -> None:
        self.cap = cap
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self, method: str | None) -> str:
        if method is None:
            return OTHER_METHOD
        if method in self._seen:
            return method
        with self._lock:
            if len(self._seen) < self.cap:
                self._seen.add(method)
                return method
        return OTHER_METHOD


class Labels:
    """The attribute sets of one kind of channel, built once and reused for every batch."""

    __slots__ = ("base", "by_batch", "extras", "method_attrs")

    def __init__(self, transport: str, integration: str, server_address: str | None) -> None:
        base: dict[str, str] = {
            RPC_SYSTEM_NAME: "jsonrpc",
            TRANSPORT: transport,
            INTEGRATION: integration,
        }
        if server_address:
            base[SERVER_ADDRESS] = server_address
        self.base = base
        self.by_batch: dict[bool, dict[str, str]] = {
            True: {**base, IS_BATCH: "true"},
            False: {**base, IS_BATCH: "false"},
        }
        self.method_attrs: dict[tuple[bool, str], dict[str, str]] = {}
        self.extras: dict[tuple[bool, tuple[tuple[str, str], ...]], dict[str, str]] = {}

    def for_method(self, is_batch: bool, method: str) -> dict[str, str]:
        key = (is_batch, method)
        attrs = self.method_attrs.get(key)
        if attrs is None:
            attrs = {**self.by_batch[is_batch], RPC_METHOD: method}
            self.method_attrs[key] = attrs
        return attrs

    def extra(self, is_batch: bool, **more: str) -> dict[str, str]:
        """The batch attributes plus a few more, one shared dict per distinct set.

        The values (diagnoses, close reasons, problem names, methods) come from closed sets,
        so the cache is bounded; sharing the dicts lets a drain sum adds per attribute set.
        """
        key = (is_batch, tuple(more.items()))
        attrs = self.extras.get(key)
        if attrs is None:
            attrs = self.extras[key] = {**self.by_batch[is_batch], **more}
        return attrs
