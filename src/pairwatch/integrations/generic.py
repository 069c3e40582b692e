"""Instrument any object whose send and receive methods carry JSON-RPC payloads.

``pairwatch.instrument(client, send="write", receive="read")`` wraps the two named methods on
that one instance with wrapt.  The send method's first argument is taken as the payload sent;
if it is not a JSON-RPC payload, the method's return value is (an ``encode`` method).  The
receive method's return value is the payload received.  When both names are the same method
(``call(payload) -> reply``), the argument is recorded as sent and the return value as
received.  ``close="name"`` closes the channel (pending ids count as missing) when that method
is called.  Coroutine methods are awaited transparently.

The object is one stream channel: responses pair across all of its open batches.  Given only
one direction, it can never pair anything (a reader alone turns every reply into an unknown
id, a writer alone every request into a missing reply), so that set-up is warned about once.
"""

from __future__ import annotations

import inspect
import logging

from pairwatch.channel import Channel, Options
from pairwatch.integrations._kit.calls import Args, Around, Kwargs
from pairwatch.integrations._kit.patch import Patches
from pairwatch.pairing import wire

_log = logging.getLogger("pairwatch")
_warned: set[str] = set()

ONE_WAY = {
    "receive": (
        "pairwatch: instrument(%s, receive=%r) without send=: pairwatch sees no request, so "
        "every reply will count as batch.unknown_id_response. Name the sending method too "
        "(send=...), or feed both halves to one pairwatch.open_channel()."
    ),
    "send": (
        "pairwatch: instrument(%s, send=%r) without receive=: pairwatch sees no reply, so "
        "every request will count as batch.missing_response when it times out. Name the "
        "receiving method too (receive=...), or feed both halves to one "
        "pairwatch.open_channel()."
    ),
}


def _warn_one_way(obj: object, send: str | None, receive: str | None) -> None:
    """Once per process and direction: a one-way set-up only ever counts faults."""
    if (send is None) == (receive is None):
        return
    direction = "receive" if send is None else "send"
    if direction not in _warned:
        _warned.add(direction)
        _log.warning(ONE_WAY[direction], type(obj).__name__, receive if send is None else send)


class GenericHandle(Patches):
    """The object's patches; uninstall also closes its channel (pending ids go missing)."""

    def __init__(self, channel: Channel) -> None:
        super().__init__()
        self.channel = channel
        self.on_uninstall.append(lambda: channel.close("closed"))


def _sender(channel: Channel, also_receive: bool) -> Around:
    """The argument is what is sent; the result is the reply (``call``-style), or what is
    sent when the argument was not a payload (``encode``-style)."""

    def before(args: Args, kwargs: Kwargs) -> bool:
        payload = args[0] if args else next(iter(kwargs.values()), None)
        if payload is None:
            return False
        parsed = wire.parse(payload)
        if not parsed.messages and not parsed.is_batch:
            return False
        channel.sent_parsed(parsed, payload)
        return True

    def after(recorded: bool | None, result: object) -> object:
        if result is None:
            return result  # nothing came back (a notification, a timeout): nothing to pair
        if also_receive:
            channel.received(result)
        elif not recorded:
            channel.sent(result)
        return result

    return Around("generic", before=before, after=after)


def _receiver(channel: Channel) -> Around:
    def after(_: None, result: object) -> object:
        if result is not None:
            channel.received(result)
        return result

    return Around("generic", after=after)


def _closer(channel: Channel) -> Around:
    return Around("generic", finally_=lambda: channel.close("closed"))


def install(
    obj: object,
    options: Options,
    *,
    send: str | None,
    receive: str | None,
    close: str | None = None,
    transport: str = "generic",
    integration: str = "generic",
) -> GenericHandle:
    """Wrap the named methods of ``obj``; raises TypeError at set-up, never later."""
    if send is None and receive is None:
        raise TypeError("generic instrumentation needs send= and/or receive= method names")
    if not hasattr(obj, "__dict__"):
        raise TypeError(f"cannot instrument {type(obj).__name__}: instances have no __dict__")
    for name in (send, receive, close):
        if name is not None and not callable(getattr(obj, name, None)):
            raise TypeError(f"{type(obj).__name__} has no method {name!r}")
    _warn_one_way(obj, send, receive)
    channel = Channel(transport=transport, integration=integration, options=options)
    handle = GenericHandle(channel)
    hooks = [
        (send, _sender(channel, also_receive=send == receive)),
        (None if receive == send else receive, _receiver(channel)),
        (close, _closer(channel)),
    ]
    for name, around in hooks:
        if name is not None:
            is_async = inspect.iscoroutinefunction(getattr(obj, name))
            handle.wrap(obj, name, around.wrapper(is_async), always=around.finally_ is not None)
    return handle
