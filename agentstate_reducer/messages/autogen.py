"""Reading AutoGen's model messages (``autogen_core.models``) without importing AutoGen.

AutoGen's ``LLMMessage`` classes name themselves in a ``type`` field, and so do their dumps
(``model_dump()``, the dicts of ``ChatCompletionContext.save_state``):

* ``UserMessage(content, source)``: a human turn (``content`` a str or a list of str and
  ``Image``); ``source`` is its name;
* ``AssistantMessage(content, thought, source)``: an AI message; ``content`` is its text or a list
  of ``FunctionCall(id, arguments, name)``, its tool calls;
* ``FunctionExecutionResultMessage(content)``: the results of tool calls, a list of
  ``FunctionExecutionResult(content, name, call_id, is_error)``, one tool message answering
  every ``call_id`` it holds, once per result (a ``call_id`` held twice answers its call twice).

``SystemMessage`` shares its class name with LangChain's and is read as a system message by the
generic path. A call or result with an empty id (AutoGen allows them) answers by name and order:
``"<name>#<k>"`` for the k-th call or result of that name in its message.

The ``content`` read for the token counter is what a provider is sent: a message's text (and its
``thought``), the results' texts; the calls' names and arguments come from
``autogen_call_payloads``. Duck-typed and stdlib only: every field is read by attribute or by key.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from agentstate_reducer.messages.jsontext import arguments_text

#: ``type`` values of AutoGen's messages read here (``SystemMessage``: the generic path)
AUTOGEN_TYPES: Final = frozenset({"UserMessage", "AssistantMessage", "FunctionExecutionResultMessage"})

#: ``(kind, role, id, content, call_ids, result_ids, name, leads)``, ``MessageInfo``'s fields
Reading = tuple[str, str, None, Any, tuple[str, ...], tuple[str, ...], "str | None", int]


def _get(obj: Any, key: str) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(key)
    return getattr(obj, key, None)


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _ids(items: Any, key: str) -> list[str]:
    """The id under ``key`` of each call or result in ``items``; ``"<name>#<k>"`` for an empty one."""
    ids: list[str] = []
    seen: dict[str, int] = {}
    for item in items:
        value = _get(item, key)
        if isinstance(value, str) and value:
            ids.append(value)
            continue
        name = _text(_get(item, "name")) or ""
        k = seen.get(name, 0)
        seen[name] = k + 1
        ids.append(f"{name}#{k}")
    return ids


def _unique(ids: list[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(ids))


def _is_list(value: Any) -> bool:
    return isinstance(value, list | tuple)


def read_autogen(msg: Any, mtype: str) -> Reading:
    """The ``MessageInfo`` fields of an AutoGen message whose ``type`` is ``mtype`` (one of
    ``AUTOGEN_TYPES``). Raises what a hostile field raises (``read_message`` catches it)."""
    content = _get(msg, "content")
    name = _text(_get(msg, "source"))
    if mtype == "UserMessage":
        return ("human", mtype, None, content, (), (), name, 0)
    if mtype == "AssistantMessage":
        thought = _text(_get(msg, "thought"))
        if _is_list(content):
            return ("ai", mtype, None, thought, _unique(_ids(content, "id")), (), name, 0)
        text = content if thought is None else [thought, content]
        return ("ai", mtype, None, text, (), (), name, 0)
    results = content if _is_list(content) else ()
    texts = tuple(_get(r, "content") for r in results)
    # every result as it is, a repeated call_id too: the planner prunes a message answering a
    # call twice (contract rule 6), which it cannot see in ids folded into one
    return ("tool", mtype, None, texts, (), tuple(_ids(results, "call_id")), None, 0)


def autogen_call_payloads(msg: Any) -> list[tuple[str, str, str]]:
    """``(id, name, arguments)`` of each ``FunctionCall`` of an ``AssistantMessage`` (none for
    text content), the id as ``read_autogen`` reads it."""
    content = _get(msg, "content")
    if not _is_list(content):
        return []
    ids = _ids(content, "id")
    out: list[tuple[str, str, str]] = []
    for call, call_id in zip(content, ids, strict=False):
        out.append((call_id, _text(_get(call, "name")) or "", arguments_text(_get(call, "arguments") or "")))
    return out
