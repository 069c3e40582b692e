"""What a channel is built from, looked up once per options object rather than per channel.

An HTTP integration opens a channel per exchange; its limits, span policy, telemetry, labels
and sink depend only on the options, the integration and the server address.  Both caches
are keyed by the options' identity and hold the options themselves (an id cannot be reused
while cached), and both start over past :data:`CAP` entries.
"""

from __future__ import annotations

from typing import Final, NamedTuple

from pairwatch.channel.sink import Sink, telemetry_for
from pairwatch.options import Options
from pairwatch.otel.labels import Labels
from pairwatch.otel.span_policy import SpanPolicy
from pairwatch.otel.telemetry import Telemetry
from pairwatch.pairing.limits import Limits

__all__ = ["Parts", "exchange_parts", "prepared"]

CAP: Final = 256
"""Entries per cache; past it a cache starts over."""


class Parts(NamedTuple):
    """What the exchanges one integration makes to one address with one options object
    share: their channels are built from these without a look-up."""

    options: Options
    telemetry: Telemetry
    labels: Labels
    limits: Limits
    policy: SpanPolicy
    sink: Sink


_PREPARED: dict[int, tuple[Options, Limits, SpanPolicy]] = {}
_EXCHANGES: dict[tuple[int, str, str | None, int | None], Parts] = {}


def prepared(options: Options) -> tuple[Limits, SpanPolicy]:
    """An options object's ledger limits and span policy."""
    entry = _PREPARED.get(id(options))
    if entry is None or entry[0] is not options:
        if len(_PREPARED) >= CAP:
            _PREPARED.clear()
        entry = _PREPARED[id(options)] = (options, options.limits(), options.span_policy())
    return entry[1], entry[2]


def exchange_parts(
    options: Options, integration: str, server_address: str | None, port: int | None = None
) -> Parts:
    """The parts of the client-side ``http`` exchanges of one integration and address.

    The sink is shared by those exchanges: it holds only these parts (a channel that
    relabels itself takes a copy first)."""
    key = (id(options), integration, server_address, port)
    entry = _EXCHANGES.get(key)
    if entry is None or entry.options is not options:
        telemetry = telemetry_for(options)
        labels = telemetry.labels("http", integration, server_address, "client", port)
        limits, policy = prepared(options)
        sink = Sink(telemetry, labels, options.on_batch_closed, None, None, policy)
        if len(_EXCHANGES) >= CAP:
            _EXCHANGES.clear()
        entry = _EXCHANGES[key] = Parts(options, telemetry, labels, limits, policy, sink)
    return entry
