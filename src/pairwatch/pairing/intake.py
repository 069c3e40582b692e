"""Read what the client wrote: which requests it now awaits, and what it got wrong.

Split from the ledger because it is the one place that turns a sent payload's classified
elements into the parallel lists a batch keeps (ids, methods), the notifications it will
never get a reply for, and the per-reason count of elements that break or bend the request
rules.  It also pairs the client's own answers to server-initiated requests, which are sent
in the same writes but belong to the other direction's table.
"""

from __future__ import annotations

from collections.abc import Sequence

from pairwatch.pairing.wire import RESPONSE_KINDS, IdKey, IdState, Kind, Payload

__all__ = ["Sent", "count_retyped", "read_sent", "retyped"]


Sent = tuple[list[IdKey | None], list[str | None], int, dict[str, int] | None]
"""What a sent payload asks for: ids and methods (in parallel, one per request), how many
notifications, and the elements that break or bend the request rules, per reason."""


def read_sent(payload: Payload, inbound: dict[IdKey, int]) -> Sent:
    """The requests in ``payload``; answers to the server are paired off ``inbound``."""
    plain = payload.plain
    if plain is not None and plain.kind is Kind.REQUEST and plain.methods is not None:
        # Every element a well-formed request: no loop needed.  The lists are the payload's
        # own, not copies (nothing changes them in place: an eviction replaces the keys),
        # which halves what a pending single request costs.
        return plain.keys, plain.methods, 0, None  # type: ignore[return-value]
    keys: list[IdKey | None] = []
    methods: list[str | None] = []
    notifications = 0
    invalid: dict[str, int] | None = None
    REQUEST, VALID = Kind.REQUEST, IdState.VALID
    for kind, state, key, method, problem, _code in payload.messages:
        if kind is REQUEST and problem is None and state is VALID and type(key) is not float:
            keys.append(key)  # the common case, kept as short as possible
            methods.append(method)
            continue
        reason = problem
        if kind is Kind.RESPONSE_INVALID and problem == "no_result_or_error":
            # An id but no method: a request that lost its method.  The caller still
            # awaits that id, so it is registered (and will likely close as missing).
            reason = "no_method"
            keys.append(key if state is VALID else None)
            methods.append(None)
        elif kind in RESPONSE_KINDS:
            # The client answering a server-initiated request: pair in the inbound table.
            left = inbound.get(key, 0) if key is not None else 0
            if left > 1:
                inbound[key] = left - 1  # type: ignore[index]
            elif left:
                del inbound[key]  # type: ignore[arg-type]
            continue
        elif kind is REQUEST:
            keys.append(key if state is VALID else None)
            methods.append(method)
            if state is IdState.NULL:
                reason = reason or "null_id"
            elif type(key) is float:
                reason = reason or "fractional_id"
        elif kind is Kind.NOTIFICATION:
            notifications += 1
        elif kind is Kind.INVALID:
            reason = reason or "not_jsonrpc"
        if reason is not None:
            invalid = invalid or {}
            invalid[reason] = invalid.get(reason, 0) + 1
    if payload.empty_batch:
        invalid = {"empty_batch": 1}  # the spec calls [] itself an invalid request
    return keys, methods, notifications, invalid


def retyped(key: IdKey) -> tuple[IdKey, ...]:
    """The same id written as another JSON type, as a server that re-types ids echoes it.

    ``0`` <-> ``"0"``, ``1.5`` <-> ``"1.5"``: the case of python-sdk PR #1720, where a
    server echoed ``"0"`` for request id ``0`` and the client's dict lookup missed.
    """
    t = type(key)
    if t is int or t is float:
        return (str(key),)
    if t is not str:
        return ()  # a LongId digest has no other spelling worth trying
    text: str = key  # type: ignore[assignment]
    if not text or len(text) > 40 or text.strip("0123456789.-+eE"):
        return ()
    try:
        number = float(text)
    except ValueError:
        return ()
    if number != number or number in (float("inf"), float("-inf")):
        return ()
    return (int(number),) if number.is_integer() else (number,)


def count_retyped(unknown: Sequence[IdKey], missing: Sequence[IdKey]) -> int:
    """Unknown-id replies whose id is one of the ``missing`` ids under another JSON type."""
    if not unknown or not missing:
        return 0
    wanted = set(missing)
    return sum(1 for key in unknown if any(alt in wanted for alt in retyped(key)))
