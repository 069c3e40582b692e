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

import wrapt

from pairwatch import guard
from pairwatch.channel import Channel, Options
from pairwatch.integrations import Handle, hold
from pairwatch.pairing import wire

_MISSING = object()


def _first_arg(args: tuple[Any, ...], kwargs: dict[str, Any]) -> object:
    if args:
        return args[0]
    if kwargs:
        return next(iter(kwargs.values()))
    return _MISSING


class GenericHandle(Handle):
    """Remembers what was replaced on the instance so uninstall restores it exactly."""

    def __init__(self, obj: object, channel: Channel) -> None:
        self._obj = hold(obj)  # a handle must not keep its client alive
        self.channel = channel
        self._saved: list[tuple[str, object]] = []

    def wrap(self, name: str, wrapper: Callable[..., Any]) -> None:
        original = getattr(self.obj, name)
        own = vars(self.obj).get(name, _MISSING)
        setattr(self.obj, name, wrapt.FunctionWrapper(original, wrapper))
        self._saved.append((name, own))

    @property
    def obj(self) -> Any:
        return self._obj()

    def uninstall(self) -> None:
        obj = self.obj
        for name, own in reversed(self._saved if obj is not None else []):
            if own is _MISSING:
                delattr(obj, name)
            else:
                setattr(obj, name, own)
        self._saved.clear()
        self.channel.close("closed")


Wrapper = Callable[[Callable[..., Any], object, tuple[Any, ...], dict[str, Any]], Any]


def _sender(channel: Channel, also_receive: bool) -> tuple[Wrapper, Wrapper]:
    def before(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
        payload = _first_arg(args, kwargs)
        if payload is _MISSING:
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
        recorded = _safely(before, args, kwargs)
        result = wrapped(*args, **kwargs)
        _safely(after, recorded, result)
        return result

    async def asynchronous(
        wrapped: Callable[..., Any], instance: object, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        recorded = _safely(before, args, kwargs)
        result = await wrapped(*args, **kwargs)
        _safely(after, recorded, result)
        return result

    return sync, asynchronous


def _safely(fn: Callable[..., Any], *args: Any) -> Any:
    """Channel calls are already shielded; this guards the glue around them."""
    try:
        return fn(*args)
    except Exception as exc:
        guard.report("generic", exc, None)
        return False


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
    handle = GenericHandle(obj, channel)
    if send is not None:
        sync, asynchronous = _sender(channel, also_receive=send == receive)
        is_async = inspect.iscoroutinefunction(getattr(obj, send))
        handle.wrap(send, asynchronous if is_async else sync)
    if receive is not None and receive != send:
        handle.wrap(receive, _receiver(channel, inspect.iscoroutinefunction(getattr(obj, receive))))
    if close is not None:
        handle.wrap(close, _closer(channel, inspect.iscoroutinefunction(getattr(obj, close))))
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
                guard.quietly("generic", channel.received, result)
            return result

        return areceive

    def receive(
        wrapped: Callable[..., Any], instance: object, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        result = wrapped(*args, **kwargs)
        if result is not None:
            guard.quietly("generic", channel.received, result)
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
                guard.quietly("generic", channel.close, "closed")

        return aclose

    def close(
        wrapped: Callable[..., Any], instance: object, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        try:
            return wrapped(*args, **kwargs)
        finally:
            guard.quietly("generic", channel.close, "closed")

    return close
