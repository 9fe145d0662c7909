"""JSON text of values read from messages (tool-call arguments, content blocks), never raising."""

from __future__ import annotations

import json.encoder
from collections.abc import Callable
from json import JSONEncoder
from typing import Any, Final

# What json.dumps(value, ensure_ascii=False, sort_keys=True, default=str) builds on every call: one
# shared encoder gives the same text without constructing one per tool call (encode is stateless).
_JSON: Final = JSONEncoder(ensure_ascii=False, sort_keys=True, default=str)


def _fast_json() -> Callable[[Any, int], Any] | None:
    """json's C encoder with ``_JSON``'s settings, made once: ``encode`` sets one up per call.

    Made without the circular-reference bookkeeping (the only state it would keep, so it is
    safe to share between threads); a cycle then ends in RecursionError and ``json_text`` takes
    ``_JSON``'s way. Used only if it writes what ``_JSON`` writes (``c_make_encoder`` is json's
    internal API), else None.
    """
    try:
        c_make_encoder = getattr(json.encoder, "c_make_encoder", None)
        if c_make_encoder is None:  # no C accelerator
            return None
        encode_basestring = json.encoder.encode_basestring
        fast = c_make_encoder(None, str, encode_basestring, None, ": ", ", ", True, False, True)
        sample = {"b": [1, 2.5, None, True, "é\n\""], "a": {"z": float("nan"), "y": object}}
        return fast if "".join(fast(sample, 0)) == _JSON.encode(sample) else None
    except Exception:
        return None


_FAST_JSON: Final = _fast_json()


def arguments_text(value: Any) -> str:
    """Tool-call arguments as text: a string as it is, None as "", anything else ``json_text``."""
    if type(value) is str:
        return value
    if value is None:
        return ""
    try:
        if isinstance(value, str):
            return value
    except Exception:  # a __class__ that raises
        pass
    return json_text(value)


def json_text(value: Any) -> str:
    """``json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)``, or ``str(value)``
    when json refuses the value (keys it cannot sort or write, a reference cycle). Never raises.

    Where both fail (nesting deeper than the recursion limit, an object whose ``str`` raises),
    ``_walk_json`` writes the JSON form without recursion, at most ``JSON_WALK_LIMIT``
    characters. Normal values take json's C encoder only: the fallbacks cost nothing until used.
    """
    if _FAST_JSON is not None:
        try:
            return "".join(_FAST_JSON(value, 0))
        except Exception:  # a cycle, unsortable keys, deep nesting: json.dumps's own way, below
            pass
    try:
        return _JSON.encode(value)
    except Exception:
        pass
    try:
        return str(value)
    except Exception:  # deep nesting (RecursionError), a str() that raises
        return _walk_json(value)


#: Characters ``json_text`` writes at most when json's encoders and ``str`` fail on a value.
JSON_WALK_LIMIT: Final = 1 << 18
_encode_str: Final[Callable[[str], str]] = json.encoder.encode_basestring
_INF: Final = float("inf")


class _Raw(str):
    """Text the walk writes as it is (punctuation, keys), as opposed to a value to encode."""

    __slots__ = ()


_OPEN: Final = _Raw("{")
_CLOSE: Final = _Raw("}")
_OPEN_LIST: Final = _Raw("[")
_CLOSE_LIST: Final = _Raw("]")
_COMMA: Final = _Raw(", ")


def _walk_json(value: Any) -> str:
    """``json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)`` written with an
    explicit stack instead of recursion, so any depth is written; stops after about
    ``JSON_WALK_LIMIT`` characters (a reference cycle, a huge value). Never raises: keys that
    cannot be sorted stay in their order, a key json refuses is written as its text, and a value
    or key whose ``str`` raises as its type name."""
    out: list[str] = []
    size = 0
    stack: list[Any] = [value]
    while stack and size < JSON_WALK_LIMIT:
        item = stack.pop()
        piece: str
        if type(item) is _Raw:
            piece = item
        else:
            try:
                piece = _json_scalar(item)
                if not piece:  # a container: its parts go on the stack, last first
                    piece = _open_container(item, stack)
            except Exception:
                piece = _encode_str(_type_name(item))
        out.append(piece)
        size += len(piece)
    return "".join(out)[:JSON_WALK_LIMIT]


def _json_scalar(value: Any) -> str:
    """json's text of a value that is no dict, list or tuple; "" for one that is."""
    if isinstance(value, str):
        return _encode_str(value)
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return int.__repr__(value)
    if isinstance(value, float):
        if value != value:
            return "NaN"
        if value == _INF or value == -_INF:
            return "Infinity" if value > 0 else "-Infinity"
        return float.__repr__(value)
    if isinstance(value, dict | list | tuple):
        return ""
    return _encode_str(str(value))  # default=str


def _json_key(key: Any) -> str:
    """json's text of a dict key and the separator after it."""
    try:
        if isinstance(key, str):
            text = key
        elif isinstance(key, float) or key is None or key is True or key is False or isinstance(key, int):
            text = _json_scalar(key)
        else:
            text = str(key)  # json refuses such a key; its text is what a reader would see
    except Exception:
        text = _type_name(key)
    return _encode_str(text) + ": "


def _open_container(item: Any, stack: list[Any]) -> str:
    """Push the parts of a dict, list or tuple onto ``stack`` (last first); return its opening."""
    parts: list[Any] = []
    if isinstance(item, dict):
        items = list(item.items())
        try:
            items.sort(key=_first)
        except Exception:  # keys that cannot be compared: in their order
            pass
        for i, (key, val) in enumerate(items):
            if i:
                parts.append(_COMMA)
            parts.append(_Raw(_json_key(key)))
            parts.append(val)
        close, opening = _CLOSE, _OPEN
    else:
        for i, val in enumerate(item):
            if i:
                parts.append(_COMMA)
            parts.append(val)
        close, opening = _CLOSE_LIST, _OPEN_LIST
    stack.append(close)
    stack.extend(reversed(parts))
    return opening


def _first(pair: tuple[Any, Any]) -> Any:
    return pair[0]


def _type_name(value: Any) -> str:
    try:
        return f"<{type(value).__name__}>"
    except Exception:
        return "<object>"

