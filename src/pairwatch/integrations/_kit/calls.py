"""What a wrapper does around one call, written once: its arguments and its hooks.

Stream integrations (generic objects, websockets, MCP sessions, web3's WebSocketProvider)
all do the same few things around a library method: look at an argument before the call
(perhaps swapping it for a tee), look at the result after it, notice the exception that ends
a stream, and close something whatever happened.  :class:`Around` takes the hooks and
writes both forms, a plain function and a coroutine, shielding every hook, so an
integration states only what it does.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from pairwatch.integrations import MISSING
from pairwatch.integrations._kit.patch import Wrapper
from pairwatch.runtime import guard

Args = tuple[Any, ...]
Kwargs = dict[str, Any]


def argument(args: Args, kwargs: Kwargs, position: int, name: str, default: Any = None) -> Any:
    """An argument of a wrapped call, passed by position or by keyword."""
    if len(args) > position:
        return args[position]
    return kwargs.get(name, default)


@dataclass(frozen=True)
class Around:
    """Hooks around one wrapped method, each optional and each shielded under ``kind``.

    * ``before(args, kwargs)`` runs first; what it returns is handed to ``after``;
    * ``swap(args, kwargs) -> (args, kwargs)`` replaces the arguments (a teed message);
    * ``after(state, result)`` returns what the caller gets (the result, or a repaired one);
    * ``failed(exc)`` sees an exception of type ``failing`` on its way to the caller;
    * ``finally_()`` runs however the call ended.

    A hook that fails is reported (and counted with ``count``, the channel's internal-error
    counter, when given) and skipped: ``after`` then hands back the result unchanged,
    ``swap`` the arguments unchanged.
    """

    kind: str
    count: guard.ErrorCounter | None = None
    before: Callable[[Args, Kwargs], Any] | None = None
    swap: Callable[[Args, Kwargs], tuple[Args, Kwargs]] | None = None
    after: Callable[[Any, Any], Any] | None = None
    failed: Callable[[BaseException], None] | None = None
    failing: type[BaseException] = BaseException
    finally_: Callable[[], None] | None = None

    def wrapper(self, is_async: bool) -> Wrapper:
        """The wrapt-style wrapper for a plain method, or for a coroutine method."""
        if is_async:

            async def call_async(wrapped: Any, instance: Any, args: Args, kwargs: Kwargs) -> Any:
                state, args, kwargs = self._enter(args, kwargs)
                with self._ending():
                    result = await wrapped(*args, **kwargs)
                return self._after(state, result)

            return call_async

        def call(wrapped: Any, instance: Any, args: Args, kwargs: Kwargs) -> Any:
            state, args, kwargs = self._enter(args, kwargs)
            with self._ending():
                result = wrapped(*args, **kwargs)
            return self._after(state, result)

        return call

    @contextlib.contextmanager
    def _ending(self) -> Iterator[None]:
        """Around the library's own call: ``failed`` on the way out, ``finally_`` always;
        the library's exception object reaches the caller unchanged."""
        try:
            yield
        except self.failing as exc:
            if self.failed is not None:
                guard.shielded(self.kind, self.failed, exc, count=self.count)
            raise
        finally:
            if self.finally_ is not None:
                guard.shielded(self.kind, self.finally_, count=self.count)

    def _enter(self, args: Args, kwargs: Kwargs) -> tuple[Any, Args, Kwargs]:
        state = None
        if self.before is not None:
            state = guard.shielded(self.kind, self.before, args, kwargs, count=self.count)
        if self.swap is not None:
            swapped = guard.shielded(
                self.kind, self.swap, args, kwargs, count=self.count, fallback=(args, kwargs)
            )
            args, kwargs = swapped if swapped is not None else (args, kwargs)
        return state, args, kwargs

    def _after(self, state: Any, result: Any) -> Any:
        if self.after is None:
            return result
        fixed = guard.shielded(
            self.kind, self.after, state, result, count=self.count, fallback=MISSING
        )
        return result if fixed is MISSING else fixed
