"""The fields ``read_message`` reads from an object message, where they live, and snapshots of them.

A snapshot is what the token counter keeps to decide later that a cached count is still right
(``snapshot``, ``unchanged``); ``fields_in_dict`` is the one test of "the fields live in the
instance ``__dict__``" that every reader by columns relies on.
"""

from __future__ import annotations

import operator
import sys
from collections.abc import Callable, Mapping, Sequence
from itertools import repeat
from operator import attrgetter
from typing import Any, Final

#: Every field ``read_message`` may read from an object message.
READ_FIELDS: Final = (
    "type", "role", "id", "name", "content", "tool_calls", "additional_kwargs", "tool_call_id",
    # Gemini contents and Responses items
    "parts", "call_id", "output", "arguments", "input", "action", "operation", "summary",
    "approval_request_id", "model",
)  # fmt: skip
#: Where a pydantic model keeps the values of fields it does not declare (``extra="allow"``).
PYDANTIC_EXTRA: Final = "__pydantic_extra__"
_dict_field_classes: dict[type, bool] = {}


def _pydantic_getattr() -> Any:
    """pydantic's ``BaseModel.__getattr__`` when pydantic is imported (no instance of a pydantic
    model exists before that), else None."""
    main = sys.modules.get("pydantic.main")
    model = getattr(main, "BaseModel", None)
    return getattr(model, "__getattr__", None) if model is not None else None


def fields_in_dict(cls: type) -> bool:
    """True when ``cls``'s instances keep every ``READ_FIELDS`` field they have in their instance
    ``__dict__``, so that reading that dict gives what ``getattr`` (and so ``read_message``) gives.

    The one test of "fields live in ``__dict__``" for every reader by columns (``read_plain``,
    ``snapshots``, ``fast_views``) and for ``snapshot`` of one message. It holds when
    the class is no ``Mapping``, serves attributes with ``object.__getattribute__``, serves none
    of the fields at class level (no property, slot, descriptor or class attribute) and has no
    ``__getattr__``, except pydantic's: that one serves only private attributes and the model's
    extras, the dict ``PYDANTIC_EXTRA``, so a field missing from ``__dict__`` is there or absent
    (LangChain's messages are such models; a message whose extras hold a field is read with
    ``getattr``, as is any other class).
    """
    ok = _dict_field_classes.get(cls)
    if ok is None:
        try:
            hook = getattr(cls, "__getattr__", None)
            ok = (
                not issubclass(cls, Mapping)
                and cls.__getattribute__ is object.__getattribute__
                and (hook is None or hook is _pydantic_getattr())
                and not any(hasattr(cls, f) for f in READ_FIELDS)
            )
        except Exception:  # a metaclass __getattr__ that raises something odd
            ok = False
        _dict_field_classes[cls] = ok
    return ok


ATOMIC: Final = frozenset({str, int, float, bool, type(None)})
_NO_ATTRS: Final[dict[str, Any]] = {}
dict_get: Callable[[dict[str, Any], str], Any] = dict.get
#: ``view(message)`` of a pair, one C call: ``map(apply_view, views, messages)``
#: (``operator.call`` from Python 3.11; the views are ``attrgetter`` objects)
apply_view: Final[Callable[[Any, Any], Any]] = getattr(operator, "call", attrgetter.__call__)


class Uncacheable:
    """The snapshot of a message that cannot be copied (a reference cycle): equal to nothing."""

    __hash__ = None  # type: ignore[assignment]

    def __eq__(self, other: object) -> bool:
        return False


#: The copy of every empty dict and list: one object, so that checking a snapshot touches no
#: copy of its own (snapshots are never changed)
_EMPTY_DICT: Final[dict[Any, Any]] = {}
_EMPTY_LIST: Final[list[Any]] = []


