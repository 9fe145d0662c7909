"""The one adapter that reads messages of every supported shape.

It never converts or mutates a message: it only *reads* role, id, content, tool-call ids and the
ids a tool result answers, and returns them as a small ``MessageInfo``. Everything else in the
package (planner, token counter, LangGraph merge) goes through here, so a new shape is supported
in one place.

Supported shapes:

* dicts with ``role`` or ``type``: LangChain (``human``/``ai``/``system``/``tool``), OpenAI
  (``user``/``assistant``/``system``/``developer``/``tool``, ``tool_calls=[{"id", "type":
  "function", "function": {...}}]``, ``tool_calls: None``), agent frameworks (``agent``),
  LangChain's serialized ``{"type": "ai", "data": {...}}`` and ``dumpd`` constructor form;
* Anthropic content blocks: ``tool_use`` blocks in assistant content, ``tool_result`` blocks in
  user content (a user message with tool_result blocks answers tool calls: it is a tool result,
  not a human turn);
* LangChain objects, including ``*MessageChunk``, ``ChatMessage(role=...)`` and ``RemoveMessage``;
* any object with ``.type`` or ``.role`` (OpenAI SDK objects).
"""

from __future__ import annotations

import json.encoder
import sys
from collections.abc import Callable, Mapping, Sequence
from itertools import compress, repeat
from json import JSONEncoder
from operator import eq, is_, is_not
from typing import Any, Final, Literal, NamedTuple

Kind = Literal["system", "human", "ai", "tool", "remove", "unknown"]

#: Role names and their canonical kind. ``developer`` is OpenAI's newer name for ``system``.
ROLE_ALIASES: Final[Mapping[str, Kind]] = {
    "human": "human",
    "user": "human",
    "ai": "ai",
    "assistant": "ai",
    "agent": "ai",
    "model": "ai",
    "system": "system",
    "developer": "system",
    "tool": "tool",
    "function": "tool",
    "remove": "remove",
}

# LangChain class names (``BaseMessage.type`` of chunks, ``dumpd`` ids) mapped to a role name.
_CLASS_ROLES: Final[Mapping[str, str]] = {
    "HumanMessage": "human",
    "HumanMessageChunk": "human",
    "AIMessage": "ai",
    "AIMessageChunk": "ai",
    "SystemMessage": "system",
    "SystemMessageChunk": "system",
    "ToolMessage": "tool",
    "ToolMessageChunk": "tool",
    "FunctionMessage": "function",
    "FunctionMessageChunk": "function",
    "RemoveMessage": "remove",
}

_MISSING: Final = object()


class MessageInfo(NamedTuple):
    """What the reducer needs to know about one message, read without converting it.

    ``call_ids`` are the tool calls an AI message makes; ``result_ids`` the calls a tool result
    answers. ``role`` is the raw role string (``None`` when the message has none).
    """

    kind: Kind
    role: str | None
    id: str | None
    content: Any
    call_ids: tuple[str, ...] = ()
    result_ids: tuple[str, ...] = ()
    name: str | None = None


def _seq(value: Any) -> bool:
    """A list of blocks or calls (not a string). Exact types first: this runs per message."""
    t = type(value)
    if t is list or t is tuple:
        return True
    if t is str or t is dict or value is None:
        return False
    return isinstance(value, Sequence) and not isinstance(value, str | bytes)


def _get(msg: Any, key: str, default: Any = None) -> Any:
    if type(msg) is dict or isinstance(msg, Mapping):
        return msg.get(key, default)
    return getattr(msg, key, default)


def _unwrap(msg: Any) -> tuple[Any, str | None]:
    """Return ``(body, raw_role)``: the object holding the fields, and its role name.

    Handles LangChain's serialized forms, where the fields live under ``data`` or ``kwargs``.
    """
    if type(msg) is dict or isinstance(msg, Mapping):
        role = msg.get("role")
        mtype = msg.get("type")
        if mtype == "constructor" and isinstance(msg.get("kwargs"), Mapping):
            # langchain_core.load.dumpd: {"lc": 1, "type": "constructor", "id": [..., "AIMessage"], ...}
            ids = msg.get("id")
            cls = ids[-1] if isinstance(ids, Sequence) and ids and isinstance(ids[-1], str) else ""
            body = msg["kwargs"]
            return body, _class_role(cls, body)
        if role is None and isinstance(mtype, str) and isinstance(msg.get("data"), Mapping):
            # messages_to_dict form: {"type": "ai", "data": {"content": ..., "tool_calls": ...}}
            data = msg["data"]
            return data, _class_role(mtype, data)
        if isinstance(role, str):
            return msg, role
        return msg, _class_role(mtype, msg) if isinstance(mtype, str) else None
    mtype = getattr(msg, "type", None)
    if isinstance(mtype, str):
        return msg, _class_role(mtype, msg)
    role = getattr(msg, "role", None)
    return msg, role if isinstance(role, str) else None


