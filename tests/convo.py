"""Build one conversation in every supported message shape, from a compact spec.

A spec is a list of tuples:
    ("system", id) | ("human", id) | ("ai", id) | ("call", id, [call_ids]) | ("tool", id, call_id)
    | ("unknown", id) | ("compaction", id)
A compaction is the provider's compaction of what precedes it: a Responses ``compaction`` item, an
assistant message holding an Anthropic ``compaction`` block (``compaction_block``; the shapes
without compactions of their own, Gemini and Bedrock, carry the Anthropic dict).
A tool message answering several calls, ("tool", id, [call_ids]), exists only in the shapes that
hold results as blocks of a user message (Anthropic, Bedrock): ``MULTI_RESULT_FORMATS``.
Each builder returns the caller-visible messages; ``ids(messages)`` reads the ids back through
the public adapter (or, for shapes without message ids, Gemini and Bedrock, from the text
``message <id> xxx...`` each message carries) so tests can state exact expected ids for every
shape. In the Responses shape a call step with several calls is one ``function_call`` item per
call: the first has the step's id, the others ``<id>+<k>``, which ``ids`` leaves out (as it does
reasoning items, ``<id>+r``), so the expected ids are the same for every shape.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from agentstate_reducer import read_message

Spec = list[tuple[Any, ...]]


def _text(mid: str) -> str:
    return f"message {mid} " + "x" * 20


def compaction_block(mid: str) -> dict[str, Any]:
    """An Anthropic ``compaction`` block as the API returns it (``BetaCompactionBlockParam``)."""
    return {"type": "compaction", "content": "summary of what came before " + mid}


def compaction_message(mid: str) -> dict[str, Any]:
    """An assistant message holding a compaction block, in the Anthropic dict shape."""
    text = {"type": "text", "text": _text(mid)}
    return {"role": "assistant", "id": mid, "content": [compaction_block(mid), text]}


def langchain_dicts(spec: Spec) -> list[Any]:
    out: list[Any] = []
    for kind, mid, *rest in spec:
        if kind == "compaction":
            out.append({"type": "ai", "content": [compaction_block(mid)], "id": mid})
        elif kind == "call":
            calls = [{"name": "lookup", "args": {"q": c}, "id": c, "type": "tool_call"} for c in rest[0]]
            out.append({"type": "ai", "content": "", "id": mid, "tool_calls": calls})
        elif kind == "tool":
            out.append({"type": "tool", "content": _text(mid), "id": mid, "tool_call_id": rest[0]})
        elif kind == "unknown":
            out.append({"type": "critic", "content": _text(mid), "id": mid})
        else:
            out.append({"type": kind, "content": _text(mid), "id": mid})
    return out


_OPENAI_ROLES = {"system": "system", "human": "user", "ai": "assistant", "unknown": "critic"}


def openai_dicts(spec: Spec) -> list[Any]:
    out: list[Any] = []
    for kind, mid, *rest in spec:
        if kind == "compaction":
            out.append({"role": "assistant", "content": [compaction_block(mid)], "id": mid})
        elif kind == "call":
            calls = [
                {"id": c, "type": "function", "function": {"name": "lookup", "arguments": f'{{"q": "{c}"}}'}}
                for c in rest[0]
            ]
            out.append({"role": "assistant", "content": None, "id": mid, "tool_calls": calls})
        elif kind == "tool":
            out.append({"role": "tool", "content": _text(mid), "id": mid, "tool_call_id": rest[0]})
        else:
            msg: dict[str, Any] = {"role": _OPENAI_ROLES[kind], "content": _text(mid), "id": mid}
            if kind == "ai":
                msg["tool_calls"] = None  # common in OpenAI dumps
            out.append(msg)
    return out


def anthropic_dicts(spec: Spec) -> list[Any]:
    """Anthropic content blocks: tool_use in assistant content, tool_result in user content."""
    out: list[Any] = []
    for kind, mid, *rest in spec:
        if kind == "compaction":
            out.append(compaction_message(mid))
        elif kind == "call":
            blocks = [{"type": "tool_use", "id": c, "name": "lookup", "input": {"q": c}} for c in rest[0]]
            out.append({"role": "assistant", "id": mid, "content": [{"type": "text", "text": "ok"}, *blocks]})
        elif kind == "tool":
            answers = rest[0] if isinstance(rest[0], list) else [rest[0]]
            blocks = [{"type": "tool_result", "tool_use_id": c, "content": _text(mid)} for c in answers]
            out.append({"role": "user", "id": mid, "content": blocks})
        else:
            out.append(
                {"role": _OPENAI_ROLES[kind], "id": mid, "content": [{"type": "text", "text": _text(mid)}]}
            )
    return out


def langchain_objects(spec: Spec) -> list[Any]:
    from langchain_core.messages import AIMessage, ChatMessage, HumanMessage, SystemMessage, ToolMessage

    out: list[Any] = []
    for kind, mid, *rest in spec:
        if kind == "compaction":
            out.append(AIMessage(content=[compaction_block(mid), {"type": "text", "text": "ok"}], id=mid))
        elif kind == "call":
            calls = [{"name": "lookup", "args": {"q": c}, "id": c} for c in rest[0]]
            out.append(AIMessage(content="", id=mid, tool_calls=calls))
        elif kind == "tool":
            out.append(ToolMessage(content=_text(mid), id=mid, tool_call_id=rest[0]))
        elif kind == "system":
            out.append(SystemMessage(content=_text(mid), id=mid))
        elif kind == "human":
            out.append(HumanMessage(content=_text(mid), id=mid))
        elif kind == "ai":
            out.append(AIMessage(content=_text(mid), id=mid))
        else:
            out.append(ChatMessage(role="critic", content=_text(mid), id=mid))
    return out


def _responses(spec: Spec, reasoning: bool) -> list[Any]:
    out: list[Any] = []
    for kind, mid, *rest in spec:
        if reasoning and kind in ("call", "ai"):
            out.append(
                {
                    "type": "reasoning",
                    "id": f"{mid}+r",
                    "summary": [{"type": "summary_text", "text": "thinking about " + mid}],
                    "encrypted_content": "gAAAA" + "Z" * 400,
                }
            )
        if kind == "compaction":
            out.append({"type": "compaction", "id": mid, "encrypted_content": "gAAAA" + "C" * 400})
        elif kind == "call":
            for k, c in enumerate(rest[0]):
                out.append(
                    {
                        "type": "function_call",
                        "id": mid if k == 0 else f"{mid}+{k}",
                        "call_id": c,
                        "name": "lookup",
                        "arguments": f'{{"q": "{c}"}}',
                        "status": "completed",
                    }
                )
        elif kind == "tool":
            out.append({"type": "function_call_output", "id": mid, "call_id": rest[0], "output": _text(mid)})
        elif kind == "ai":
            text = {"type": "output_text", "text": _text(mid), "annotations": []}
            out.append({"type": "message", "role": "assistant", "id": mid, "content": [text]})
        else:
            role = {"system": "developer", "human": "user", "unknown": "critic"}[kind]
            text = {"type": "input_text", "text": _text(mid)}
            out.append({"type": "message", "role": role, "id": mid, "content": [text]})
    return out


def responses_items(spec: Spec) -> list[Any]:
    """OpenAI Responses API items, as the Responses API and the OpenAI Agents SDK keep them."""
    return _responses(spec, reasoning=False)


def responses_items_reasoning(spec: Spec) -> list[Any]:
    """Responses items of a reasoning model: a ``reasoning`` item before every model turn."""
    return _responses(spec, reasoning=True)


def gemini_dicts(spec: Spec) -> list[Any]:
    """Gemini contents as snake_case dicts, calls without ids: responses answer by name and order."""
    out: list[Any] = []
    for kind, mid, *rest in spec:
        if kind == "compaction":
            out.append(compaction_message(mid))
        elif kind == "call":
            calls = [{"function_call": {"name": f"lookup_{c}", "args": {"q": c}}} for c in rest[0]]
            out.append({"role": "model", "parts": [{"text": _text(mid)}, *calls]})
        elif kind == "tool":
            response = {"name": f"lookup_{rest[0]}", "response": {"result": _text(mid)}}
            out.append({"role": "user", "parts": [{"function_response": response}]})
        else:
            role = {"system": "system", "human": "user", "ai": "model", "unknown": "critic"}[kind]
            out.append({"role": role, "parts": [{"text": _text(mid)}]})
    return out


def gemini_camel_dicts(spec: Spec) -> list[Any]:
    """Gemini contents as camelCase dicts (the REST API's JSON), calls with ids."""
    out: list[Any] = []
    for kind, mid, *rest in spec:
        if kind == "compaction":
            out.append(compaction_message(mid))
        elif kind == "call":
            calls = [{"functionCall": {"id": c, "name": "lookup", "args": {"q": c}}} for c in rest[0]]
            sig = {"thoughtSignature": "c2lnbmF0dXJl" * 20}
            out.append({"role": "model", "parts": [{"text": _text(mid)}, {**calls[0], **sig}, *calls[1:]]})
        elif kind == "tool":
            response = {"id": rest[0], "name": "lookup", "response": {"result": _text(mid)}}
            out.append({"role": "user", "parts": [{"functionResponse": response}]})
        else:
            role = {"system": "system", "human": "user", "ai": "model", "unknown": "critic"}[kind]
            out.append({"role": role, "parts": [{"text": _text(mid)}]})
    return out


def gemini_objects(spec: Spec) -> list[Any]:
    """``google-genai`` ``types.Content`` objects, calls with ids."""
    from google.genai import types

    out: list[Any] = []
    for kind, mid, *rest in spec:
        if kind == "compaction":
            out.append(compaction_message(mid))
        elif kind == "call":
            calls = [
                types.Part(function_call=types.FunctionCall(id=c, name="lookup", args={"q": c}))
                for c in rest[0]
            ]
            out.append(types.Content(role="model", parts=[types.Part(text=_text(mid)), *calls]))
        elif kind == "tool":
            response = types.FunctionResponse(id=rest[0], name="lookup", response={"result": _text(mid)})
            out.append(types.Content(role="user", parts=[types.Part(function_response=response)]))
        else:
            role = {"system": "system", "human": "user", "ai": "model", "unknown": "critic"}[kind]
            out.append(types.Content(role=role, parts=[types.Part(text=_text(mid))]))
    return out


def bedrock_dicts(spec: Spec) -> list[Any]:
    """Bedrock Converse messages: toolUse blocks in assistant content, toolResult blocks in user content."""
    out: list[Any] = []
    for kind, mid, *rest in spec:
        if kind == "compaction":
            out.append(compaction_message(mid))
        elif kind == "call":
            uses = [{"toolUse": {"toolUseId": c, "name": "lookup", "input": {"q": c}}} for c in rest[0]]
            out.append({"role": "assistant", "content": [{"text": _text(mid)}, *uses]})
        elif kind == "tool":
            answers = rest[0] if isinstance(rest[0], list) else [rest[0]]
            results = [
                {"toolResult": {"toolUseId": c, "content": [{"text": _text(mid)}], "status": "success"}}
                for c in answers
            ]
            out.append({"role": "user", "content": results})
        else:
            role = {"system": "system", "human": "user", "ai": "assistant", "unknown": "critic"}[kind]
            out.append({"role": role, "content": [{"text": _text(mid)}]})
    return out


def anthropic_objects(spec: Spec) -> list[Any]:
    """Anthropic SDK ``Message`` objects as ``client.messages.create`` returns them (thinking,
    text and ``ToolUseBlock`` objects), user messages and tool results as the dicts one sends."""
    from anthropic.types import Message, TextBlock, ThinkingBlock, ToolUseBlock, Usage

    def message(mid: str, blocks: list[Any], stop: str) -> Message:
        return Message(
            id=mid,
            type="message",
            role="assistant",
            model="claude-test",
            content=blocks,
            stop_reason=stop,  # type: ignore[arg-type]
            stop_sequence=None,
            usage=Usage(input_tokens=10, output_tokens=10),
        )

    out: list[Any] = []
    for kind, mid, *rest in spec:
        if kind == "compaction":
            out.append(beta_compaction_message(mid))
        elif kind == "call":
            thinking = ThinkingBlock(type="thinking", thinking="plan " + mid, signature="EqQB" + "s" * 300)
            uses = [ToolUseBlock(type="tool_use", id=c, name="lookup", input={"q": c}) for c in rest[0]]
            out.append(message(mid, [thinking, TextBlock(type="text", text=_text(mid)), *uses], "tool_use"))
        elif kind == "ai":
            out.append(message(mid, [TextBlock(type="text", text=_text(mid))], "end_turn"))
        elif kind == "tool":
            answers = rest[0] if isinstance(rest[0], list) else [rest[0]]
            blocks = [{"type": "tool_result", "tool_use_id": c, "content": _text(mid)} for c in answers]
            out.append({"role": "user", "id": mid, "content": blocks})
        else:
            out.append(
                {"role": _OPENAI_ROLES[kind], "id": mid, "content": [{"type": "text", "text": _text(mid)}]}
            )
    return out


def beta_compaction_message(mid: str) -> Any:
    """A ``BetaMessage`` as ``client.beta.messages.create`` returns it when it compacted: a
    ``BetaCompactionBlock`` and the text after it."""
    from anthropic.types.beta import BetaCompactionBlock, BetaMessage, BetaTextBlock, BetaUsage

    block = BetaCompactionBlock(type="compaction", content="summary of what came before " + mid)
    return BetaMessage(
        id=mid,
        type="message",
        role="assistant",
        model="claude-test",
        content=[block, BetaTextBlock(type="text", text=_text(mid))],
        stop_reason="end_turn",
        stop_sequence=None,
        usage=BetaUsage(input_tokens=10, output_tokens=10),
    )


#: the shapes every part of the package supports (the summary injected in their own shape too)
BUILDERS: dict[str, Callable[[Spec], list[Any]]] = {
    "langchain_dict": langchain_dicts,
    "openai_dict": openai_dicts,
    "anthropic_dict": anthropic_dicts,
    "langchain_object": langchain_objects,
}

#: the provider SDK shapes (Gemini and Bedrock messages carry no id: ``ids`` reads their marker)
PROVIDER_BUILDERS: dict[str, Callable[[Spec], list[Any]]] = {
    "responses_items": responses_items,
    "gemini_dicts": gemini_dicts,
    "gemini_camel_dicts": gemini_camel_dicts,
    "gemini_objects": gemini_objects,
    "bedrock_dicts": bedrock_dicts,
    "anthropic_objects": anthropic_objects,
}

#: every shape the pruning contract is tested on
SHAPES: dict[str, Callable[[Spec], list[Any]]] = {**BUILDERS, **PROVIDER_BUILDERS}

#: what the property tests generate: every shape, and Responses items with reasoning items (their
#: item counts differ from the spec's, so the exact-count contract tests do not use them)
PROPERTY_BUILDERS: dict[str, Callable[[Spec], list[Any]]] = {
    **SHAPES,
    "responses_items_reasoning": responses_items_reasoning,
}

#: the shapes LangGraph's ``add_messages`` state accepts (the others live in provider SDK histories)
LANGGRAPH_FORMATS = ["langchain_dict", "openai_dict", "anthropic_dict", "langchain_object"]
#: shapes whose call step with several calls is several messages (so counts differ from the spec's)
SPLIT_CALL_FORMATS = frozenset({"responses_items"})

#: the shapes in which one message can answer several calls
MULTI_RESULT_FORMATS = frozenset({"anthropic_dict", "anthropic_objects", "bedrock_dicts"})

_MARKER = re.compile(r"message (\S+) x{20}")


def ids(messages: list[Any]) -> list[str | None]:
    """The id of each message (its marker text when it has none); the extra items of a
    Responses step (``<id>+...``) are left out."""
    out: list[str | None] = []
    for m in messages:
        mid = read_message(m).id
        if mid is None:
            found = _MARKER.search(repr(m))
            mid = found.group(1) if found else None
        if mid is not None and "+" in mid:
            continue
        out.append(mid)
    return out
