"""One message at a time: the reference reading of every supported shape.

Supported shapes:

* dicts with ``role`` or ``type``: LangChain (``human``/``ai``/``system``/``tool``), OpenAI
  (``user``/``assistant``/``system``/``developer``/``tool``, ``tool_calls=[{"id", "type":
  "function", "function": {...}}]``, ``tool_calls: None``), agent frameworks (``agent``),
  LangChain's serialized ``{"type": "ai", "data": {...}}`` and ``dumpd`` constructor form;
* Anthropic content blocks: ``tool_use`` blocks in assistant content, ``tool_result`` blocks in
  user content (a user message with tool_result blocks answers tool calls: it is a tool result,
  not a human turn);
* LangChain objects, including ``*MessageChunk``, ``ChatMessage(role=...)`` and ``RemoveMessage``;
* any object with ``.type`` or ``.role`` (OpenAI SDK objects);
* OpenAI Responses API items (dicts or the ``openai`` SDK's objects): ``message`` items by role;
  the calls of the openai-agents pairing table (``function_call``, ``custom_tool_call``,
  ``computer_call``, ``shell_call``, ``local_shell_call``, ``apply_patch_call``,
  ``tool_search_call``, ``program``) answered by their ``*_output`` item with the same ``call_id``;
  ``mcp_approval_request`` answered by the ``mcp_approval_response`` naming it in
  ``approval_request_id``; hosted calls that carry their own result (``mcp_call``,
  ``web_search_call``, ...) and ``item_reference``: AI items without calls; ``reasoning``: an AI
  item that must be sent with the AI item after it; ``compaction`` (and the Agents SDK's
  ``compaction_item``): an AI item without calls that holds a compaction (``MessageInfo.compaction``);
  an item of another type without ``role`` and ``content``: an AI item (logged once per type);
* Anthropic SDK ``Message`` objects (``type="message"``, ``role="assistant"``) and block objects;
  an assistant message holding a ``compaction`` block (``BetaCompactionBlock`` or its dict) holds a
  compaction (``MessageInfo.compaction``);
* Gemini contents (``{"role": "user"|"model", "parts": [...]}`` in snake_case or camelCase, and
  ``google-genai`` ``Content`` objects): a model content's ``function_call`` parts are its calls,
  a user content with ``function_response`` parts is a tool result; a part without ``id``
  answers by name and order (``"<name>#<k>"``: the k-th call or response of that name in its
  content);
* Bedrock Converse: ``toolUse`` blocks in assistant content, ``toolResult`` blocks in user content,
  paired by ``toolUseId``;
* AutoGen's ``autogen_core.models`` messages and their dumps (``messages.autogen``).
* Pydantic AI ``ModelRequest``/``ModelResponse`` (``messages.pydantic_ai``).
* Microsoft Agent Framework ``Message`` objects and dumps (``messages.agent_framework``).
* smolagents memory steps (``TaskStep``, ``ActionStep``, ...: ``messages.smolagents``).
* LlamaIndex ``ChatMessage`` (``messages.llama_index``).

The items of one Responses model turn travel together: every AI item of that shape (a call, an
assistant ``message``, a reasoning item, a hosted call) *leads* (``MessageInfo.leads``): the
planner keeps it in one unit with the AI item right after it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import repeat
from typing import Any, Final, Literal, NamedTuple

from agentstate_reducer.messages.agent_framework import (
    af_contents,
    agent_framework_call_payloads,
    read_agent_framework,
)
from agentstate_reducer.messages.autogen import AUTOGEN_TYPES, autogen_call_payloads, read_autogen
from agentstate_reducer.messages.jsontext import arguments_text
from agentstate_reducer.messages.llama_index import (
    is_llama_index_message,
    llama_index_call_payloads,
    read_llama_index,
)
from agentstate_reducer.messages.pydantic_ai import read_model_message
from agentstate_reducer.messages.smolagents import read_step
from agentstate_reducer.messages.usage import carried_usage

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
CLASS_ROLES: Final[Mapping[str, str]] = {
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

MISSING: Final = object()

logger = logging.getLogger("agentstate_reducer.messages")

#: ``MessageInfo.leads``: kept in one unit with the AI message right after it, when there is one
LEADS_JOIN: Final = 1
#: ``MessageInfo.leads``: as ``LEADS_JOIN``, and cannot be sent without it (a reasoning item): a
#: conversation message after it that is not an AI message makes it unsendable
LEADS_REQUIRED: Final = 2

#: Responses API call item types and the output item type answering each (by ``call_id``): the
#: pairing table of openai-agents (``agents/run_internal/items.py``).
RESPONSES_CALLS: Final[Mapping[str, str]] = {
    "function_call": "function_call_output",
    "custom_tool_call": "custom_tool_call_output",
    "computer_call": "computer_call_output",
    "shell_call": "shell_call_output",
    "local_shell_call": "local_shell_call_output",
    "apply_patch_call": "apply_patch_call_output",
    "tool_search_call": "tool_search_output",
    "program": "program_output",
}
RESPONSES_OUTPUTS: Final = frozenset(RESPONSES_CALLS.values())
#: Responses items the model makes that hold their own result (or refer to a stored item)
RESPONSES_SELF_CONTAINED: Final = frozenset(
    {
        "mcp_call",
        "mcp_list_tools",
        "web_search_call",
        "file_search_call",
        "code_interpreter_call",
        "image_generation_call",
        "hosted_tool_call",
        "item_reference",
    }
)
#: Responses items holding a compaction: the item, and the Agents SDK's run item wrapping one
COMPACTION_TYPES: Final = frozenset({"compaction", "compaction_item"})
_logged_item_types: set[str] = set()


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
    #: ``LEADS_JOIN`` / ``LEADS_REQUIRED``: goes with the AI message after it (Responses items)
    leads: int = 0
    #: it holds a provider's compaction of everything before it (an OpenAI Responses
    #: ``compaction`` item, an AI message with an Anthropic ``compaction`` block): always an AI
    #: message, sent back verbatim
    compaction: bool = False


def infos_from_columns(
    kind: Iterable[Kind | None],
    role: Iterable[str | None],
    id: Iterable[str | None],
    content: Iterable[Any],
    call_ids: Iterable[tuple[str, ...]],
    result_ids: Iterable[tuple[str, ...]],
    name: Iterable[str | None],
) -> list[MessageInfo]:
    """``[MessageInfo(*fields) for fields in zip(kind, role, ...)]``, one iterable per field,
    built at C speed (``MessageInfo._make`` and the constructor are Python code). The shortest
    iterable ends the list (a field may be ``repeat(value)``); a row whose kind is None is junk
    the caller replaces."""
    # in MessageInfo's field order
    rows = zip(kind, role, id, content, call_ids, result_ids, name, repeat(0), repeat(False), strict=False)
    return list(map(tuple.__new__, repeat(MessageInfo), rows))


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
    if mtype == "message":  # Responses message items, Anthropic Message objects: by their role
        role = getattr(msg, "role", None)
        return msg, role if isinstance(role, str) else None
    if isinstance(mtype, str):
        return msg, _class_role(mtype, msg)
    role = getattr(msg, "role", None)
    return msg, role if isinstance(role, str) else None


def _class_role(name: str, body: Any) -> str | None:
    """Map a LangChain ``type`` or class name to a role; ``chat`` messages carry their own role."""
    if name in ("chat", "ChatMessage", "ChatMessageChunk"):
        role = _get(body, "role")
        return role if isinstance(role, str) else None
    return CLASS_ROLES.get(name, name)


def str_id(value: Any) -> str | None:
    """A message id: a non-empty str, an int as its text, else None (no id)."""
    if type(value) is str or isinstance(value, str):
        return value or None
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return None


def call_id(value: Any) -> str | None:
    """A tool call's id, or the id a result answers: a str, the empty one included, as an exact
    ``str``; an int as its text; None for anything else (no id).

    An empty id is an id: LangChain and OpenAI send a call named ``""`` and its result naming
    ``""``, so the two pair like any others (a call and its result read alike). A subclass of
    ``str`` is read as its text, so its own ``==`` or hash never decides a pairing.
    """
    if type(value) is str:
        return value
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return None


def tool_call_ids(get: Callable[..., Any], content: Any) -> tuple[str, ...]:
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
                cid = call_id(_get(call, "id"))
                if cid is not None and cid not in ids:
                    ids.append(cid)
    if _seq(content):
        seen: dict[str, int] = {}
        for block in content:
            btype = _get(block, "type")
            if btype == "tool_use":
                cid = call_id(_get(block, "id"))
            elif btype is not None:
                continue
            elif type(block) is dict and "toolUse" in block:  # Bedrock Converse
                cid = call_id(_get(block["toolUse"], "toolUseId"))
            else:
                call = _part(block, "function_call", "functionCall")  # Gemini
                if call is None:
                    continue
                cid = _part_id(call, seen)
            if cid is not None and cid not in ids:
                ids.append(cid)
    return tuple(ids)


def has_compaction_block(content: Sequence[Any]) -> bool:
    """True when a list of content blocks holds an Anthropic ``compaction`` block (a dict, a
    ``BetaCompactionBlock``), or LangChain's ``non_standard`` block wrapping one."""
    for block in content:
        btype = _get(block, "type")
        if btype == "compaction":
            return True
        if btype == "non_standard" and _get(_get(block, "value"), "type") == "compaction":
            return True
    return False


