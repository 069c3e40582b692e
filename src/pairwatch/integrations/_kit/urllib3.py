"""A tee on one urllib3 response: what requests reads through, and urllib3 users directly.

requests' ``Response.raw`` is a urllib3 ``HTTPResponse``; ``content``, ``json()``,
``iter_content``, ``iter_lines`` and direct ``raw.read`` calls all read through its
``stream``/``read``/``read1`` methods.  Teeing those on the one response object shows
pairwatch a copy of every chunk the caller receives, without pairwatch reading anything
itself.  Kept apart from the requests integration so that any integration whose library
hands out urllib3 responses uses the same tee rather than importing another integration.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from pairwatch.channel.channel import ended_by
from pairwatch.integrations._kit.stream import Tap
from pairwatch.runtime import guard

__all__ = ["RawTee"]

_MISSING = object()


class RawTee:
    """Instance-level wrappers on one urllib3 response's ``stream``, ``read``, ``read1``
    and ``close``.

    urllib3's own methods call one another (``stream`` calls ``read`` or ``read_chunked``),
    so only the outermost call feeds the tap (``depth``).  Bytes read with
    ``decode_content`` off still carry the Content-Encoding; the tap decodes its own copy.

    The wrappers come off once the tap is done (:meth:`_unhook`): the response holds them
    and they hold the response, a cycle only the garbage collector would free, taking the
    response, its buffers and the exchange's books with it.
    """

    __slots__ = ("depth", "hooks", "raw", "tap")

    def __init__(self, raw: Any, tap: Tap) -> None:
        self.raw = raw
        self.tap = tap
        self.depth = 0
        # name -> (the wrapper put on raw, what raw's own __dict__ held before, if anything)
        self.hooks: dict[str, tuple[object, object]] = {}
        own = getattr(raw, "__dict__", {})
        for name, make in (
            ("stream", self._stream),
            ("read", self._read),
            ("read1", self._read1),
            ("close", self._close),
        ):
            original = getattr(raw, name, None)
            if original is not None:
                before = own.get(name, _MISSING)
                hook = make(original)
                setattr(raw, name, hook)
                self.hooks[name] = (hook, before)

    def _unhook(self) -> None:
        """The tap is done: give ``raw`` back its own methods (see the class docstring).

        Only a wrapper still in place is taken off; what raw's ``__dict__`` held before it
        (another library's instance wrapper) is put back.
        """
        hooks, self.hooks = self.hooks, {}
        own = getattr(self.raw, "__dict__", None)
        if own is None:
            return
        for name, (hook, before) in hooks.items():
            if own.get(name) is hook:
                if before is _MISSING:
                    del own[name]
                else:
                    own[name] = before

    def _decodes(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
        try:
            flag = kwargs.get("decode_content", args[1] if len(args) > 1 else None)
            return bool(self.raw.decode_content if flag is None else flag)
        except Exception:  # runs on the caller's read path: guess rather than raise
            return True

    def _feed(self, data: bytes, decoded: bool) -> None:
        if decoded:
            self.tap.chunk(data)
        else:
            self.tap.raw_chunk(data)

    def _stream(self, original: Callable[..., Any]) -> Callable[..., Any]:
        def stream(*args: Any, **kwargs: Any) -> Any:
            if self.depth:
                return original(*args, **kwargs)
            return self._tee(original(*args, **kwargs), self._decodes(args, kwargs))

        return stream

    def _tee(self, inner: Iterator[bytes], decoded: bool) -> Iterator[bytes]:
        tap = self.tap
        try:
            while True:
                self.depth += 1
                try:
                    chunk = next(inner)
                except StopIteration:
                    break
                finally:
                    self.depth -= 1
                self._feed(chunk, decoded)
                yield chunk
        except BaseException as exc:
            tap.dropped(ended_by(exc, "stream_dropped"))
            self._unhook()
            raise
        finally:
            close = getattr(inner, "close", None)
            if close is not None:
                close()
        tap.end()
        self._unhook()

    def _read(self, original: Callable[..., Any]) -> Callable[..., Any]:
        return self._reader(original, whole_when_unbounded=True)

    def _read1(self, original: Callable[..., Any]) -> Callable[..., Any]:
        return self._reader(original, whole_when_unbounded=False)

    def _reader(
        self, original: Callable[..., Any], *, whole_when_unbounded: bool
    ) -> Callable[..., Any]:
        """``read()`` without a size reads to the end; ``read1()`` never promises that."""

        def read(*args: Any, **kwargs: Any) -> Any:
            if self.depth:
                return original(*args, **kwargs)
            amt = kwargs.get("amt", args[0] if args else None)
            self.depth += 1
            try:
                data = original(*args, **kwargs)
            except BaseException as exc:
                self.tap.dropped(ended_by(exc, "stream_dropped"))
                self._unhook()
                raise
            finally:
                self.depth -= 1
            try:
                self._feed(data, self._decodes(args, kwargs))
                unbounded = amt is None or (isinstance(amt, int) and amt < 0)
                if not data or (unbounded and whole_when_unbounded):
                    self.tap.end()
                    self._unhook()
            except Exception as exc:  # the caller's bytes are read: hand them over
                guard.report("requests_tee", exc, None)
            return data

        return read

    def _close(self, original: Callable[..., Any]) -> Callable[..., Any]:
        def close(*args: Any, **kwargs: Any) -> Any:
            try:
                return original(*args, **kwargs)
            finally:
                guard.shielded("requests_tee", self.tap.dropped)  # a no-op once ended
                self._unhook()

        return close
