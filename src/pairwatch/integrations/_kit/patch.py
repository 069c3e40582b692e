"""The one patcher: wrappers on a class, a module or one instance, and exactly how to undo them.

Modelled on wrapt's ``wrap_function_wrapper`` / ``unwrap``: a wrapper has wrapt's signature
``wrapper(wrapped, instance, args, kwargs)``, and :class:`Patches` remembers what each patch
replaced so that :meth:`Patches.uninstall` puts exactly that back.  Every integration installs
through it; none keeps its own save/restore list.

Why an instance patch finds its original when called, not when installed.
``instrument(client)`` puts a wrapper in the client's ``__dict__``.  Had it captured
``type(client).send`` at that moment, a ``unittest.mock.patch.object(Client, "send")``
applied afterwards would be bypassed: the wrapper would go on calling the real method (and
the real network) while the bare client calls the mock.  So the wrapper looks the method up
through the class at every call, as Python does when no instance attribute is there.  An
attribute the instance already had of its own stays the original: it shadows the class anyway.

Two rules every wrapper gets here, so that no integration can forget them:

* inside OpenTelemetry's ``suppress_instrumentation`` context the call passes straight
  through, as with the contrib instrumentors (exporters use it for their own traffic);
* a ``unittest.mock`` object found as the original is called straight through: a mock is no
  wire, and what pairwatch changes about a call on its way to the wire (httpx's
  ``stream=True``) would show in the mock's ``call_args``.

Lifecycle wrappers (a close, a connect that installs a tap) pass ``always=True``: skipping one
under suppression would leave a stream's books open for ever.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable
from typing import Any

import wrapt

from pairwatch.integrations import MISSING, Handle, hold
from pairwatch.otel.sdk.context import get_current, suppressed
from pairwatch.runtime import guard, switch

Wrapper = Callable[[Callable[..., Any], Any, tuple[Any, ...], dict[str, Any]], Any]


def _is_mock(original: object, module: Any) -> bool:
    """A Mock, or a function ``create_autospec`` made (it carries its mock as ``.mock``)."""
    mock_type = module.NonCallableMock
    func = getattr(original, "__func__", original)
    return isinstance(original, mock_type) or isinstance(
        getattr(func, "mock", None) if isinstance(func, types.FunctionType) else None, mock_type
    )


def passes_through(original: object) -> bool:
    """Whether a call must reach ``original`` untouched: ``pairwatch.disable()``, inside
    OpenTelemetry's ``suppress_instrumentation``, or a mock (``unittest.mock`` is consulted
    only once someone imported it).  The off switch is read first: disabled costs one flag
    check; an empty context (the usual one) needs no look-up."""
    if not switch.on:
        return True
    current = get_current()
    if current and suppressed(current):
        return True
    module = sys.modules.get("unittest.mock")
    return module is not None and _is_mock(original, module)


def _through_class(obj: object, name: str) -> Any:
    """``getattr(obj, name)`` as it would be without an instance attribute of that name."""
    cls = type(obj)
    found = cls.__dict__.get(name, MISSING)
    if type(found) is types.FunctionType:  # the usual: a plain method of the class itself
        return types.MethodType(found, obj)
    if found is MISSING:
        for klass in cls.__mro__[1:]:
            found = klass.__dict__.get(name, MISSING)
            if found is not MISSING:
                break
        else:
            return MISSING
    get = getattr(type(found), "__get__", None)
    return found if get is None else get(found, obj, cls)


class _OnInstance(wrapt.FunctionWrapper):  # type: ignore[type-arg]
    """Stands in one object's ``__dict__``; finds the original each time it is called.

    It proxies what the attribute was at install time, so introspection (``__name__``,
    ``inspect.iscoroutinefunction``, ``__self__``) reads as before.  After uninstall it is
    inert: a ``mock.patch.object(client, ...)`` that restores it later restores a pass-through.

    A ``FunctionWrapper`` whose wrapper (:func:`_finder`) ignores what it was built around:
    wrapt's C ``__call__`` calls it directly, with no Python ``__call__`` of its own on
    every call the client makes.
    """

    def __init__(self, obj: object, name: str, own: object, wrapper: Wrapper, always: bool) -> None:
        state = _State()
        super().__init__(getattr(obj, name), _finder(hold(obj), name, own, wrapper, always, state))
        self._self_state = state

    def deactivate(self) -> None:
        """Uninstalled: every later call passes straight through."""
        self._self_state.active = False


class _State:
    __slots__ = ("active",)

    def __init__(self) -> None:
        self.active = True


def _finder(
    held: Callable[[], Any], name: str, own: object, wrapper: Wrapper, always: bool, state: _State
) -> Wrapper:
    """The call of one instance wrapper: the original looked up now, then ``wrapper``."""

    def on_instance(
        installed: Callable[..., Any], _: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        obj = held()
        original: Any = own
        if original is MISSING and obj is not None:
            original = _through_class(obj, name)
        if original is MISSING:
            original = installed
        if obj is None or not state.active:
            return original(*args, **kwargs)
        if not always and passes_through(original):
            return original(*args, **kwargs)
        return wrapper(original, obj, args, kwargs)

    return on_instance


def _on_owner(original: Any, wrapper: Wrapper, always: bool) -> wrapt.FunctionWrapper:  # type: ignore[type-arg]
    """A wrapt wrapper for a class or module attribute (the class binds it per instance)."""

    def call(
        wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        if not always and passes_through(wrapped):
            return wrapped(*args, **kwargs)
        return wrapper(wrapped, instance, args, kwargs)

    return wrapt.FunctionWrapper(original, call)


def _is_owner(target: object) -> bool:
    return isinstance(target, (type, types.ModuleType))


def _set(target: object, name: str, value: object) -> None:
    # object.__setattr__ on instances: some clients warn on unknown attributes (aiohttp's
    # debug mode); classes and modules take plain setattr.
    (setattr if _is_owner(target) else object.__setattr__)(target, name, value)


def _delete(target: object, name: str) -> None:
    (delattr if _is_owner(target) else object.__delattr__)(target, name)


class _Undo:
    """One patch: where, what pairwatch put there, and what was there before.

    What pairwatch put there is held weakly: an instance wrapper proxies the client's own
    bound method, so holding it here would keep every instrumented client alive.
    """

    __slots__ = ("before", "mine", "name", "target")

    def __init__(self, target: object, name: str, mine: object, before: object) -> None:
        self.target = hold(target)
        self.name = name
        self.mine = hold(mine)
        self.before = before

    def __call__(self) -> None:
        mine = self.mine()
        if isinstance(mine, _OnInstance):
            mine.deactivate()
        target = self.target()
        if target is None or mine is None or vars(target).get(self.name, MISSING) is not mine:
            return  # collected, or someone put their own value there since: theirs stays
        if self.before is MISSING:
            _delete(target, self.name)
        else:
            _set(target, self.name, self.before)


class Patches(Handle):
    """The patches one installation made, undone together, newest first.

    ``on_uninstall`` hooks run after the attributes are restored (closing a channel,
    releasing a shared tap); every step is shielded on its own, so one that fails (someone
    deleted the attribute) leaves nothing else wrapped.
    """

    def __init__(self) -> None:
        self._undo: list[_Undo] = []
        self.on_uninstall: list[Callable[[], object]] = []

    def wrap(self, target: object, name: str, wrapper: Wrapper, *, always: bool = False) -> None:
        """Wrap ``target.name``: call-time lookup on an instance, wrapt on a class or module."""
        before = vars(target).get(name, MISSING)
        if _is_owner(target):
            original = before if before is not MISSING else _static(target, name)
            mine: object = _on_owner(original, wrapper, always)
        else:
            mine = _OnInstance(target, name, before, wrapper, always)
        _set(target, name, mine)
        self._undo.append(_Undo(target, name, mine, before))

    def replace(self, target: object, name: str, make: Callable[[Any], object]) -> None:
        """Put ``make(original)`` in place of an attribute ``target`` holds itself (a module's
        parser object, say); KeyError when it holds none."""
        before = vars(target)[name]
        mine = make(before)
        _set(target, name, mine)
        self._undo.append(_Undo(target, name, mine, before))

    def uninstall(self) -> None:
        while self._undo:
            guard.shielded("uninstrument", self._undo.pop())
        while self.on_uninstall:
            guard.shielded("uninstrument", self.on_uninstall.pop(0))


def _static(owner: object, name: str) -> object:
    """The raw attribute a class inherits (not bound), or a module's; AttributeError if none."""
    for klass in getattr(owner, "__mro__", (owner,)):
        found = vars(klass).get(name, MISSING)
        if found is not MISSING:
            return found
    raise AttributeError(f"{owner!r} has no attribute {name!r}")
