"""Reading Microsoft Agent Framework messages (``agent_framework.Message``) without importing it.

A ``Message(role, contents)`` holds a list of ``Content`` items, each naming itself in ``type``
(its ``to_dict()`` dump is ``{"type": "message", "role": ..., "contents": [{"type": ...}]}``):

* ``text`` / ``text_reasoning``: text (``text``);
* ``function_call(call_id, name, arguments)``: a tool call of an assistant message;
* ``function_result(call_id, result)``: a tool result, in a ``tool`` message (or a ``user`` one);
  each answers its call once, so a message holding two for one ``call_id`` answers it twice;
* ``function_approval_request(id, function_call)`` / ``function_approval_response(id, ...)``: a
  call waiting for the user's approval and its answer, paired by the approval's ``id``.

Roles: ``system``, ``user`` (a human turn, or results when it holds only results and approval
answers), ``assistant``, ``tool``. The ``content`` read for the token counter is the texts and
results; the calls' names and arguments come from ``agent_framework_call_payloads``. Duck-typed
and stdlib only: a message is one when it has a str ``role`` and a ``contents`` list whose items
have a str ``type``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from agentstate_reducer.messages.jsontext import arguments_text

_KINDS: Final = {"system": "system", "user": "human", "assistant": "ai", "tool": "tool"}
_CALLS: Final = frozenset({"function_call", "function_approval_request"})
_RESULTS: Final = frozenset({"function_result", "function_approval_response"})

#: ``(kind, role, id, content, call_ids, result_ids, name, leads)``, ``MessageInfo``'s fields
Reading = tuple[str, str, "str | None", Any, tuple[str, ...], tuple[str, ...], "str | None", int]


def _get(obj: Any, key: str) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(key)
    return getattr(obj, key, None)


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def af_contents(msg: Any) -> list[Any] | None:
    """The ``contents`` of an Agent Framework message (an object or its dump), or None when
    ``msg`` is no such message."""
    if not isinstance(_get(msg, "role"), str):
        return None
    contents = _get(msg, "contents")
    if not isinstance(contents, list) or not all(isinstance(_get(c, "type"), str) for c in contents):
        return None
    if isinstance(msg, Mapping) and msg.get("content") is not None:
        return None  # a chat dict that happens to have a "contents" key
    return contents


def _item_id(item: Any, kind: str) -> str | None:
    """The call a call item makes or a result item answers; an empty id is an id (``read.call_id``)."""
    approval = kind in ("function_approval_request", "function_approval_response")
    value = _get(item, "id" if approval else "call_id")
    return str.__str__(value) if isinstance(value, str) else None


def read_agent_framework(msg: Any, contents: list[Any]) -> Reading:
    """The ``MessageInfo`` fields of an Agent Framework message whose contents are ``contents``
    (``af_contents``). Raises what a hostile field raises (``read_message`` catches it)."""
    role = _get(msg, "role")
    kind = _KINDS.get(role.lower(), "unknown")
    msg_id = _str(_get(msg, "message_id"))
    name = _str(_get(msg, "author_name"))
    calls: list[str] = []
    results: list[str] = []
    texts: list[Any] = []
    others = 0
    for item in contents:
        itype = _get(item, "type")
        if itype in _CALLS:
            call_id = _item_id(item, itype)
            if call_id is not None:
                calls.append(call_id)
        elif itype in _RESULTS:
            call_id = _item_id(item, itype)
            if call_id is not None:
                results.append(call_id)
            texts.append(_get(item, "result"))
        else:
            others += 1
            texts.append(_get(item, "text"))
    call_ids = tuple(dict.fromkeys(calls))
    # every result as it is, a repeated call_id too: the planner prunes a message answering a
    # call twice (contract rule 6), which it cannot see in ids folded into one
    result_ids = tuple(results)
    if kind == "human" and result_ids and not others:
        kind = "tool"  # results travel in a user message: they answer calls, no new turn
    if kind != "ai":
        call_ids = ()
    if kind != "tool":
        result_ids = ()
    return (kind, role, msg_id, [t for t in texts if t is not None], call_ids, result_ids, name, 0)


def agent_framework_call_payloads(contents: list[Any]) -> list[tuple[str, str, str]]:
    """``(call_id, name, arguments)`` of each ``function_call`` in ``contents``."""
    out: list[tuple[str, str, str]] = []
    for item in contents:
        itype = _get(item, "type")
        if itype == "function_approval_request":
            item = _get(item, "function_call")
        elif itype != "function_call":
            continue
        args = _get(item, "arguments")
        call_id, name = _str(_get(item, "call_id")) or "", _str(_get(item, "name")) or ""
        out.append((call_id, name, arguments_text(args or "")))
    return out
