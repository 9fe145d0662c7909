"""The state-annotation form: ``Annotated[list, reducer.as_langgraph_reducer()]``.

LangGraph calls the function on every state update with ``(existing, new)``. It merges with
``add_messages`` semantics first (ids assigned, replace by id, ``RemoveMessage``,
``REMOVE_ALL_MESSAGES``, coercion of dicts, tuples, strings and a single message), then prunes by
the contract. With langgraph installed the merge *is* ``langgraph.graph.message.add_messages``,
called on checked and prepared input, so the two differ only where ``add_messages`` would fail:

* a ``RemoveMessage`` for an id that is not there (typically one the reducer already pruned, or a
  client removing an id twice) is dropped instead of raising ``ValueError``: the message it names
  is already gone, which is what the caller asked for;
* ``RemoveMessage(id=REMOVE_ALL_MESSAGES)`` clears everything before it and the updates after it
  are merged onto the empty list (``add_messages`` returns them verbatim, so a ``RemoveMessage``
  or a repeated id after the marker would stay in the state);
* ``new`` (and ``existing``) may be a list, a tuple of messages, any other iterable (a generator is
  read once) or one message; a 2-tuple whose first item is a str is one ``(role, content)``
  message, as in ``add_messages``; ``existing=None`` is an empty history;
* a value that cannot be made into a message raises ``TypeError`` (wrong type) or ``ValueError``
  (wrong value) naming the side, the message's index and the field, before LangChain sees it, e.g.
  ``new[2].tool_calls must be a list of tool calls, got dict``; ``new=None`` is such an error
  (``add_messages`` rejects it too: a node that adds nothing leaves the key out or returns ``[]``);
* ``{"type": "remove", "id": ...}`` needs no ``content``.

What is accepted as one message: a LangChain ``BaseMessage`` (taken as it is, unchecked); a str (a
user message); a ``(role, content)`` tuple or 2-list; a dict with ``role`` (or ``type``) one of
``user``/``human``, ``assistant``/``ai``, ``system``/``developer``, ``tool`` (with a str
``tool_call_id``), ``function`` (with a ``name``) or ``remove`` (with an ``id``), a ``content`` that
is None, a str or a list of str/dict blocks, optional str ``id`` and ``name``, optional
``tool_calls`` as a list of dicts in LangChain (``name``, ``args`` dict, ``id``) or OpenAI
(``id``, ``function`` with ``name`` and JSON-object ``arguments``) shape; LangChain's serialized
constructor dict (``langchain_core.load.dumpd``) of a message. The checks are those LangChain's
coercion would fail on, a little stricter where it silently drops a value (``content=0``).

Without langgraph installed the merge works on plain data with the same rules and accepts and
rejects the same inputs: a string becomes ``{"role": "user", "content": ...}``, a ``(role,
content)`` tuple ``{"role": role, "content": content}``, a message without an id gets a new uuid4
id in a copy (a shallow dict copy, or ``model_copy`` for a LangChain message; the caller's message
is never changed, where ``add_messages`` sets the id in place), and ``{"type": "remove", "id":
...}`` removes by id. Dicts stay dicts: nothing is converted to LangChain objects, so roles keep
their spelling (``"user"`` is not turned into ``"human"``).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from .messages import is_message_like, read_message

#: langgraph.graph.message.REMOVE_ALL_MESSAGES, without importing langgraph
REMOVE_ALL_MESSAGES = "__remove_all__"

#: the roles LangChain's coercion knows (case-sensitive), and those a (role, content) pair may take
_ROLES = frozenset({"human", "user", "ai", "assistant", "system", "developer", "tool", "function", "remove"})
_PAIR_ROLES = frozenset({"human", "user", "ai", "assistant", "system", "developer"})
_GIVE_ROLE = "give 'user', 'assistant', 'system' or 'tool'"
_EXPECTED = "expected a message (dict or BaseMessage), a (role, content) tuple or a str"
#: langchain_core.messages.utils._LC_CONSTRUCTOR_NAME_TO_TYPE: the serialized classes it unpacks
_LC_CLASS_TYPES = {
    f"{name}{chunk}": kind
    for name, kind in [("HumanMessage", "human"), ("AIMessage", "ai"), ("SystemMessage", "system"),
                       ("FunctionMessage", "function"), ("ToolMessage", "tool")]
    for chunk in ("", "Chunk")
} | {"RemoveMessage": "remove"}
#: a dict of only these fields, with str values, needs no further check (``_is_plain``)
_PLAIN_KEYS = frozenset({"role", "type", "content", "id", "name"})
_PLAIN_ROLES = _PAIR_ROLES
_LC_TOOL_CALL_KEYS = frozenset({"name", "args", "id", "type", "extras"})


class _NoBaseMessage:
    """Stands in for ``BaseMessage`` when langchain_core is not installed: nothing is one."""


def _base_message() -> type:
    try:
        from langchain_core.messages import BaseMessage
    except ImportError:
        return _NoBaseMessage
    return BaseMessage


def _a(value: Any) -> str:
    """``"an int"``, ``"a dict"``, ``"None"``: the type of ``value`` for an error message."""
    if value is None:
        return "None"
    name = type(value).__name__
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"


def _is_role_pair(value: Any) -> bool:
    """A 2-tuple or 2-list whose first item is a str: one ``(role, content)`` message."""
    return type(value) in (tuple, list) and len(value) == 2 and isinstance(value[0], str)


def _as_messages(value: Any, side: str, base: type, *, check: bool = True) -> list[Any]:
    """``value`` as a list of messages, each checked (unless ``check`` is false) as LangChain's
    coercion will need it.

    Raises ``TypeError``/``ValueError`` naming ``side[index].field`` for what cannot be coerced.
    """
    if value is None:
        if side == "existing":
            return []
        raise ValueError(
            "new is None: a state update adds a list of messages or one message; "
            "to add nothing, return [] or leave the key out of the update"
        )
    if isinstance(value, list):
        items = value
    elif isinstance(value, str | base) or is_message_like(value) or (
        isinstance(value, tuple) and _is_role_pair(value)
    ):
        items = [value]
    elif isinstance(value, bytes | bytearray):
        raise TypeError(f"{side} is {_a(value)}: expected a list of messages or one message; decode text")
    elif isinstance(value, Iterable):
        items = list(value)  # a tuple of messages, a generator (read once), ...
    else:
        raise TypeError(f"{side} is {_a(value)}: {_EXPECTED}, or a list of them")
    if check and not all(issubclass(t, base) for t in set(map(type, items))):
        for i, m in enumerate(items):
            if not (type(m) is dict and _is_plain(m)) and not isinstance(m, base):
                _check_message(m, f"{side}[{i}]", base)
    return items


def _is_plain(m: dict[Any, Any]) -> bool:
    """The common dict, accepted in one pass: a plain role, str content, str or no id and name."""
    if not _PLAIN_KEYS.issuperset(m):
        return False
    role = m["role"] if "role" in m else m.get("type")
    ident, name = m.get("id"), m.get("name")
    return (
        type(role) is str and role in _PLAIN_ROLES and type(m.get("content")) is str
        and (ident is None or type(ident) is str) and (name is None or type(name) is str)
    )


def _is_message_or_list(value: Any, base: type) -> bool:
    return isinstance(value, base | list | tuple) or is_message_like(value)


def _check_message(m: Any, where: str, base: type) -> None:
    """Raise ``TypeError``/``ValueError`` if ``m`` (not a BaseMessage) cannot be coerced."""
    if isinstance(m, str):
        return
    if type(m) in (tuple, list):
        if len(m) == 2 and not _is_role_pair(m) and not _is_message_or_list(m[0], base):
            raise TypeError(f"{where}[0], the role of a (role, content) pair, must be a str, got {_a(m[0])}")
        if not _is_role_pair(m):
            raise TypeError(
                f"{where} is {_a(m)} of {len(m)} items, not a (role, content) pair: {_EXPECTED} "
                "(nested lists are not flattened)"
            )
        role, content = m
        if role not in _ROLES:
            raise ValueError(
                f"{where}[0], the role of a (role, content) pair, is {role!r}: {_GIVE_ROLE}; "
                "pass several messages as a list"
            )
        if role not in _PAIR_ROLES:
            raise ValueError(f"{where} is a ({role!r}, content) pair: a {role!r} message needs a dict")
        if not isinstance(content, str | list | tuple):
            raise TypeError(f"{where}[1], the content, must be a str or a list of blocks, got {_a(content)}")
        _check_blocks(content, f"{where}[1]")
        return
    if not isinstance(m, dict):
        raise TypeError(f"{where} is {_a(m)}: {_EXPECTED}")
    _check_dict(m, where)


def _serialized_body(m: dict[Any, Any]) -> dict[Any, Any] | None:
    """The message dict a LangChain serialized constructor stands for, as LangChain unpacks it."""
    ids, kwargs = m.get("id"), m.get("kwargs")
    if m.get("lc") == 1 and m.get("type") == "constructor" and isinstance(ids, list) and ids and (
        isinstance(kwargs, dict)
    ):
        kind = _LC_CLASS_TYPES.get(ids[-1]) if isinstance(ids[-1], str) else None
        if kind is not None:
            return {"type": kind, **kwargs}
    return None


def _check_dict(m: dict[Any, Any], where: str) -> None:
    body = _serialized_body(m)
    if body is not None:
        _check_dict(body, f"{where}.kwargs")
        return
    for key in m:
        if not isinstance(key, str):
            raise TypeError(f"{where} has a key {key!r} that is not a str: fields are named by strings")
    field = "role" if "role" in m else "type"
    if field not in m:
        raise ValueError(f"{where} has no 'role' (or 'type'): {_GIVE_ROLE}")
    role = m[field]
    if role is None:
        raise ValueError(f"{where}.{field} is None: {_GIVE_ROLE}")
    if not isinstance(role, str):
        raise TypeError(f"{where}.{field} must be a str, got {_a(role)}: {_GIVE_ROLE}")
    if role not in _ROLES:
        raise ValueError(
            f"{where}.{field} is {role!r}, a role LangChain cannot coerce: {_GIVE_ROLE} "
            "(or 'human', 'ai', 'developer', 'function', 'remove'; lower case)"
        )
    if "content" in m:
        content = m["content"]
        if content is not None:
            if not isinstance(content, str | list | tuple):
                raise TypeError(
                    f"{where}.content must be a str or a list of content blocks (str or dict), "
                    f"got {_a(content)}"
                )
            _check_blocks(content, f"{where}.content")
    elif role != "remove":
        hint = " (a messages_to_dict form: use messages_from_dict)" if "data" in m else ""
        raise ValueError(f"{where} has no 'content': give a str ('' for none) or a list of blocks{hint}")
    if "message_type" in m:
        raise ValueError(f"{where} has a field 'message_type', a name LangChain's coercion cannot take")
    for key in ("id", "name"):
        value = m.get(key)
        if value is not None and not isinstance(value, str):
            raise TypeError(f"{where}.{key} must be a str, got {_a(value)}")
    if role == "remove" and not m.get("id"):
        raise ValueError(f"{where} is a removal without an 'id': give the id of the message to remove")
    if role == "function" and m.get("name") is None:
        raise ValueError(f"{where} is a function result without a 'name': give the function's name")
    if role == "tool":
        answered = m.get("tool_call_id")
        if answered is None:
            raise ValueError(f"{where} is a tool result without a 'tool_call_id': give the call's id")
        if not isinstance(answered, str):
            raise TypeError(f"{where}.tool_call_id must be a str, got {_a(answered)}")
    extra = m.get("additional_kwargs")
    if "additional_kwargs" in m and not isinstance(extra, dict):
        raise TypeError(f"{where}.additional_kwargs must be a dict, got {_a(extra)}")
    meta = m.get("response_metadata")
    if meta is not None and not isinstance(meta, dict):
        raise TypeError(f"{where}.response_metadata must be a dict, got {_a(meta)}")
    if role == "tool":
        # LangChain reads status after merging additional_kwargs over the top-level fields
        status = extra["status"] if extra is not None and "status" in extra else m.get("status")
        if status is not None and status not in ("success", "error"):  # a list is unhashable
            raise ValueError(f"{where}.status is {status!r}: give 'success' or 'error'")
    calls = m.get("tool_calls")
    if calls is not None:
        _check_tool_calls(calls, f"{where}.tool_calls")


def _check_blocks(content: list[Any] | tuple[Any, ...] | str, where: str) -> None:
    if isinstance(content, str):
        return
    for j, block in enumerate(content):
        if not isinstance(block, str | dict):
            raise TypeError(f"{where}[{j}] must be a str or a dict content block, got {_a(block)}")


def _check_tool_calls(calls: Any, where: str) -> None:
    if not isinstance(calls, list | tuple):
        raise TypeError(f"{where} must be a list of tool calls, got {type(calls).__name__}")
    for j, call in enumerate(calls):
        at = f"{where}[{j}]"
        if not isinstance(call, dict):
            raise TypeError(f"{at} must be a dict (a tool call), got {_a(call)}")
        for key in call:
            if not isinstance(key, str):
                raise TypeError(f"{at} has a key {key!r} that is not a str")
        if "id" not in call:
            raise ValueError(f"{at} has no 'id': give the id the tool result will answer")
        if call["id"] is not None and not isinstance(call["id"], str):
            raise TypeError(f"{at}.id must be a str, got {_a(call['id'])}")
        if "function" in call:
            _check_openai_function(call["function"], f"{at}.function")
            continue
        unknown = sorted(set(call) - _LC_TOOL_CALL_KEYS)
        if unknown:
            raise ValueError(
                f"{at} has unknown key {unknown[0]!r}: a tool call has 'name', 'args' and 'id' "
                "(LangChain) or 'id' and 'function' (OpenAI)"
            )
        for key in ("name", "args"):
            if key not in call:
                raise ValueError(f"{at} has no {key!r}: a tool call has 'name', 'args' and 'id'")
        if not isinstance(call["name"], str):
            raise TypeError(f"{at}.name must be a str, got {_a(call['name'])}")
        if not isinstance(call["args"], dict):
            is_text = isinstance(call["args"], str)
            hint = " (a JSON string goes in OpenAI's function.arguments)" if is_text else ""
            raise TypeError(f"{at}.args must be a dict, got {_a(call['args'])}{hint}")
        _check_arg_names(call["args"], f"{at}.args")


def _check_openai_function(fn: Any, where: str) -> None:
    if not isinstance(fn, dict):
        raise TypeError(f"{where} must be a dict with 'name' and 'arguments', got {_a(fn)}")
    for key in ("name", "arguments"):
        if key not in fn:
            raise ValueError(f"{where} has no {key!r}: an OpenAI function has 'name' and 'arguments'")
    if not isinstance(fn["name"], str):
        raise TypeError(f"{where}.name must be a str, got {_a(fn['name'])}")
    args = fn["arguments"]
    if isinstance(args, str):
        try:
            args = json.loads(args, strict=False)
        except ValueError as exc:
            raise ValueError(f"{where}.arguments is not valid JSON ({exc})") from None
        if not isinstance(args, dict):
            raise TypeError(f"{where}.arguments must be a JSON object, got {_a(args)}")
        return
    if not isinstance(args, dict):
        raise TypeError(f"{where}.arguments must be a JSON object string or a dict, got {_a(args)}")
    _check_arg_names(args, f"{where}.arguments")


def _check_arg_names(args: dict[Any, Any], where: str) -> None:
    for key in args:
        if not isinstance(key, str):
            raise TypeError(f"{where} has a key {key!r} that is not a str: argument names are strings")


def _prepare(left: list[Any], right: list[Any]) -> tuple[list[Any], list[Any]]:
    """Apply the last ``REMOVE_ALL_MESSAGES`` by cutting, and drop removals of ids that are gone.

    Ids are tracked in order: a removal counts only ids present before it (in ``left`` or added
    earlier in ``right``), as ``add_messages`` processes them.
    """
    infos = [read_message(m) for m in right]
    cut = max(
        (i for i, info in enumerate(infos) if info.kind == "remove" and info.id == REMOVE_ALL_MESSAGES),
        default=None,
    )
    if cut is not None:
        left, right, infos = [], right[cut + 1 :], infos[cut + 1 :]
    known = {read_message(m).id for m in left}
    kept: list[Any] = []
    for m, info in zip(right, infos, strict=True):
        if info.kind == "remove":
            if info.id not in known:
                continue  # already gone (pruned, or removed before): nothing left to remove
        elif info.id is not None:
            known.add(info.id)
        kept.append(m)
    return left, kept


def merge_messages(existing: Any, new: Any, *, trusted: Any = None) -> list[Any]:
    """``add_messages`` semantics, tolerant of removals of ids that are already gone.

    Raises ``TypeError``/``ValueError`` naming ``existing[i]``/``new[i]`` and the field for a
    value that cannot be made into a message (see the module docstring). When ``existing`` is
    the very object ``trusted`` (a list this module returned), its messages are not checked again.
    """
    add_messages: Callable[[Any, Any], Any] | None
    try:
        from langgraph.graph.message import add_messages
    except ImportError:
        add_messages = None
    base = _base_message()
    checked_left = _as_messages(existing, "existing", base, check=existing is not trusted or trusted is None)
    checked_right = _as_messages(new, "new", base)
    left, right = _prepare(checked_left, checked_right)
    if add_messages is None:
        return _merge_dicts(left, right)
    right = [_with_content(m) for m in right]
    if any(issubclass(t, dict) for t in set(map(type, left))):
        left = [_with_content(m) for m in left]
    try:
        return list(add_messages(left, right))
    except Exception as exc:  # a shape the checks above missed: still name the message
        raise _coercion_error(exc, checked_left, checked_right, base) from exc


def _with_content(m: Any) -> Any:
    """LangChain needs ``content`` in a removal dict too."""
    if isinstance(m, dict) and "content" not in m and m.get("role", m.get("type")) == "remove":
        return {**m, "content": ""}
    return m


def _coercion_error(exc: Exception, left: list[Any], right: list[Any], base: type) -> Exception:
    from langchain_core.messages import convert_to_messages

    for side, items in (("existing", left), ("new", right)):
        for i, m in enumerate(items):
            if isinstance(m, base):
                continue
            try:
                convert_to_messages([_with_content(m)])
            except Exception as err:
                why = f"{type(err).__name__}: {err}"
                return ValueError(f"{side}[{i}] cannot be coerced to a LangChain message: {why}")
    return exc if isinstance(exc, TypeError | ValueError) else ValueError(f"add_messages failed: {exc!r}")


def _new_id() -> str:
    return str(uuid.uuid4())


def _coerce(m: Any) -> Any:
    """A string or ``(role, content)`` pair as a dict; a serialized LangChain message unpacked; a
    copy with a new id for an id-less message."""
    if isinstance(m, str):
        return {"role": "user", "content": m, "id": _new_id()}
    if _is_role_pair(m):
        return {"role": m[0], "content": m[1], "id": _new_id()}
    if isinstance(m, dict):
        body = _serialized_body(m)
        if body is not None:
            m = body
    if read_message(m).id is None:
        if isinstance(m, Mapping):
            return {**m, "id": _new_id()}
        model_copy = getattr(m, "model_copy", None)
        if callable(model_copy):
            return model_copy(update={"id": _new_id()})
    return m
def _merge_dicts(left: list[Any], right: list[Any]) -> list[Any]:
    """The merge without langgraph; ``left`` and ``right`` come from ``_prepare``."""
    merged = [_coerce(m) for m in left]
    index = {mid: i for i, m in enumerate(merged) if (mid := read_message(m).id) is not None}
    removed: set[str] = set()
    for m in map(_coerce, right):
        info = read_message(m)
        if info.kind == "remove":
            if info.id is not None:
                removed.add(info.id)  # _prepare kept only removals of ids present by now
            continue
        if info.id is not None and info.id in index:
            # replace in place; a message re-sent after its removal in the same update stays
            merged[index[info.id]] = m
            removed.discard(info.id)
            continue
        if info.id is not None:
            index[info.id] = len(merged)
        merged.append(m)  # a shape whose id cannot be read or set is appended as it is
    if not removed:
        return merged
    return [m for m in merged if read_message(m).id not in removed]


def make_state_reducer(reduce: Callable[[list[Any]], list[Any]]) -> Callable[[Any, Any], list[Any]]:
    """``(existing, new) -> list``: ``merge_messages``, then ``reduce`` (a reducer's surviving list).

    Holds the list it returned last: when LangGraph hands that same list back as ``existing`` (one
    thread, updated in turn), only ``new`` is checked. A list changed in place after it was
    returned is not checked again (LangGraph's state is not to be mutated in place).
    """
    last: list[Any] = [None]

    def reduce_state(existing: Any, new: Any) -> list[Any]:
        out = reduce(merge_messages(existing, new, trusted=last[0]))
        last[0] = out
        return out

    reduce_state.__name__ = "agentstate_reduce_messages"
    reduce_state.__qualname__ = "agentstate_reduce_messages"
    return reduce_state


def make_delta_reducer(
    reduce: Callable[[list[Any]], list[Any]],
) -> Callable[[Any, Sequence[Any]], list[Any]]:
    """``(state, writes) -> list`` for ``Annotated[list, DeltaChannel(...)]``: each write in turn is
    merged (``merge_messages``) and the result reduced (``reduce``, which must do no I/O).

    LangGraph replays a ``DeltaChannel``'s stored writes through its reducer on every load, in
    batches of its choosing, so the reducer must be deterministic and batching-invariant:
    ``r(r(s, xs), ys) == r(s, xs + ys)``. A left fold over the writes is both by construction: the
    result after a write depends only on the value before it and the write, whichever batch carries
    it, so the bound applies after every write (a count window cut at the batch's end would give
    another list for another batching). A message without an id gets one derived from the value it
    is merged into and its place in the write, never a random one: a replay rebuilds the same ids
    (LangGraph stamps ids on message objects before it stores a write; strings and tuples it leaves).
    """
    last: list[Any] = [None]

    def reduce_writes(state: Any, writes: Sequence[Any]) -> list[Any]:
        if isinstance(writes, str | bytes) or not isinstance(writes, Sequence):
            raise TypeError(
                f"writes is {_a(writes)}: a DeltaChannel reducer takes (state, [write, ...]); "
                "use reducer.as_langgraph_reducer() for Annotated[list, reducer] channels"
            )
        value: Any = state
        for write in writes:
            value = reduce(merge_messages(value, _with_stable_ids(value, write), trusted=last[0]))
            last[0] = value
        return value if isinstance(value, list) else _as_messages(value, "existing", _base_message())

    reduce_writes.__name__ = "agentstate_reduce_delta_writes"
    reduce_writes.__qualname__ = "agentstate_reduce_delta_writes"
    return reduce_writes


def _with_stable_ids(state: Any, write: Any) -> Any:
    """``write`` with an id on every message lacking one, derived from ``state`` (its length and its
    newest message's id) and the message's place in the write; the caller's objects unchanged."""
    items = write if isinstance(write, list) else [write]
    if not any(isinstance(m, str) or _is_role_pair(m) or read_message(m).id is None for m in items):
        return write
    held = state if isinstance(state, list) else []
    anchor = f"{len(held)}/{read_message(held[-1]).id if held else ''}"
    out = [_with_id(m, uuid.uuid5(_STABLE_IDS, f"{anchor}/{i}").hex) for i, m in enumerate(items)]
    return out if isinstance(write, list) else out[0]


#: the uuid5 namespace of the ids ``_with_stable_ids`` derives
_STABLE_IDS = uuid.UUID("6f1c2a8e-3b7d-5e4f-9a10-4c2d8b7e6a51")


def _with_id(m: Any, new_id: str) -> Any:
    if isinstance(m, str):
        return {"role": "user", "content": m, "id": new_id}
    if _is_role_pair(m):
        return {"role": m[0], "content": m[1], "id": new_id}
    if read_message(m).id is not None:
        return m
    if isinstance(m, Mapping):
        return {**m, "id": new_id}
    model_copy = getattr(m, "model_copy", None)
    return model_copy(update={"id": new_id}) if callable(model_copy) else m
