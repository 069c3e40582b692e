"""The pairing core: what a JSON-RPC exchange *is*, with no I/O and no OpenTelemetry.

- :mod:`~pairwatch.pairing.elements`: the element model and the classification rules.
- :mod:`~pairwatch.pairing.wire`: decode bytes, text or parsed objects into classified
  payloads (msgspec's typed decoder in :mod:`~pairwatch.pairing._fast` for the plain shape).
- :mod:`~pairwatch.pairing.records`: the closed-batch record the ledger hands on.
- :mod:`~pairwatch.pairing.ledger`: one channel's books: pairing, attributing, closing.
- :mod:`~pairwatch.pairing.intake`: what a sent payload asks for (ids, methods, problems).
- :mod:`~pairwatch.pairing.table`: the pending table: id -> the request awaiting it.
- :mod:`~pairwatch.pairing.opened`: the open batches in deadline order, without scanning.
- :mod:`~pairwatch.pairing.closing`: what a batch shows once it closes.
- :mod:`~pairwatch.pairing.shape`: whether a reply has the shape its request allows.
- :mod:`~pairwatch.pairing.late`: the bounded memory of ids closed as missing by timeout.
- :mod:`~pairwatch.pairing.limits`: per-channel caps and the process-wide pending budget.
- :mod:`~pairwatch.pairing.diagnosis`: each batch's diagnosis from evidence, and its words.
- :mod:`~pairwatch.pairing.repair`: re-ordering a batch reply for position-pairing clients.

Everything here is deterministic given a clock, which is why the pairing contract is
tested here directly.  Arrows only point into this package, never out of it.  The modules
are internal except :mod:`~pairwatch.pairing.records` and :mod:`~pairwatch.pairing.diagnosis`,
whose values reach users through ``Options.on_batch_closed`` and ``pairwatch.diagnosis``.
"""
