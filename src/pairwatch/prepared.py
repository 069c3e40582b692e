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
from pairwatch.otel.spans import SpanPolicy
from pairwatch.otel.telemetry import Telemetry
from pairwatch.pairing.limits import Limits
from pairwatch.sink import telemetry_for

__all__ = ["exchange_parts", "prepared"]

CAP: Final = 256
"""Entries per cache; past it a cache starts over."""

_PREPARED: dict[int, tuple[Options, Limits, SpanPolicy]] = {}
_EXCHANGES: dict[
    tuple[int, str, str | None], tuple[Options, Telemetry, Labels, Limits, SpanPolicy]
] = {}


def prepared(options: Options) -> tuple[Limits, SpanPolicy]:
    """An options object's ledger limits and span policy."""
    entry = _PREPARED.get(id(options))
    if entry is None or entry[0] is not options:
        if len(_PREPARED) >= CAP:
            _PREPARED.clear()
        entry = _PREPARED[id(options)] = (options, options.limits(), options.span_policy())
    return entry[1], entry[2]


def exchange_parts(
    options: Options, integration: str, server_address: str | None
) -> tuple[Telemetry, Labels, Limits, SpanPolicy]:
    """The telemetry, client-side ``http`` attribute sets, limits and span policy of the
    exchanges one integration makes to one address with these options."""
    key = (id(options), integration, server_address)
    entry = _EXCHANGES.get(key)
    if entry is None or entry[0] is not options:
        telemetry = telemetry_for(options)
        labels = telemetry.labels("http", integration, server_address)
        if len(_EXCHANGES) >= CAP:
            _EXCHANGES.clear()
        entry = _EXCHANGES[key] = (options, telemetry, labels, *prepared(options))
    return entry[1], entry[2], entry[3], entry[4]