def _part(block: Any, snake: str, camel: str) -> Any:
    """A Gemini part's ``function_call`` / ``function_response`` (either spelling in a dict)."""
    if type(block) is dict or isinstance(block, Mapping):
        value = block.get(snake)
        return block.get(camel) if value is None else value
    return getattr(block, snake, None)


def _part_id(call: Any, seen: dict[str, int]) -> str | None:
    """A Gemini call's or response's id: its ``id``, else ``"<name>#<k>"`` for the k-th one of
    that name in its content, so responses without ids answer calls by name and order. An empty
    ``id`` is none here, on calls and responses alike: Gemini leaves ``id`` unset (``None``, or
    ``""`` in a proto dump) and pairs by name and order."""
    own = str_id(_get(call, "id"))
    if own is not None:
        return own
    name = _get(call, "name")
    name = name if isinstance(name, str) else ""
    k = seen.get(name, 0)
    seen[name] = k + 1
    return f"{name}#{k}"


def _tool_result_ids(content: Any) -> tuple[str, ...]:
    """Ids answered by the result blocks of a user message: Anthropic ``tool_result``, Bedrock
    ``toolResult``, Gemini ``function_response`` parts."""
    if not _seq(content):
        return ()
    ids: list[str] = []
    seen: dict[str, int] = {}
    for block in content:
        btype = _get(block, "type")
        if btype == "tool_result":
            use_id = call_id(_get(block, "tool_use_id"))
        elif btype is not None:
            continue
        elif type(block) is dict and "toolResult" in block:
            use_id = call_id(_get(block["toolResult"], "toolUseId"))
        else:
            response = _part(block, "function_response", "functionResponse")
            if response is None:
                continue
            use_id = _part_id(response, seen)
        if use_id is not None:
            ids.append(use_id)
    return tuple(ids)