def _class_role(name: str, body: Any) -> str | None:
    """Map a LangChain ``type`` or class name to a role; ``chat`` messages carry their own role."""
    if name in ("chat", "ChatMessage", "ChatMessageChunk"):
        role = _get(body, "role")
        return role if isinstance(role, str) else None
    return _CLASS_ROLES.get(name, name)


def _str_id(value: Any) -> str | None:
    if type(value) is str or isinstance(value, str):
        return value or None
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return None


def _tool_call_ids(get: Callable[..., Any], content: Any) -> tuple[str, ...]:
    """Ids of the tool calls an AI message makes: ``tool_calls`` (LangChain or OpenAI shape),
    ``additional_kwargs.tool_calls`` (older LangChain dumps) and Anthropic ``tool_use`` blocks."""
    ids: list[str] = []
    sources = [get("tool_calls")]
    extra = get("additional_kwargs")
    if extra and isinstance(extra, Mapping):
        sources.append(extra.get("tool_calls"))
    for calls in sources:
        if _seq(calls):
            for call in calls:
                call_id = _str_id(_get(call, "id"))
                if call_id is not None and call_id not in ids:
                    ids.append(call_id)
    if _seq(content):
        for block in content:
            if _get(block, "type") == "tool_use":
                call_id = _str_id(_get(block, "id"))
                if call_id is not None and call_id not in ids:
                    ids.append(call_id)
    return tuple(ids)


def _tool_result_ids(content: Any) -> tuple[str, ...]:
    """Ids answered by Anthropic ``tool_result`` blocks in a user message."""
    if not _seq(content):
        return ()
    ids: list[str] = []
    for block in content:
        if _get(block, "type") == "tool_result":
            use_id = _str_id(_get(block, "tool_use_id"))
            if use_id is not None:
                ids.append(use_id)
    return tuple(ids)


def read_message(msg: Any) -> MessageInfo:
    """Read one message of any supported shape. Never raises, never mutates ``msg``.

    A message with no recognisable role, or a role this package does not know, is ``unknown``:
    the reducer keeps such messages and never prunes them.
    """
    try:
        body, raw_role = _unwrap(msg)
        if type(body) is dict or isinstance(body, Mapping):
            get = body.get
        else:

            def get(key: str, default: Any = None) -> Any:
                return getattr(body, key, default)

        kind: Kind = ROLE_ALIASES.get(raw_role.lower(), "unknown") if raw_role else "unknown"
        content = get("content")
        msg_id = _str_id(get("id"))
        name = get("name")
        name = name if type(name) is str else None
        if kind == "ai":
            return MessageInfo(kind, raw_role, msg_id, content, _tool_call_ids(get, content), (), name)
        if kind == "tool":
            answered = _str_id(get("tool_call_id"))
            result_ids = (answered,) if answered is not None else _tool_result_ids(content)
            return MessageInfo(kind, raw_role, msg_id, content, (), result_ids, name)
        if kind == "human" and type(content) is not str:
            result_ids = _tool_result_ids(content)
            if result_ids:
                # Anthropic: tool results travel in a user message; it answers calls, it is no new turn.
                return MessageInfo("tool", raw_role, msg_id, content, (), result_ids, name)
        return MessageInfo(kind, raw_role, msg_id, content, (), (), name)
    except Exception:  # a hostile __getattr__ or property must not break a reduction
        return MessageInfo("unknown", None, None, None)


