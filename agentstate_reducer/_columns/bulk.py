"""Readers by columns: one ``map`` over the whole list per field instead of Python code per message.

Each function here has a reference that reads one message at a time, and returns what that
reference returns (tests/test_messages_bulk.py checks it with hypothesis); each is kept only for a
measured gain over its reference (benchmarks/bench_bulk.py):

* ``read_plain``: ``read_message`` (and ``tool_call_payloads``) of the plain messages;
* ``fast_views``: with ``apply_view``, ``watched`` of each message (what ``unchanged`` compares
  its snapshot with);
* ``pinned_indices``: the indices whose ``read_message(m).kind`` is in ``PINNED_KINDS``;
* ``compaction_indices``: the indices whose ``read_message(m).compaction`` is true.

``snapshots`` is ``[snapshot(m) for m in messages]``: by columns it gained too little to stay.

They apply to exact dicts and to objects whose fields live in the instance ``__dict__``
(``fields_in_dict``); a list of other shapes goes one message at a time.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from itertools import chain, compress, repeat
from operator import attrgetter, eq, is_, is_not, not_, or_
from typing import Any, Final, NamedTuple, cast

from agentstate_reducer.messages.autogen import AUTOGEN_TYPES
from agentstate_reducer.messages.fields import (
    FAST_VIEWS,
    FastView,
    fast_view,
    fields_in_dict,
)
from agentstate_reducer.messages.jsontext import arguments_text
from agentstate_reducer.messages.read import (
    CLASS_ROLES,
    COMPACTION_TYPES,
    MISSING,
    PINNED_KINDS,
    RESPONSES_CALLS,
    RESPONSES_OUTPUTS,
    RESPONSES_SELF_CONTAINED,
    ROLE_ALIASES,
    Kind,
    MessageInfo,
    call_id,
    infos_from_columns,
    read_message,
    str_id,
    tool_call_ids,
    tool_call_payloads,
)

_CHAT_TYPES: Final = frozenset({"chat", "ChatMessage", "ChatMessageChunk"})
#: ``type`` values of Responses items (and Anthropic ``Message`` objects) and of AutoGen's
#: messages: read on their own
_ITEM_TYPES: Final = frozenset(
    {
        *AUTOGEN_TYPES,
        "message",
        "reasoning",
        *COMPACTION_TYPES,
        "mcp_approval_request",
        "mcp_approval_response",
        *RESPONSES_CALLS,
        *RESPONSES_OUTPUTS,
        *RESPONSES_SELF_CONTAINED,
    }
)
_NO_CALLS: Final = frozenset({list, tuple, type(None)})
_TYPE: Final = attrgetter("type")
_CONTENT: Final = attrgetter("content")
_CONVERSATION: Final = frozenset({"human", "ai", "tool"})
_STR_OR_NONE: Final = frozenset({str, type(None)})
#: a content of these types is a list of blocks (``read._seq`` of the common ones)
_CONTENT_LISTS: Final = frozenset({list, tuple})
#: a dict whose ``type`` holds a compaction or keeps its content in another field (``_unwrap``)
_ELSEWHERE: Final = frozenset({*COMPACTION_TYPES, "constructor"})
_TEXT_OR_LIST: Final = _STR_OR_NONE | _CONTENT_LISTS
#: ``tool_call_payloads`` of the messages read with their tool calls, by index
Calls = dict[int, list[tuple[str, str, str]]]


def _kind_of_role(raw_role: Any) -> Kind | None:
    """``read_message``'s kind for a raw role (None: the message must be read on its own)."""
    if raw_role is MISSING:
        return None
    return ROLE_ALIASES.get(raw_role.lower(), "unknown") if raw_role else "unknown"


def _dict_role(role: Any, mtype: Any) -> Any:
    """``_unwrap``'s raw role of a dict with these ``role`` and ``type`` values, or ``MISSING``
    when it depends on more (the ``dumpd`` constructor form, ``chat`` types). A dict with
    ``role=None`` and a str ``type`` is the ``data`` form when its ``data`` is a mapping: the
    caller checks that."""
    if mtype == "constructor" or mtype in _ITEM_TYPES:
        return MISSING
    if isinstance(role, str):
        return role
    if isinstance(mtype, str):
        # a chat type takes the role from the dict itself, which is not a str here
        return None if mtype in _CHAT_TYPES else CLASS_ROLES.get(mtype, mtype)
    return None


