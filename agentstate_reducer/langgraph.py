"""The state-annotation form: ``Annotated[list, reducer.as_langgraph_reducer()]``.

LangGraph calls the function on every state update with ``(existing, new)``. It merges with
``add_messages`` semantics first (ids assigned, replace by id, ``RemoveMessage``,
``REMOVE_ALL_MESSAGES``, coercion of dicts, tuples, strings and a single message), then prunes by
the contract.

A ``RemoveMessage`` for an id that is not there any more (typically one the reducer already
pruned) is dropped instead of raising ``ValueError`` as ``add_messages`` does: the message it
names is already gone, which is what the caller asked for.

Without langgraph installed the merge works on dicts: a string becomes ``{"role": "user", ...}``,
a ``(role, content)`` tuple ``{"role": role, "content": content}``, a message without an id gets
one in a shallow copy (the caller's dict is never changed), and ``{"type": "remove", "id": ...}``
removes by id. Dicts stay dicts: nothing is converted to LangChain objects.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from .messages import read_message

if TYPE_CHECKING:
    from .reducer import MessageReducer

REMOVE_ALL_MESSAGES = "__remove_all__"


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, list | tuple) and not _is_role_tuple(value):
        return list(value)
    return [value]


def _is_role_tuple(value: Any) -> bool:
    return isinstance(value, tuple) and len(value) == 2 and all(isinstance(v, str) for v in value)


def _drop_stale_removes(existing: list[Any], new: list[Any]) -> list[Any]:
    """Drop RemoveMessages naming an id that is neither in ``existing`` nor added by ``new``."""
    known = {read_message(m).id for m in existing}
    known.update(read_message(m).id for m in new if read_message(m).kind != "remove")
    out = []
    for m in new:
        info = read_message(m)
        if info.kind == "remove" and info.id != REMOVE_ALL_MESSAGES and info.id not in known:
            continue
        out.append(m)
    return out


def merge_messages(existing: Any, new: Any) -> list[Any]:
    """``add_messages`` semantics, tolerant of removals of ids that are already gone."""
    left, right = _as_list(existing), _as_list(new)
    try:
        from langgraph.graph.message import add_messages
    except ImportError:
        return _merge_dicts(left, right)
    merged = add_messages(left, _drop_stale_removes(left, right))
    return list(merged)


def _coerce_dict(m: Any) -> Any:
    if isinstance(m, str):
        return {"role": "user", "content": m, "id": str(uuid.uuid4())}
    if _is_role_tuple(m):
        return {"role": m[0], "content": m[1], "id": str(uuid.uuid4())}
    if isinstance(m, Mapping) and read_message(m).id is None:
        return {**m, "id": str(uuid.uuid4())}
    return m


def _merge_dicts(left: list[Any], right: list[Any]) -> list[Any]:
    left = [_coerce_dict(m) for m in left]
    right = [_coerce_dict(m) for m in right]
    merged = list(left)
    index = {read_message(m).id: i for i, m in enumerate(merged)}
    removed: set[str] = set()
    for m in right:
        info = read_message(m)
        if info.kind == "remove":
            if info.id == REMOVE_ALL_MESSAGES:
                merged, index, removed = [], {}, set()
            elif info.id is not None and info.id in index:
                removed.add(info.id)
            continue
        assert info.id is not None
        if info.id in index:
            merged[index[info.id]] = m
            removed.discard(info.id)
        else:
            index[info.id] = len(merged)
            merged.append(m)
    return [m for m in merged if read_message(m).id not in removed]


def make_state_reducer(reducer: MessageReducer) -> Callable[[Any, Any], list[Any]]:
    def reduce_state(existing: Any, new: Any) -> list[Any]:
        return reducer.reduce(merge_messages(existing, new)).surviving

    reduce_state.__name__ = "agentstate_reduce_messages"
    reduce_state.__qualname__ = "agentstate_reduce_messages"
    return reduce_state