def tool_call_payloads(msg: Any) -> list[tuple[str, str, str]]:
    """``(id, name, arguments)`` of every tool call a message makes, for token counting.

    Never raises: a field that cannot be read (a property or ``__getattr__`` that raises, a
    ``__str__`` that raises) counts as absent, a call list whose iteration fails gives the calls
    read before, and the other fields and calls are read as usual.
    """
    out: list[tuple[str, str, str]] = []
    try:
        body, _ = _unwrap(msg)
        calls = _get(body, "tool_calls")
        if _seq(calls):
            for call in calls:
                out.append(_call_payload(call))
    except Exception:  # a hostile message or call list: what was read so far
        pass
    return out


def _call_payload(call: Any) -> tuple[str, str, str]:
    fn = _read(call, "function")  # OpenAI shape keeps name and arguments under "function"
    src = fn if fn is not None else call
    args = _read(src, "arguments", _MISSING)
    if args is _MISSING:
        args = _read(src, "args", "")
    return _str_or_empty(_read(call, "id")), _str_or_empty(_read(src, "name")), _as_text(args)


def _read(obj: Any, key: str, default: Any = None) -> Any:
    """``_get``, with ``default`` for a field whose reading raises."""
    try:
        return _get(obj, key, default)
    except Exception:
        return default


def _str_or_empty(value: Any) -> str:
    """``str(value or "")``, or "" when the value cannot say whether it is true or what its text is."""
    try:
        return str(value or "")
    except Exception:
        return ""


# What json.dumps(value, ensure_ascii=False, sort_keys=True, default=str) builds on every call: one
# shared encoder gives the same text without constructing one per tool call (encode is stateless).
_JSON: Final = JSONEncoder(ensure_ascii=False, sort_keys=True, default=str)


