"""The pairing core: what a JSON-RPC exchange *is*, with no I/O and no OpenTelemetry.

- :mod:`~pairwatch.pairing.elements`: the element model and the classification rules.
- :mod:`~pairwatch.pairing.wire`: decode bytes, text or parsed objects into classified
  payloads (msgspec's typed decoder in :mod:`~pairwatch.pairing._fast` when installed).
- :mod:`~pairwatch.pairing.records`: the closed-batch record the ledger hands on.
- :mod:`~pairwatch.pairing.ledger`: the shadow pending tables, pairing and closing.
- :mod:`~pairwatch.pairing.diagnosis`: the names and words of each batch's diagnosis.
- :mod:`~pairwatch.pairing.repair`: re-ordering a batch reply for position-pairing clients.

Everything here is deterministic given a clock, which is why the pairing contract is
tested here directly.  Arrows only point into this package, never out of it.  The modules
are internal except :mod:`~pairwatch.pairing.records` and :mod:`~pairwatch.pairing.diagnosis`,
whose values reach users through ``Options.on_batch_closed`` and ``pairwatch.diagnosis``.
"""
