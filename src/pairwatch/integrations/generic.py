"""Instrument any object whose send and receive methods carry JSON-RPC payloads.

``pairwatch.instrument(client, send="write", receive="read")`` wraps the two named methods on
that one instance with wrapt.  The send method's first argument is taken as the payload sent;
if it is not a JSON-RPC payload, the method's return value is (an ``encode`` method).  The
receive method's return value is the payload received.  When both names are the same method
(``call(payload) -> reply``), the argument is recorded as sent and the return value as
received.  ``close="name"`` closes the channel (pending ids count as missing) when that method
is called.  Coroutine methods are awaited transparently.

The object is one stream channel: responses pair across all of its open batches.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from pairwatch import guard
from pairwatch.channel import Channel, Options
from pairwatch.integrations import MISSING
from pairwatch.integrations._patch import Patches, Wrapper
from pairwatch.pairing import wire


def _first_arg(args: tuple[Any, ...], kwargs: dict[str, Any]) -> object:
    if args:
        return args[0]
    if kwargs:
        return next(iter(kwargs.values()))
    return MISSING


class GenericHandle(Patches):
    """The object's patches; uninstall also closes its channel (pending ids go missing)."""

    def __init__(self, channel: Channel) -> None:
        super().__init__()
        self.channel = channel
        self.on_uninstall.append(lambda: channel.close("closed"))


def _sender(channel: Channel, also_receive: bool) -> tuple[Wrapper, Wrapper]:
    def before(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
        payload = _first_arg(args, kwargs)
        if payload is MISSING:
            return False
        parsed = wire.parse(payload)
        if not parsed.messages and not parsed.is_batch:
            return False
        channel.sent_parsed(parsed, payload)
        return True

    def after(recorded: bool, result: object) -> None:
        if result is None:
            return  # nothing came back (a notification, a timeout): nothing to pair
        if also_receive:
            channel.received(result)
        elif not recorded and result is not None:
            channel.sent(result)

    def sync(
        wrapped: Callable[..., Any], instance: object, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        recorded = guard.shielded("generic", before, args, kwargs, fallback=False)
        result = wrapped(*args, **kwargs)
        guard.shielded("generic", after, recorded, result)
        return result

    async def asynchronous(
        wrapped: Callable[..., Any], instance: object, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        recorded = guard.shielded("generic", before, args, kwargs, fallback=False)
        result = await wrapped(*args, **kwargs)
        guard.shielded("generic", after, recorded, result)
        return result

    return sync, asynchronous


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
    channel = Channel(transport=transport, integration=integration, options=options)
    handle = GenericHandle(channel)
    if send is not None:
        sync, asynchronous = _sender(channel, also_receive=send == receive)
        is_async = inspect.iscoroutinefunction(getattr(obj, send))
        handle.wrap(obj, send, asynchronous if is_async else sync)
    if receive is not None and receive != send:
        is_async = inspect.iscoroutinefunction(getattr(obj, receive))
        handle.wrap(obj, receive, _receiver(channel, is_async))
    if close is not None:
        is_async = inspect.iscoroutinefunction(getattr(obj, close))
        handle.wrap(obj, close, _closer(channel, is_async), always=True)
    return handle


def _receiver(channel: Channel, is_async: bool) -> Wrapper:
    if is_async:

        async def areceive(
            wrapped: Callable[..., Any],
            instance: object,
            args: tuple[Any, ...],
            kwargs: dict[str, Any],
        ) -> Any:
            result = await wrapped(*args, **kwargs)
            if result is not None:
                guard.shielded("generic", channel.received, result)
            return result

        return areceive

    def receive(
        wrapped: Callable[..., Any], instance: object, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        result = wrapped(*args, **kwargs)
        if result is not None:
            guard.shielded("generic", channel.received, result)
        return result

    return receive


def _closer(channel: Channel, is_async: bool) -> Wrapper:
    if is_async:

        async def aclose(
            wrapped: Callable[..., Any],
            instance: object,
            args: tuple[Any, ...],
            kwargs: dict[str, Any],
        ) -> Any:
            try:
                return await wrapped(*args, **kwargs)
            finally:
                guard.shielded("generic", channel.close, "closed")

        return aclose

    def close(
        wrapped: Callable[..., Any], instance: object, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        try:
            return wrapped(*args, **kwargs)
        finally:
            guard.shielded("generic", channel.close, "closed")

    return close