def _object_role(mtype: Any) -> Any:
    if type(mtype) is not str or mtype in _CHAT_TYPES or mtype in _ITEM_TYPES:
        return MISSING  # no str type (read by .role), a chat message or a Responses item: read on its own
    return CLASS_ROLES.get(mtype, mtype)


def _plain_group(msgs: list[Any], is_dict: bool, with_calls: bool) -> tuple[list[MessageInfo | None], Calls]:
    """``read_plain`` of a list of exact dicts (``is_dict``) or of instances of columnar classes.

    Every step is a ``map`` over a column, or a loop over the few messages it concerns (tool
    results, messages that are not plain): each pass over the whole list costs per message.
    """
    n = len(msgs)
    missing: Any = None if is_dict else MISSING  # a dict's missing key reads None, like dict.get
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
                        raw[i] = MISSING
                        also = (MISSING,)
    else:
        attrs = list(map(vars, msgs))  # a __dict__ that is no dict fails dict.get below: not plain
        mtypes = list(map(dict.get, attrs, repeat("type"), repeat(MISSING)))
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
        ids = [v if v is MISSING else str_id(v) for v in ids]
        not_plain += compress(range(n), map(is_, ids, repeat(MISSING)))
    if not set(map(type, names)) <= _STR_OR_NONE:
        names = [v if v is MISSING or type(v) is str else None for v in names]
        not_plain += compress(range(n), map(is_, names, repeat(MISSING)))
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
        if set(map(type, answered)) == {str}:
            for i, one in zip(tool, zip(answered), strict=True):  # zip of one column: 1-tuples
                results[i] = one
        else:
            for i, value in zip(tool, answered, strict=True):
                if value is MISSING:
                    not_plain.append(i)
                    continue
                # text content holds no tool_result blocks: an unusable tool_call_id answers nothing
                answer = call_id(value)
                results[i] = (answer,) if answer is not None else ()
    no_calls: Iterable[tuple[str, ...]] = repeat(())
    infos: list[MessageInfo | None] = list(
        infos_from_columns(
            kind=kinds, role=raw, id=ids, content=contents, call_ids=no_calls, result_ids=results, name=names
        )
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
                read = tool_call_ids(attrs[i].get, info.content), tool_call_payloads(msgs[i])
        except Exception:  # a hostile call object: read this message on its own
            infos[i] = None
            continue
        call_ids, payloads[i] = read
        infos[i] = MessageInfo("ai", raw[i], ids[i], contents[i], call_ids, (), names[i])
    return infos, payloads


def _dict_calls(calls: Sequence[Any]) -> tuple[tuple[str, ...], list[tuple[str, str, str]]] | None:
    """``(call_ids, tool_call_payloads)`` of an AI message with text content whose tool calls are
    all plain dicts (LangChain ``{"name", "args", "id"}``, OpenAI ``{"id", "function": {...}}``),
    read as ``tool_call_ids`` and ``tool_call_payloads`` read them; None for any other calls."""
    ids: list[str] = []
    payloads: list[tuple[str, str, str]] = []
    for call in calls:
        if type(call) is not dict:
            return None
        fn = call.get("function")  # OpenAI shape keeps name and arguments under "function"
        src = call if fn is None else fn
        if type(src) is not dict:
            return None
        raw_id = call.get("id")
        answerable = call_id(raw_id)
        if answerable is not None and answerable not in ids:
            ids.append(answerable)
        args = src["arguments"] if "arguments" in src else src.get("args", "")
        payloads.append((str(raw_id or ""), str(src.get("name") or ""), arguments_text(args)))
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


def fast_views(messages: Sequence[Any]) -> list[FastView] | None:
    """The ``fast_view`` of each message, or None unless every message is an instance of a
    ``fast_view`` class (dicts: compared whole). ``map(apply_view, views, messages)`` is then
    ``watched`` of each message, what ``unchanged`` compares its snapshot with: one C call each."""
    types = list(map(type, messages))
    if None in list(map(fast_view, set(types))):
        return None
    return cast("list[FastView]", list(map(FAST_VIEWS.__getitem__, types)))


# --- the planner's one full pass ---


class ObjectColumns(NamedTuple):
    """Each message's ``type`` and ``content`` attribute, read once for a whole list of objects
    (``object_columns``) and shared by the planner's passes over it: the pinned kinds, the
    compactions and the table. Each attribute read over a long list costs about as much as a
    pass reading every field of each message, so no pass reads them again."""

    types: list[Any]
    contents: list[Any]


def object_columns(messages: Sequence[Any]) -> ObjectColumns | None:
    """The ``ObjectColumns`` of a list of objects whose classes keep their fields in the instance
    ``__dict__`` and declare no ``parts`` (LangChain's messages: ``read_message`` reads their
    ``type`` and ``content`` attributes), or None for any other list (a mapping, a Pydantic AI
    message, an attribute that cannot be read)."""
    classes = set(map(type, messages))
    if not classes or not all(map(_columnar, classes)):
        return None
    try:
        return ObjectColumns(list(map(_TYPE, messages)), list(map(_CONTENT, messages)))
    except Exception:  # a message without one of them, a property that raises
        return None


def kind_of_type(value: Any) -> Kind | None:
    """``read_message``'s kind of an object message whose ``type`` is ``value``, when the value
    alone decides it (LangChain's message types); None when the message must be read whole (no
    str type, a chat message or a Responses item)."""
    if type(value) is not str or (value not in CLASS_ROLES and value not in ROLE_ALIASES):
        return None
    return ROLE_ALIASES.get(CLASS_ROLES.get(value, value))


def _type_values(messages: Sequence[Any]) -> list[Any] | None:
    """Each message's ``type`` attribute (None where it has none), as ``read_message`` reads an
    object's; None when one cannot be read (a property that raises)."""
    try:
        return list(map(_TYPE, messages))
    except AttributeError:  # some message has no type attribute (dicts): read with a default
        pass
    except Exception:
        return None
    try:
        return list(map(getattr, messages, repeat("type"), repeat(None)))
    except Exception:
        return None


def _by_key(messages: Sequence[Any], positions: Iterable[int]) -> list[int]:
    """The ``positions`` of mappings (read by key, not by attribute)."""
    return [i for i in positions if isinstance(messages[i], Mapping)]


def object_kinds(messages: Sequence[Any], types: list[Any] | None = None) -> list[Kind | None]:
    """``kind_of_type`` of each message's ``type`` (read with ``getattr``, as ``read_message``
    reads it; ``types``: those values, read already by ``object_columns``); None for mappings
    and for every message if a ``type`` cannot be read."""
    values = _type_values(messages) if types is None else types
    try:
        kind_of = {v: kind_of_type(v) for v in set(values)} if values is not None else None
    except TypeError:  # an unhashable type value
        kind_of = None
    if values is None or kind_of is None:
        return [None] * len(messages)
    kinds = list(map(kind_of.__getitem__, values))
    if types is None and any(issubclass(cls, Mapping) for cls in set(map(type, messages))):
        for i in _by_key(messages, range(len(messages))):
            kinds[i] = None
    return kinds


def dict_kinds(dicts: Sequence[dict[str, Any]]) -> list[Kind | None]:
    """``read_message``'s kind of each exact dict with a str ``role`` and no ``type`` (OpenAI and
    agent dicts), read from the role column; None (read it whole) for every other dict. Raises
    ``TypeError`` for an unhashable role."""
    roles = list(map(dict.get, dicts, repeat("role")))
    mtypes = list(map(dict.get, dicts, repeat("type")))
    kind_of: dict[Any, Kind | None] = {
        r: (ROLE_ALIASES.get(r.lower(), "unknown") if r else "unknown") if type(r) is str else None
        for r in set(roles)
    }
    kinds = list(map(kind_of.__getitem__, roles))
    if mtypes.count(None) != len(mtypes):  # a typed dict: serialized forms, Responses items
        for j in compress(range(len(mtypes)), map(is_not, mtypes, repeat(None))):
            kinds[j] = None
    return kinds


def _pinned_dicts(messages: Sequence[Any], positions: list[int]) -> list[int]:
    """The pinned ones among the exact dicts at ``positions``: by ``dict_kinds``, else read whole."""
    try:
        kinds = dict_kinds(list(map(messages.__getitem__, positions)))
    except TypeError:  # an unhashable role
        kinds = [None] * len(positions)
    out = list(compress(positions, map(PINNED_KINDS.__contains__, kinds)))
    if None in kinds:
        undecided = compress(positions, map(is_, kinds, repeat(None)))
        out += [i for i in undecided if read_message(messages[i]).kind in PINNED_KINDS]
    return out


def _positions(values: list[Any], value: Any) -> list[int]:
    """The indices of ``value`` in ``values`` (``==``, identity first), scanned at C speed."""
    if value is None:
        return list(compress(range(len(values)), map(is_, values, repeat(None))))
    out: list[int] = []
    i = -1
    try:
        while True:
            i = values.index(value, i + 1)
            out.append(i)
    except ValueError:
        pass
    return out


def pinned_indices(messages: Sequence[Any], columns: ObjectColumns | None = None) -> list[int]:
    """Indices of system, unknown-role and remove messages, ascending.

    The planner reads the whole history for them, so this reads columns: each object's ``type``
    (one ``map``, or ``columns.types`` when read already, then a C-speed scan per distinct value
    that is not a plain conversation kind), each dict's ``role`` (``_pinned_dicts``), and reads a
    message whole only where those do not decide its kind.
    """
    n = len(messages)
    values = _type_values(messages) if columns is None else columns.types
    try:
        distinct = set(values) if values is not None else None
    except TypeError:  # an unhashable type value
        distinct = None
    if values is None or distinct is None:
        return [i for i in range(n) if read_message(messages[i]).kind in PINNED_KINDS]
    mappings = columns is None and any(issubclass(cls, Mapping) for cls in set(map(type, messages)))
    pinned: set[int] = set()
    for value in distinct:
        kind = kind_of_type(value)
        if kind in _CONVERSATION and not mappings:
            continue
        positions = _positions(values, value)
        by_key = _by_key(messages, positions) if mappings else []
        if kind in PINNED_KINDS:
            pinned.update(positions)
        if by_key or kind is None:
            undecided = by_key if kind is not None else positions
            pinned.difference_update(undecided)
            dicts = [i for i in undecided if type(messages[i]) is dict]
            others = [i for i in undecided if type(messages[i]) is not dict]
            pinned.update(_pinned_dicts(messages, dicts) if dicts else ())
            pinned.update(i for i in others if read_message(messages[i]).kind in PINNED_KINDS)
    return sorted(pinned)


#: block types that may make a content list hold a compaction (``read.has_compaction_block``)
_COMPACTION_BLOCKS: Final = frozenset({"compaction", "non_standard"})


def _declares_no_parts(cls: type) -> bool:
    """True when ``cls`` is a pydantic model or a dataclass without a ``parts`` field (False when
    it has one, as Pydantic AI's ``ModelRequest`` does, or declares no fields)."""
    fields = getattr(cls, "model_fields", None)
    if not isinstance(fields, Mapping):
        fields = getattr(cls, "__dataclass_fields__", None)
    return isinstance(fields, Mapping) and "parts" not in fields


#: ``_columnar`` of each class asked about (a class's fields are fixed once it is made)
_columnar_classes: dict[type, bool] = {}


def _columnar(cls: type) -> bool:
    """True when ``cls`` is no mapping, keeps its fields in the instance ``__dict__``
    (``fields_in_dict``) and declares no ``parts`` (LangChain's messages): ``read_message``
    reads an instance's ``type`` and ``content`` as attributes, and nothing else holds content."""
    ok = _columnar_classes.get(cls)
    if ok is None:
        ok = _columnar_classes[cls] = fields_in_dict(cls) and _declares_no_parts(cls)
    return ok


def _compaction_candidates(messages: list[Any], columns: ObjectColumns | None = None) -> list[int]:
    """The indices of the messages that may hold a compaction, a superset of those that do: a
    content list with a ``compaction`` or ``non_standard`` block (or a block that is no dict), a
    content that is no text, list or None, a compaction item's ``type``, and the fields that hold
    a message's content elsewhere (a serialized LangChain dict's ``data`` or ``kwargs``, an
    object's ``parts``: Pydantic AI). Reads columns (``columns``: read already); raises what a
    hostile field raises."""
    n = len(messages)
    contents: list[Any]
    if columns is not None:  # LangChain's messages: no ``parts``, a compaction item by its type
        contents = columns.contents
        if COMPACTION_TYPES.isdisjoint(set(columns.types)):
            elsewhere: list[bool] = []
        else:
            elsewhere = list(map(COMPACTION_TYPES.__contains__, columns.types))
        return _content_candidates(contents, elsewhere)
    classes = set(map(type, messages))
    if classes == {dict}:
        contents = list(map(dict.get, messages, repeat("content")))
        dict_types = map(dict.get, messages, repeat("type"))
        held = map(dict.get, messages, repeat("data"), repeat(None))
        elsewhere = list(map(or_, map(_ELSEWHERE.__contains__, dict_types), map(is_not, held, repeat(None))))
    elif not any(issubclass(cls, Mapping) for cls in classes):
        try:  # every message has both fields (LangChain's): the faster reads
            contents = list(map(_CONTENT, messages))
            mtypes = list(map(_TYPE, messages))
        except AttributeError:
            contents = list(map(getattr, messages, repeat("content"), repeat(None)))
            mtypes = list(map(getattr, messages, repeat("type"), repeat(None)))
        items = map(COMPACTION_TYPES.__contains__, mtypes)
        if all(map(_columnar, classes)):
            # LangChain's messages (a missing field would cost a pydantic __getattr__ each): their
            # classes declare no ``parts``, where only Pydantic AI's messages hold content
            elsewhere = list(items)
        else:
            parts = map(getattr, messages, repeat("parts"), repeat(None))
            elsewhere = list(map(or_, items, map(is_not, parts, repeat(None))))
    else:
        return list(range(n))
    return _content_candidates(contents, elsewhere)


def _content_candidates(contents: list[Any], elsewhere: list[bool]) -> list[int]:
    """The candidates of ``_compaction_candidates`` from each message's content and whether its
    type or another field may hold one (``elsewhere``; empty: none does)."""
    n = len(contents)
    kinds = list(map(type, contents))
    out = list(compress(range(n), elsewhere)) if any(elsewhere) else []
    if set(kinds) <= _STR_OR_NONE:
        return out
    out += compress(range(n), map(not_, map(_TEXT_OR_LIST.__contains__, kinds)))
    lists = list(compress(range(n), map(_CONTENT_LISTS.__contains__, kinds)))
    if not lists:
        return sorted(set(out))
    blocks: list[Any] = list(chain.from_iterable([contents[i] for i in lists]))
    if set(map(type, blocks)) == {dict} and not _COMPACTION_BLOCKS.intersection(
        map(dict.get, blocks, repeat("type"))
    ):
        return sorted(set(out))  # no list holds a compaction block (the common case)
    for i in lists:
        if any(type(b) is not dict or b.get("type") in _COMPACTION_BLOCKS for b in contents[i]):
            out.append(i)
    return sorted(set(out))


def compaction_indices(messages: Sequence[Any], columns: ObjectColumns | None = None) -> list[int]:
    """Indices of the messages holding a compaction (``read_message(m).compaction``), ascending.

    A compaction lives in a content list (an Anthropic ``compaction`` block) or is a Responses
    item, so only those messages are read whole (``columns``: the types and contents read
    already by ``object_columns``).
    """
    msgs = messages if type(messages) is list else list(messages)
    try:
        candidates = _compaction_candidates(msgs, columns)
    except Exception:  # an unhashable type value, a hostile __dict__: every message read
        candidates = list(range(len(msgs)))
    return [i for i in candidates if read_message(msgs[i]).compaction]