def _responses_item(get: Callable[..., Any], mtype: str, msg_id: str | None) -> MessageInfo | None:
    """A Responses API item without a role, or None when ``mtype`` is no such item (a message of
    an unknown role: it has content)."""
    if mtype in RESPONSES_CALLS:
        made = call_id(get("call_id"))
        if mtype in ("function_call", "custom_tool_call"):
            content = None  # name and arguments are read by tool_call_payloads
        else:
            content = get("action") or get("operation") or get("arguments")
        calls = (made,) if made is not None else ()  # an anonymous tool_search_call
        return MessageInfo("ai", None, msg_id, content, calls, (), None, LEADS_JOIN)
    if mtype in RESPONSES_OUTPUTS or mtype == "mcp_approval_response":
        answered = call_id(get("call_id") if mtype != "mcp_approval_response" else get("approval_request_id"))
        content = get("output")
        if answered is None:  # an anonymous tool_search_output: the call before it leads to it
            return MessageInfo("ai", None, msg_id, content, (), (), None, LEADS_JOIN)
        return MessageInfo("tool", None, msg_id, content, (), (answered,), None)
    if mtype == "mcp_approval_request":
        request = call_id(get("id"))  # answered by the response naming it, "" included
        calls = (request,) if request is not None else ()
        return MessageInfo("ai", None, msg_id, get("arguments"), calls, (), None, LEADS_JOIN)
    if mtype == "reasoning":
        content = [get("summary"), get("content")]  # never encrypted_content
        return MessageInfo("ai", None, msg_id, content, (), (), None, LEADS_REQUIRED)
    if mtype in COMPACTION_TYPES:
        # opaque (encrypted_content): no content to count or summarize
        return MessageInfo("ai", None, msg_id, None, (), (), None, 0, True)
    if mtype in RESPONSES_SELF_CONTAINED:
        return MessageInfo("ai", None, msg_id, None, (), (), None, LEADS_JOIN)
    if get("content") is not None:
        return None
    if mtype not in _logged_item_types:
        _logged_item_types.add(mtype)
        logger.debug("item of unknown type %r read as an AI item kept with the AI item after it", mtype)
    return MessageInfo("ai", None, msg_id, None, (), (), None, LEADS_JOIN)