def _fast_json() -> Callable[[Any, int], Any] | None:
    """json's C encoder with ``_JSON``'s settings, made once: ``encode`` sets one up per call.

    Made without the circular-reference bookkeeping (the only state it would keep, so it is
    safe to share between threads); a cycle then ends in RecursionError and ``_as_text`` takes
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


def _as_text(value: Any) -> str:
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


def is_message_like(value: Any) -> bool:
    """True for one message (as opposed to a list of messages): a mapping or an object with a role."""
    if isinstance(value, Mapping):
        return True
    if isinstance(value, str | bytes) or isinstance(value, Sequence):
        return False
    return hasattr(value, "type") or hasattr(value, "role") or hasattr(value, "content")


# --- the fast path for the planner's one full pass -----------------------------------------------

PINNED_KINDS: Final = frozenset({"system", "unknown", "remove"})
_CONVERSATION: Final = frozenset({"human", "ai", "tool"})
# class -> its kind when the class alone decides it (LangChain message classes), else None
_class_kinds: dict[type, Kind | None] = {}


def _kind_of_class(cls: type) -> Kind | None:
    fields = getattr(cls, "model_fields", None)
    field = fields.get("type") if isinstance(fields, Mapping) else None
    default = getattr(field, "default", None)
    if not isinstance(default, str) or default in ("chat", "ChatMessageChunk"):
        return None  # decided per message: dicts, ChatMessage(role=...), duck-typed objects
    role = _CLASS_ROLES.get(default, default)
    return ROLE_ALIASES.get(role.lower(), "unknown")


def _is_pinned_kind(msg: Any) -> bool:
    if isinstance(msg, dict):  # the common dict shapes, without a full read
        role = msg.get("role")
        if isinstance(role, str):
            return ROLE_ALIASES.get(role.lower(), "unknown") in PINNED_KINDS
        mtype = msg.get("type")
        if isinstance(mtype, str) and mtype not in ("chat", "constructor") and "data" not in msg:
            return ROLE_ALIASES.get(_CLASS_ROLES.get(mtype, mtype).lower(), "unknown") in PINNED_KINDS
    return read_message(msg).kind in PINNED_KINDS


def pinned_indices(messages: Sequence[Any]) -> list[int]:
    """Indices of system, unknown-role and remove messages, in no particular order.

    This is the one pass the planner makes over a whole history, so it is done per class where
    the class decides the kind (``list.index`` scans at C speed) and per message only otherwise.
    """
    types = list(map(type, messages))
    out: list[int] = []
    for cls in set(types):
        if cls not in _class_kinds:
            _class_kinds[cls] = _kind_of_class(cls)
        kind = _class_kinds[cls]
        if kind in _CONVERSATION:
            continue
        positions: list[int] = []
        i = -1
        try:
            while True:
                i = types.index(cls, i + 1)
                positions.append(i)
        except ValueError:
            pass
        if kind is None:
            positions = [i for i in positions if _is_pinned_kind(messages[i])]
        out += positions
    return out


# --- the bulk reader for token counting ----------------------------------------------------------

#: Every field ``read_message`` may read from an object message.
READ_FIELDS: Final = (
    "type", "role", "id", "name", "content", "tool_calls", "additional_kwargs", "tool_call_id"
)
#: Where a pydantic model keeps the values of fields it does not declare (``extra="allow"``).
PYDANTIC_EXTRA: Final = "__pydantic_extra__"
_CHAT_TYPES: Final = frozenset({"chat", "ChatMessage", "ChatMessageChunk"})
_NO_CALLS: Final = frozenset({list, tuple, type(None)})
_STR_OR_NONE: Final = frozenset({str, type(None)})
_dict_field_classes: dict[type, bool] = {}
#: ``tool_call_payloads`` of the messages read with their tool calls, by index
Calls = dict[int, list[tuple[str, str, str]]]


def _pydantic_getattr() -> Any:
    """pydantic's ``BaseModel.__getattr__`` when pydantic is imported (no instance of a pydantic
    model exists before that), else None."""
    main = sys.modules.get("pydantic.main")
    model = getattr(main, "BaseModel", None)
    return getattr(model, "__getattr__", None) if model is not None else None


def fields_in_dict(cls: type) -> bool:
    """True when ``cls``'s instances keep every ``READ_FIELDS`` field they have in their instance
    ``__dict__``, so that reading that dict gives what ``getattr`` (and so ``read_message``) gives.

    The one test of "fields live in ``__dict__``" for every bulk path (``read_plain``, the token
    counter's snapshots and cache checks). It holds when the class is no ``Mapping``, serves
    attributes with ``object.__getattribute__``, serves none of the fields at class level (no
    property, slot, descriptor or class attribute) and has no ``__getattr__``, except pydantic's:
    that one serves only private attributes and the model's extras, the dict ``PYDANTIC_EXTRA``,
    so a field missing from ``__dict__`` is there or absent (LangChain's messages are such models;
    a message whose extras hold a field is read with ``getattr``, as is any other class).
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


def _kind_of_role(raw_role: Any) -> Kind | None:
    """``read_message``'s kind for a raw role (None: the message must be read on its own)."""
    if raw_role is _MISSING:
        return None
    return ROLE_ALIASES.get(raw_role.lower(), "unknown") if raw_role else "unknown"


def _dict_role(role: Any, mtype: Any) -> Any:
    """``_unwrap``'s raw role of a dict with these ``role`` and ``type`` values, or ``_MISSING``
    when it depends on more (the ``dumpd`` constructor form, ``chat`` types). A dict with
    ``role=None`` and a str ``type`` is the ``data`` form when its ``data`` is a mapping: the
    caller checks that."""
    if mtype == "constructor":
        return _MISSING
    if isinstance(role, str):
        return role
    if isinstance(mtype, str):
        # a chat type takes the role from the dict itself, which is not a str here
        return None if mtype in _CHAT_TYPES else _CLASS_ROLES.get(mtype, mtype)
    return None


def _object_role(mtype: Any) -> Any:
    if type(mtype) is not str or mtype in _CHAT_TYPES:
        return _MISSING  # no str type (read by .role) or a chat message: read on its own
    return _CLASS_ROLES.get(mtype, mtype)


def _plain_group(msgs: list[Any], is_dict: bool, with_calls: bool) -> tuple[list[MessageInfo | None], Calls]:
    """``read_plain`` of a list of exact dicts (``is_dict``) or of instances of columnar classes.

    Every step is a ``map`` over a column, or a loop over the few messages it concerns (tool
    results, messages that are not plain): each pass over the whole list costs per message.
    """
    n = len(msgs)
    missing: Any = None if is_dict else _MISSING  # a dict's missing key reads None, like dict.get
    raw_of: dict[Any, Any]
    also: tuple[Any, ...] = ()  # raw roles set besides raw_of's
    if is_dict:
        attrs: list[dict[str, Any]] = msgs
        roles = list(map(dict.get, attrs, repeat("role")))
        mtypes = list(map(dict.get, attrs, repeat("type")))
        if mtypes.count(None) == n:  # OpenAI dicts: the role alone decides
            raw_of = {r: _dict_role(r, None) for r in set(roles)}
            raw = roles if all(k is v for k, v in raw_of.items()) else list(map(raw_of.__getitem__, roles))
        else:
            raw_of = {pair: _dict_role(*pair) for pair in set(zip(roles, mtypes, strict=True))}
            raw = list(map(raw_of.__getitem__, zip(roles, mtypes, strict=True)))
            if any(r is None and isinstance(t, str) for r, t in raw_of):
                # {"type": "ai", "data": {...}}: the fields live under "data"; read those on their own
                datas = list(map(dict.get, attrs, repeat("data")))
                for i in compress(range(n), map(is_not, datas, repeat(None))):
                    if roles[i] is None and isinstance(mtypes[i], str):
                        raw[i] = _MISSING
                        also = (_MISSING,)
    else:
        attrs = list(map(vars, msgs))  # a __dict__ that is no dict fails dict.get below: not plain
        mtypes = list(map(dict.get, attrs, repeat("type"), repeat(_MISSING)))
        raw_of = {t: _object_role(t) for t in set(mtypes)}
        raw = mtypes if all(k is v for k, v in raw_of.items()) else list(map(raw_of.__getitem__, mtypes))
    kind_of = {r: _kind_of_role(r) for r in {*raw_of.values(), *also}}
    kinds = list(map(kind_of.__getitem__, raw))
    contents = list(map(dict.get, attrs, repeat("content"), repeat(missing)))
    ids = list(map(dict.get, attrs, repeat("id"), repeat(missing)))
    names = list(map(dict.get, attrs, repeat("name"), repeat(missing)))
    not_plain: list[int] = []
    called: list[int] = []  # AI messages whose tool calls are read (with_calls)
    if set(map(type, contents)) != {str}:  # only an exact str is plain text (MISSING is no str)
        not_plain += compress(range(n), map(is_not, map(type, contents), repeat(str)))
    if None in kind_of.values():  # a role read on its own (MISSING)
        not_plain += compress(range(n), map(is_, kinds, repeat(None)))
    if not set(map(type, ids)) <= _STR_OR_NONE or "" in ids:
        ids = [v if v is _MISSING else _str_id(v) for v in ids]
        not_plain += compress(range(n), map(is_, ids, repeat(_MISSING)))
    if not set(map(type, names)) <= _STR_OR_NONE:
        names = [v if v is _MISSING or type(v) is str else None for v in names]
        not_plain += compress(range(n), map(is_, names, repeat(_MISSING)))
    if "ai" in kind_of.values():
        ai = list(compress(range(n), map(eq, kinds, repeat("ai"))))
        rows = list(map(attrs.__getitem__, ai))
        calls = list(map(dict.get, rows, repeat("tool_calls"), repeat(missing)))
        if not set(map(type, calls)) <= _NO_CALLS:  # other types may hold calls in odd ways
            not_plain += [i for i, c in zip(ai, calls, strict=True) if type(c) not in _NO_CALLS]
        if with_calls:  # calls in a list or tuple are read below, one message at a time
            called = list(compress(ai, calls))
        else:
            not_plain += compress(ai, calls)  # a message with tool calls (MISSING is true) is not plain
        extras = list(map(dict.get, rows, repeat("additional_kwargs"), repeat(missing)))
        for i, extra in zip(compress(ai, extras), compress(extras, extras), strict=True):
            # older LangChain dumps keep call ids in additional_kwargs["tool_calls"]
            if type(extra) is not dict or extra.get("tool_calls") is not None:
                not_plain.append(i)
    results: list[tuple[Any, ...]] = [()] * n
    if "tool" in kind_of.values():
        tool = list(compress(range(n), map(eq, kinds, repeat("tool"))))
        rows = list(map(attrs.__getitem__, tool))
        answered = list(map(dict.get, rows, repeat("tool_call_id"), repeat(missing)))
        if set(map(type, answered)) == {str} and "" not in answered:
            for i, one in zip(tool, zip(answered), strict=True):  # zip of one column: 1-tuples
                results[i] = one
        else:
            for i, value in zip(tool, answered, strict=True):
                if value is _MISSING:
                    not_plain.append(i)
                    continue
                # text content holds no tool_result blocks: an unusable tool_call_id answers nothing
                answer = _str_id(value)
                results[i] = (answer,) if answer is not None else ()
    # MessageInfo._make is Python code; tuple.__new__ over zipped columns builds them at C speed
    infos: list[MessageInfo | None] = list(
        map(tuple.__new__, repeat(MessageInfo), zip(kinds, raw, ids, contents, repeat(()), results, names))
    )
    for i in not_plain:
        infos[i] = None
    payloads: Calls = {}
    for i in called:
        info = infos[i]
        if info is None:
            continue
        try:
            read = _dict_calls(attrs[i]["tool_calls"])
            if read is None:  # calls that are not plain dicts: the adapter's general readers
                read = _tool_call_ids(attrs[i].get, info.content), tool_call_payloads(msgs[i])
        except Exception:  # a hostile call object: read this message on its own
            infos[i] = None
            continue
        call_ids, payloads[i] = read
        infos[i] = tuple.__new__(MessageInfo, ("ai", raw[i], ids[i], contents[i], call_ids, (), names[i]))
    return infos, payloads


def _dict_calls(calls: Sequence[Any]) -> tuple[tuple[str, ...], list[tuple[str, str, str]]] | None:
    """``(call_ids, tool_call_payloads)`` of an AI message with text content whose tool calls are
    all plain dicts (LangChain ``{"name", "args", "id"}``, OpenAI ``{"id", "function": {...}}``),
    read as ``_tool_call_ids`` and ``tool_call_payloads`` read them; None for any other calls."""
    ids: list[str] = []
    payloads: list[tuple[str, str, str]] = []
    for call in calls:
        if type(call) is not dict:
            return None
        fn = call.get("function")  # OpenAI shape keeps name and arguments under "function"
        src = call if fn is None else fn
        if type(src) is not dict:
            return None
        call_id = call.get("id")
        answerable = _str_id(call_id)
        if answerable is not None and answerable not in ids:
            ids.append(answerable)
        args = src["arguments"] if "arguments" in src else src.get("args", "")
        payloads.append((str(call_id or ""), str(src.get("name") or ""), _as_text(args)))
    return tuple(ids), payloads


def read_plain(
    messages: Sequence[Any], *, with_calls: bool = False
) -> tuple[list[MessageInfo | None], Calls]:
    """``(infos, calls)``: ``read_message`` of each *plain* message, None for every other one.

    Plain: text content (a ``str``), no tool calls, and a shape read by columns: exact dicts
    (OpenAI and LangChain dict shapes) and objects keeping their fields in the instance
    ``__dict__`` (``fields_in_dict``: LangChain message classes, chunks included; a field not in
    that dict makes the message not plain). A plain message's tokens depend
    only on its reading (kind, content, name, the call id a tool result answers), so a token
    counter can count it without touching the message again.

    With ``with_calls``, AI messages of those shapes with text content and tool calls in a list
    are read too, and ``calls`` maps their index to ``tool_call_payloads(message)``.

    This is the token counter's pass over a whole history, so it reads field by field with
    ``map`` over the list (C speed) instead of message by message. Each reading equals
    ``read_message(message)``; messages with content blocks, ``ChatMessage``, the serialized
    forms and duck-typed objects get None: read those with ``read_message``.
    """
    n = len(messages)
    types = list(map(type, messages))
    classes = set(types)
    columnar = {cls: cls is not dict and fields_in_dict(cls) for cls in classes}
    if classes == {dict} or all(columnar.values()):
        try:
            msgs = messages if type(messages) is list else list(messages)
            return _plain_group(msgs, dict in classes, with_calls)
        except Exception:  # an unhashable role, an == that raises: read these one by one
            return [None] * n, {}
    out: list[MessageInfo | None] = [None] * n
    calls: Calls = {}
    for is_dict, where in (
        (True, list(compress(range(n), map(is_, types, repeat(dict))))),
        (False, list(compress(range(n), map(columnar.__getitem__, types)))),
    ):
        if not where:
            continue
        try:
            read, payloads = _plain_group(list(map(messages.__getitem__, where)), is_dict, with_calls)
        except Exception:
            continue
        for i, info in zip(where, read, strict=True):
            out[i] = info
        for j, payload in payloads.items():
            calls[where[j]] = payload
    return out, calls