def copy_value(value: Any) -> Any:
    """A copy of ``value``'s dicts, lists and tuples; strings, numbers and other objects shared.

    Strings are shared, not copied, and compared by identity first, so checking a message with a
    1 MB base64 image costs no more than checking one with a short text.
    """
    t = type(value)
    if t is dict:
        if not value:
            return _EMPTY_DICT
        return {k: v if type(v) in ATOMIC else copy_value(v) for k, v in value.items()}
    if t is list:
        if not value:
            return _EMPTY_LIST
        return [v if type(v) in ATOMIC else copy_value(v) for v in value]
    if t is tuple:
        return tuple([v if type(v) in ATOMIC else copy_value(v) for v in value])
    if t in ATOMIC:
        return value
    if isinstance(value, Mapping):
        return {k: copy_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [copy_value(v) for v in value]
    return value  # other objects: compared with ==, so a change inside them is not seen


#: ``fast_view`` of each class seen: read it with ``map(FAST_VIEWS.__getitem__, types)`` (C speed)
#: once ``fast_view`` has seen every class of the list
FastView = Callable[[Any], tuple[Any, ...]]
FAST_VIEWS: Final[dict[type, FastView | None]] = {}


def fast_view(cls: type) -> FastView | None:
    """For a pydantic (v2) model class keeping its fields in ``__dict__`` (``fields_in_dict``)
    and comparing with pydantic's own ``==`` (LangChain's messages):
    ``attrgetter("__class__", *declared, "__pydantic_extra__")``, where ``declared`` are the
    ``READ_FIELDS`` the class declares; else None.

    One C call reads what a count of an instance depends on: every field ``getattr`` (and so
    ``read_message``) can read is a declared one or lives in the extras. Lists of such
    instances are remembered and compared with ``==`` (the token counter's memo), which for
    pydantic's ``==`` means equal class and fields: a class with its own ``__eq__`` is read
    the slower way.
    """
    try:
        return FAST_VIEWS[cls]
    except KeyError:
        pass
    view: FastView | None = None
    main = sys.modules.get("pydantic.main")
    model = getattr(main, "BaseModel", None)
    try:
        pydantic_eq = model is not None and issubclass(cls, model) and cls.__eq__ is model.__eq__
        if pydantic_eq and fields_in_dict(cls):
            declared = getattr(cls, "model_fields", None)
            if isinstance(declared, Mapping):
                view = attrgetter("__class__", *[f for f in READ_FIELDS if f in declared], PYDANTIC_EXTRA)
    except Exception:  # a metaclass that refuses: read with getattr
        view = None
    FAST_VIEWS[cls] = view
    return view


def _slow_view(message: Any, cls: type) -> tuple[Any, ...]:
    """``(cls, *values)``: the ``READ_FIELDS`` of an object message as ``getattr`` (and so
    ``read_message``) reads them now; shared, not copied.

    Read from the instance ``__dict__`` when the class keeps its fields there (``fields_in_dict``:
    C-speed lookups, no slow pydantic ``__getattr__`` for a missing field) and the message's
    pydantic extras hold none of them; else with ``getattr``.
    """
    if fields_in_dict(cls) and not _extras_hold_fields(getattr(message, PYDANTIC_EXTRA, None)):
        attrs = getattr(message, "__dict__", None)
        if not isinstance(attrs, dict):  # no __dict__: a field not at class level is absent
            attrs = _NO_ATTRS
        return (cls, *map(dict_get, repeat(attrs), READ_FIELDS))
    return (cls, *[getattr(message, f, None) for f in READ_FIELDS])


def watched(message: Any) -> Any:
    """What a snapshot of ``message`` copies and ``unchanged`` compares it with, shared:

    * a ``Mapping`` (dicts): the mapping itself, compared whole;
    * an instance of a ``fast_view`` class (LangChain messages): ``(cls, *declared READ_FIELDS,
      extras)``, read with one C call; a declared field missing (``model_construct``) raises
      AttributeError;
    * any other object: ``(cls, *values)`` of every ``READ_FIELDS`` field as ``getattr`` serves
      it (None when absent), wherever it lives (``_slow_view``).

    The forms never compare equal to each other: a dict is no tuple, and the two tuple forms of
    one class never meet (a class has one of them).
    """
    cls = type(message)
    if cls is dict or issubclass(cls, Mapping):
        return message
    view = fast_view(cls)
    if view is not None:
        return view(message)
    return _slow_view(message, cls)


_READ_SET: Final = frozenset(READ_FIELDS)


def _extras_hold_fields(extras: Any) -> bool:
    """True when a pydantic model's extras (``__pydantic_extra__``) hold a ``READ_FIELDS`` field:
    then ``__dict__`` alone does not say what ``getattr`` reads."""
    if not extras:  # None, or {} (LangChain's messages)
        return False
    try:
        return not _READ_SET.isdisjoint(extras)
    except Exception:
        return True


def snapshot(message: Any) -> Any:
    """What ``TokenCounter`` keeps to decide later that a cached count is still right: a copy of
    ``watched(message)``, deep for dicts, lists and tuples, compared with ``==`` (at C speed,
    identity first) against the live message by ``unchanged``.

    What is watched: a dict message whole; a pydantic model (LangChain messages) by its class,
    the ``READ_FIELDS`` its class declares and its extras (``__pydantic_extra__``, where
    undeclared fields live); any other object by its class and every ``READ_FIELDS`` field
    (``type``, ``role``, ``id``, ``name``, ``content``, ``tool_calls``, ``additional_kwargs``,
    ``tool_call_id``, and the fields of Gemini contents and Responses items) as ``getattr``
    serves it, wherever it lives: the instance ``__dict__``, properties, slots,
    ``__getattribute__``, ``__getattr__``. Nested dicts and lists are copied, so editing a
    content block or a tool call's arguments in place is seen. Not watched: changes inside
    objects other than dicts, lists and tuples (compared with ``==``, which is true for the same
    object). A message that cannot be read or copied gets ``Uncacheable()``, equal to nothing.
    """
    try:
        live = watched(message)
        if type(live) is tuple:
            return tuple([v if type(v) in ATOMIC or v is live[0] else copy_value(v) for v in live])
        return {k: v if type(v) in ATOMIC else copy_value(v) for k, v in live.items()}
    except Exception:  # a reference cycle, a hostile property: never cache, always recount
        return Uncacheable()


def unchanged(snap: Any, message: Any) -> bool:
    """``snapshot(message) == snap``, without copying the message (the warm path)."""
    try:
        return bool(snap == watched(message))
    except Exception:  # an object whose == does not return a bool (numpy arrays)
        return False


def snapshots(messages: Sequence[Any]) -> list[Any]:
    """``[snapshot(m) for m in messages]`` (by columns it gained 1.2-1.25x, short of the 1.3x a
    fast path needs: benchmarks/bench_bulk.py)."""
    return list(map(snapshot, messages))