def read_message(msg: Any) -> MessageInfo:
    """Read one message of any supported shape. Never raises, never mutates ``msg``.

    A message with no recognisable role, or a role this package does not know, is ``unknown``:
    the reducer keeps such messages and never prunes them.
    """
    try:
        body, raw_role = _unwrap(msg)
        if raw_role in AUTOGEN_TYPES:  # autogen_core.models messages and their dumps
            return MessageInfo._make((*read_autogen(body, raw_role), False))
        if raw_role is not None and (af := af_contents(body)) is not None:  # Agent Framework
            return MessageInfo._make((*read_agent_framework(body, af), False))
        if is_llama_index_message(body):  # LlamaIndex ChatMessage: calls and results in fields of its own
            return MessageInfo._make((*read_llama_index(body), False))
        if raw_role is None and (pai := read_model_message(body)) is not None:  # Pydantic AI
            calls, results = pai.call_ids, pai.result_ids
            return MessageInfo(pai.kind, None, None, pai.content, calls, results, compaction=pai.compaction)
        if raw_role is None and (step := read_step(body)) is not None:  # smolagents memory steps
            return MessageInfo._make((*step, False))
        if type(body) is dict or isinstance(body, Mapping):
            get = body.get
        else:

            def get(key: str, default: Any = None) -> Any:
                return getattr(body, key, default)

        kind: Kind = ROLE_ALIASES.get(raw_role.lower(), "unknown") if raw_role else "unknown"
        content = blocks = get("content")
        msg_id = str_id(get("id"))
        if kind == "unknown" and raw_role is not None and get("role") is None:
            mtype = get("type")
            if isinstance(mtype, str):
                item = _responses_item(get, mtype, msg_id)
                if item is not None:
                    return item
        if content is None:
            parts = get("parts")  # Gemini
            if parts is not None:
                content = parts
        name = get("name")
        name = name if type(name) is str else None
        if kind == "ai":
            calls = tool_call_ids(get, content)
            # a Responses message item (an Anthropic Message object names its model)
            leads = LEADS_JOIN if get("type") == "message" and get("model") is None else 0
            compaction = blocks is not None and _seq(blocks) and has_compaction_block(blocks)
            return MessageInfo(kind, raw_role, msg_id, content, calls, (), name, leads, compaction)
        if kind == "tool":
            answered = call_id(get("tool_call_id"))
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


def read_usage(msg: Any) -> int | None:
    """The input tokens a provider reported for the request that produced ``msg`` (an AI
    message: LangChain ``usage_metadata`` or ``response_metadata`` usage, also in its serialized
    forms; Pydantic AI ``ModelResponse.usage``; Google ADK ``usage_metadata``; smolagents
    ``token_usage``; Agno ``metrics``), or None when it carries no usable figure
    (``messages.usage``). Never raises, never mutates ``msg``."""
    try:
        body, _ = _unwrap(msg)
        return carried_usage(msg, body)
    except Exception:  # a hostile __getattr__ or property must not break a reduction
        return None


def tool_call_payloads(msg: Any) -> list[tuple[str, str, str]]:
    """``(id, name, arguments)`` of every tool call a message makes, for token counting.

    Never raises: a field that cannot be read (a property or ``__getattr__`` that raises, a
    ``__str__`` that raises) counts as absent, a call list whose iteration fails gives the calls
    read before, and the other fields and calls are read as usual.
    """
    out: list[tuple[str, str, str]] = []
    try:
        body, raw_role = _unwrap(msg)
        if raw_role in AUTOGEN_TYPES:
            return autogen_call_payloads(body)
        if raw_role is not None and (af := af_contents(body)) is not None:
            return agent_framework_call_payloads(af)
        if is_llama_index_message(body):
            return llama_index_call_payloads(body)
        if _read(body, "type") in ("function_call", "custom_tool_call") and _read(body, "role") is None:
            args = _read(body, "arguments", MISSING)
            if args is MISSING:
                args = _read(body, "input", "")
            call_id, name = _str_or_empty(_read(body, "call_id")), _str_or_empty(_read(body, "name"))
            return [(call_id, name, arguments_text(args))]
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
    args = _read(src, "arguments", MISSING)
    if args is MISSING:
        args = _read(src, "args", "")
    return _str_or_empty(_read(call, "id")), _str_or_empty(_read(src, "name")), arguments_text(args)


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


def is_message_like(value: Any) -> bool:
    """True for one message (as opposed to a list of messages): a mapping or an object with a role."""
    if isinstance(value, Mapping):
        return True
    if isinstance(value, str | bytes) or isinstance(value, Sequence):
        return False
    return hasattr(value, "type") or hasattr(value, "role") or hasattr(value, "content")


#: The kinds the planner never prunes.
PINNED_KINDS: Final = frozenset({"system", "unknown", "remove"})
