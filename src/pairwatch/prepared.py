"""What a channel is built from, looked up once per options object, not once per channel.

Why: an HTTP integration opens a channel for every exchange.  The channel's ledger limits,
span policy, telemetry and attribute sets depend only on the options and on the exchange's
integration and server address, and finding them again per exchange cost a third of
opening the channel.

Both caches are keyed by the options' identity and hold the options themselves, so that an
id cannot be reused while cached, and both are bounded: a caller that builds an Options per
call cannot grow them.
"""

from __future__ import annotations

from typing import Final

from pairwatch.options import Options
from pairwatch.otel.labels import Labels
from pairwatch.otel.span_policy import SpanPolicy
from pairwatch.otel.telemetry import Telemetry
from pairwatch.pairing.limits import Limits
from pairwatch.sink import Sink, telemetry_for

__all__ = ["Parts", "exchange_parts", "prepared"]

CAP: Final = 256
"""Entries per cache; past it a cache starts over."""

_PREPARED: dict[int, tuple[Options, Limits, SpanPolicy]] = {}
Parts = tuple[Options, Telemetry, Labels, Limits, SpanPolicy, Sink]
"""The options they were made for, then what an exchange's channel is built from."""

_EXCHANGES: dict[tuple[int, str, str | None], Parts] = {}


def prepared(options: Options) -> tuple[Limits, SpanPolicy]:
    """An options object's ledger limits and span policy."""
    entry = _PREPARED.get(id(options))
    if entry is None or entry[0] is not options:
        if len(_PREPARED) >= CAP:
            _PREPARED.clear()
        entry = _PREPARED[id(options)] = (options, options.limits(), options.span_policy())
    return entry[1], entry[2]


def exchange_parts(options: Options, integration: str, server_address: str | None) -> Parts:
    """The telemetry, client-side ``http`` attribute sets, limits, span policy and sink of
    the exchanges one integration makes to one address with these options.

    The sink is shared by those exchanges: it holds only these parts (a channel that
    relabels itself takes a copy first).
    """
    key = (id(options), integration, server_address)
    entry = _EXCHANGES.get(key)
    if entry is None or entry[0] is not options:
        telemetry = telemetry_for(options)
        labels = telemetry.labels("http", integration, server_address)
        limits, policy = prepared(options)
        sink = Sink(telemetry, labels, options.on_batch_closed, None, None, policy)
        if len(_EXCHANGES) >= CAP:
            _EXCHANGES.clear()
        entry = _EXCHANGES[key] = (options, telemetry, labels, limits, policy, sink)
    return entry
