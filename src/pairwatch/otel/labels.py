"""Bounded attribute sets: the caps on outside values and the per-channel attribute dicts.

Every attribute value that comes from outside pairwatch (a method name the client calls or a
server answers, the host of a URL) goes through a :class:`Limiter` before it reaches a metric
label or a span, so that hostile or merely careless input cannot grow the exported series,
the span names or pairwatch's own caches without limit.  The bounds and their defaults are
in :mod:`pairwatch.otel.names` and docs/metrics.md.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable

from pairwatch.otel.names import (
    INTEGRATION,
    IS_BATCH,
    METHOD_CAP,
    NAME_MAX_LENGTH,
    OTHER_METHOD,
    RPC_METHOD,
    RPC_SYSTEM_NAME,
    SERVER_ADDRESS,
    SERVER_PORT,
    SIDE,
    SIDES,
    TRANSPORT,
)


class Limiter:
    """Keeps the first ``cap`` distinct values it is asked about; the rest become ``_OTHER``.

    Values longer than ``max_length`` become ``_OTHER`` without taking a slot: one long
    garbage name must not push a real method out.  ``None`` (no method) is ``_OTHER`` too.
    The same limiter feeds metric labels and span names, so a trace and a dashboard name the
    same methods.
    """

    __slots__ = ("_lock", "_seen", "cap", "max_length")

    def __init__(self, cap: int = METHOD_CAP, max_length: int = NAME_MAX_LENGTH) -> None:
        self.cap = cap
        self.max_length = max_length
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self, value: str | None) -> str:
        if value is None:
            return OTHER_METHOD
        if value in self._seen:
            return value
        if len(value) > self.max_length or value == OTHER_METHOD:
            return OTHER_METHOD
        with self._lock:
            if len(self._seen) < self.cap:
                self._seen.add(value)
                return value
        return OTHER_METHOD

    def __len__(self) -> int:
        return len(self._seen)


class Labels:
    """The attribute sets of one kind of channel, built once and reused for every batch.

    ``zeroed`` and ``zeroed_methods`` remember which attribute sets already had their
    counters exported at zero (see ``Telemetry._zeros``), so that costs one set lookup per
    batch after the first.
    """

    __slots__ = (
        "address", "base", "by_batch", "extras", "integration", "method_attrs", "port", "side",
        "zeroed", "zeroed_methods",
    )  # fmt: skip

    def __init__(
        self,
        transport: str,
        integration: str,
        server_address: str | None,
        side: str = "client",
        server_port: int | None = None,
    ) -> None:
        # Two values only: anything else is a caller's mistake, and counting it as client
        # keeps the label bounded rather than raising into a channel being opened.
        self.side = side if side in SIDES else "client"
        self.integration = integration
        self.address = server_address or None
        self.port = server_port if self.address is not None else None
        base: dict[str, str | int] = {
            RPC_SYSTEM_NAME: "jsonrpc",
            TRANSPORT: transport,
            INTEGRATION: integration,
            SIDE: self.side,
        }
        if server_address:
            base[SERVER_ADDRESS] = server_address
            if server_port is not None:
                base[SERVER_PORT] = server_port  # servers on one host told apart
        self.base = base
        self.by_batch: dict[bool, dict[str, str | int]] = {
            True: {**base, IS_BATCH: "true"},
            False: {**base, IS_BATCH: "false"},
        }
        self.method_attrs: dict[tuple[bool, str], dict[str, str | int]] = {}
        self.extras: dict[tuple[bool, tuple[tuple[str, str], ...]], dict[str, str | int]] = {}
        self.zeroed: set[bool] = set()
        self.zeroed_methods: set[tuple[bool, str]] = set()

    def for_method(self, is_batch: bool, method: str) -> dict[str, str | int]:
        """``method`` must already be limited: the cache is as bounded as its keys."""
        key = (is_batch, method)
        attrs = self.method_attrs.get(key)
        if attrs is None:
            attrs = {**self.by_batch[is_batch], RPC_METHOD: method}
            self.method_attrs[key] = attrs
        return attrs

    def extra(self, is_batch: bool, **more: str) -> dict[str, str | int]:
        """The batch attributes plus a few more, one shared dict per distinct set.

        The values (diagnoses, close reasons, problem names, limited methods) come from
        closed sets, so the cache is bounded; sharing the dicts lets a drain sum adds per
        attribute set.
        """
        key = (is_batch, tuple(more.items()))
        attrs = self.extras.get(key)
        if attrs is None:
            attrs = self.extras[key] = {**self.by_batch[is_batch], **more}
        return attrs


class LabelCache:
    """The channel label sets of one meter provider, least recently used evicted past ``cap``.

    Keys are already bounded (transports and integrations are pairwatch's own names, the
    server address is limited), so eviction is a second fence: it bounds memory even for a
    program that opens channels under unbounded hand-written labels.  An evicted set is only
    rebuilt, never lost: the exported series live in the SDK, not here.
    """

    def __init__(
        self, build: Callable[[str, str, str | None, str, int | None], Labels], cap: int
    ) -> None:
        self._build = build
        self.cap = cap
        self._sets: OrderedDict[tuple[str, str, str | None, str, int | None], Labels] = (
            OrderedDict()
        )
        self._lock = threading.Lock()

    def get(
        self,
        transport: str,
        integration: str,
        server_address: str | None,
        side: str = "client",
        server_port: int | None = None,
    ) -> Labels:
        key = (transport, integration, server_address, side, server_port)
        with self._lock:
            found = self._sets.get(key)
            if found is not None:
                self._sets.move_to_end(key)
                return found
            found = self._sets[key] = self._build(*key)
            if len(self._sets) > self.cap:
                self._sets.popitem(last=False)
            return found

    def __len__(self) -> int:
        return len(self._sets)


__all__ = ["LabelCache", "Labels", "Limiter"]
