"""The state-annotation form: ``Annotated[list, reducer.as_langgraph_reducer()]``.

LangGraph calls the function on every state update with ``(existing, new)``. It merges with
``add_messages`` semantics first (ids assigned, replace by id, ``RemoveMessage``,
``REMOVE_ALL_MESSAGES``, coercion of dicts, tuples, strings and a single message), then prunes by
the contract. With langgraph installed the merge *is* ``langgraph.graph.message.add_messages``,
called on prepared input, so the two differ only where ``add_messages`` would fail:

* a ``RemoveMessage`` for an id that is not there (typically one the reducer already pruned, or a
  client removing an id twice) is dropped instead of raising ``ValueError``: the message it names
  is already gone, which is what the caller asked for;
* ``RemoveMessage(id=REMOVE_ALL_MESSAGES)`` clears everything before it and the updates after it
  are merged onto the empty list (``add_messages`` returns them verbatim, so a ``RemoveMessage``
  or a repeated id after the marker would stay in the state).

Without langgraph installed the merge works on plain data with the same rules: a string becomes
``{"role": "user", "content": ...}``, a ``(role, content)`` tuple ``{"role": role, "content":
content}``, a message without an id gets a new uuid4 id in a copy (a shallow dict copy, or
``model_copy`` for pydantic objects; the caller's message is never changed, where
``add_messages`` sets the id in place), and ``{"type": "remove", "id": ...}`` removes by id.
Dicts stay dicts: nothing is converted to LangChain objects, so roles keep their spelling
(``"user"`` is not turned into ``"human"``).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from .messages import read_message

if TYPE_CHECKING:
    from .reducer import MessageReducer

#: langgraph.graph.message.REMOVE_ALL_MESSAGES, without importing langgraph
REMOVE_ALL_MESSAGES = "__remove_all__"


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, list | tuple) and not _is_role_tuple(value):
        return list(value)
    return [value]


def _is_role_tuple(value: Any) -> bool:
    return isinstance(value, tuple) and len(value) == 2 and all(isinstance(v, str) for v in value)


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


def merge_messages(existing: Any, new: Any) -> list[Any]:
    """``add_messages`` semantics, tolerant of removals of ids that are already gone."""
    left, right = _prepare(_as_list(existing), _as_list(new))
    try:
        from langgraph.graph.message import add_messages
    except ImportError:
        return _merge_dicts(left, right)
    return list(add_messages(left, right))


def _new_id() -> str:
    return str(uuid.uuid4())


def _coerce(m: Any) -> Any:
    """A string or ``(role, content)`` tuple as a dict; a copy with a new id for an id-less message."""
    if isinstance(m, str):
        return {"role": "user", "content": m, "id": _new_id()}
    if _is_role_tuple(m):
        return {"role": m[0], "content": m[1], "id": _new_id()}
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


def make_state_reducer(reducer: MessageReducer) -> Callable[[Any, Any], list[Any]]:
    """``(existing, new) -> list``: ``merge_messages`` then ``reducer.reduce``."""

    def reduce_state(existing: Any, new: Any) -> list[Any]:
        return reducer.reduce(merge_messages(existing, new)).surviving

    reduce_state.__name__ = "agentstate_reduce_messages"
    reduce_state.__qualname__ = "agentstate_reduce_messages"
    return reduce_state
