"""Token counting of the provider SDK shapes: Responses items, Gemini contents (dicts and
google-genai objects), Bedrock Converse messages, Anthropic SDK Message objects.

Each expected count is written out: ``MESSAGE_OVERHEAD`` plus ``ceil(len / 4)`` of each counted
piece plus ``IMAGE_TOKENS`` per image or file. Encrypted content, signatures and base64 payloads
are shown not to be counted by their length: the count is the same for a short and a long one.
"""

from __future__ import annotations

import base64
import math
from typing import Any

from agentstate_reducer.tokens import IMAGE_TOKENS, MESSAGE_OVERHEAD, heuristic_counter


def count(message: Any) -> int:
    return heuristic_counter(cache_size=0)(message)


def h(*texts: str) -> int:
    return sum(math.ceil(len(t) / 4) for t in texts)


BIG_B64 = base64.b64encode(b"\x89PNG" + b"\0" * 300_000).decode()


# --- OpenAI Responses items ---------------------------------------------------------------------


def test_responses_function_call_counts_call_id_name_and_arguments() -> None:
    item = {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_1",
        "name": "lookup",
        "arguments": '{"q": "x"}',
    }
    assert count(item) == MESSAGE_OVERHEAD + h("call_1", "lookup", '{"q": "x"}')
    longer = {**item, "arguments": '{"q": "' + "y" * 400 + '"}'}
    assert count(longer) == count(item) + 100


def test_responses_output_with_an_image_counts_it_at_the_fixed_estimate() -> None:
    output = [
        {"type": "input_text", "text": "the chart"},
        {"type": "input_image", "image_url": "data:image/png;base64," + BIG_B64},
    ]
    item = {"type": "function_call_output", "call_id": "call_1", "output": output}
    assert count(item) == MESSAGE_OVERHEAD + h("the chart", "call_1") + IMAGE_TOKENS


def test_responses_reasoning_counts_its_summary_never_the_encrypted_content() -> None:
    def reasoning(encrypted: str) -> dict[str, Any]:
        return {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [{"type": "summary_text", "text": "weighing the options"}],
            "encrypted_content": encrypted,
        }

    assert count(reasoning("gAAAA")) == MESSAGE_OVERHEAD + h("weighing the options")
    assert count(reasoning("gAAAA" + "Z" * 100_000)) == count(reasoning("gAAAA"))


def test_responses_sdk_objects_count_as_their_dicts() -> None:
    from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

    call = ResponseFunctionToolCall(
        type="function_call",
        id="fc_1",
        call_id="call_1",
        name="lookup",
        arguments='{"q": "x"}',
        status="completed",
    )
    assert count(call) == MESSAGE_OVERHEAD + h("call_1", "lookup", '{"q": "x"}')
    text = ResponseOutputText(type="output_text", text="the answer", annotations=[])
    message = ResponseOutputMessage(
        type="message", id="msg_1", role="assistant", status="completed", content=[text]
    )
    assert count(message) == MESSAGE_OVERHEAD + h("the answer")


# --- Gemini -------------------------------------------------------------------------------------


def test_gemini_dict_call_and_response_count_names_and_arguments() -> None:
    call = {"role": "model", "parts": [{"function_call": {"name": "lookup", "args": {"q": "x"}}}]}
    assert count(call) == MESSAGE_OVERHEAD + h("lookup", '{"q": "x"}')
    camel = {"role": "model", "parts": [{"functionCall": {"id": "c1", "name": "lookup", "args": {"q": "x"}}}]}
    assert count(camel) == MESSAGE_OVERHEAD + h("c1", "lookup", '{"q": "x"}')
    response = {
        "role": "user",
        "parts": [{"functionResponse": {"id": "c1", "name": "lookup", "response": {"result": "42"}}}],
    }
    assert count(response) == MESSAGE_OVERHEAD + h("c1", "lookup", '{"result": "42"}')


def test_gemini_media_and_thought_signatures_are_not_counted_by_length() -> None:
    def content(data: str, signature: str) -> dict[str, Any]:
        return {
            "role": "user",
            "parts": [
                {"text": "what is this", "thoughtSignature": signature},
                {"inlineData": {"mimeType": "image/png", "data": data}},
                {"file_data": {"mime_type": "application/pdf", "file_uri": "gs://b/report.pdf"}},
            ],
        }

    small = count(content("iVBO", "c2ln"))
    assert small == MESSAGE_OVERHEAD + h("what is this") + 2 * IMAGE_TOKENS
    assert count(content(BIG_B64, "c2ln" * 10_000)) == small


def test_gemini_objects_count_their_set_fields() -> None:
    from google.genai import types

    call = types.Content(
        role="model",
        parts=[
            types.Part(text="checking", thought_signature=b"\x01" * 5000),
            types.Part(function_call=types.FunctionCall(id="c1", name="lookup", args={"q": "x"})),
        ],
    )
    assert count(call) == MESSAGE_OVERHEAD + h("checking", "c1", "lookup", '{"q": "x"}')
    image = types.Content(
        role="user",
        parts=[
            types.Part(text="and this?"),
            types.Part(inline_data=types.Blob(mime_type="image/png", data=b"\0" * 200_000)),
        ],
    )
    assert count(image) == MESSAGE_OVERHEAD + h("and this?") + IMAGE_TOKENS


# --- Bedrock Converse ---------------------------------------------------------------------------


def test_bedrock_tool_use_result_image_and_reasoning() -> None:
    use = {
        "role": "assistant",
        "content": [{"toolUse": {"toolUseId": "t1", "name": "lookup", "input": {"q": "x"}}}],
    }
    assert count(use) == MESSAGE_OVERHEAD + h("t1", "lookup", '{"q": "x"}')
    result = {
        "role": "user",
        "content": [
            {
                "toolResult": {
                    "toolUseId": "t1",
                    "content": [
                        {"text": "found"},
                        {"image": {"format": "png", "source": {"bytes": b"\0" * 90_000}}},
                    ],
                    "status": "success",
                }
            }
        ],
    }
    assert count(result) == MESSAGE_OVERHEAD + h("t1", "found") + IMAGE_TOKENS

    def thought(signature: str) -> dict[str, Any]:
        text = {"text": "let me think", "signature": signature}
        return {
            "role": "assistant",
            "content": [{"reasoningContent": {"reasoningText": text}}, {"text": "ok"}],
        }

    assert count(thought("sig")) == MESSAGE_OVERHEAD + h("let me think", "ok")
    assert count(thought("sig" * 10_000)) == count(thought("sig"))
    redacted = {"role": "assistant", "content": [{"reasoningContent": {"redactedContent": b"\0" * 9000}}]}
    assert count(redacted) == MESSAGE_OVERHEAD


# --- Anthropic SDK objects ----------------------------------------------------------------------


def _message(blocks: list[Any]) -> Any:
    from anthropic.types import Message, Usage

    return Message(
        id="msg_1",
        type="message",
        role="assistant",
        model="claude-test",
        content=blocks,
        stop_reason="tool_use",
        stop_sequence=None,
        usage=Usage(input_tokens=1, output_tokens=1),
    )


def test_anthropic_message_objects_count_thinking_text_and_tool_input_not_signatures() -> None:
    from anthropic.types import RedactedThinkingBlock, TextBlock, ThinkingBlock, ToolUseBlock

    def message(signature: str, redacted: str) -> Any:
        return _message(
            [
                ThinkingBlock(type="thinking", thinking="plan the lookup", signature=signature),
                RedactedThinkingBlock(type="redacted_thinking", data=redacted),
                TextBlock(type="text", text="looking"),
                ToolUseBlock(type="tool_use", id="toolu_1", name="lookup", input={"q": "x"}),
            ]
        )

    short = count(message("EqQB", "EmwK"))
    assert short == MESSAGE_OVERHEAD + h("plan the lookup", "looking", "toolu_1", "lookup", '{"q": "x"}')
    assert count(message("EqQB" * 10_000, "EmwK" * 10_000)) == short


def test_anthropic_server_tool_use_counts_name_and_input() -> None:
    from anthropic.types import ServerToolUseBlock

    block = ServerToolUseBlock(
        type="server_tool_use", id="srvtoolu_1", name="web_search", input={"query": "x"}
    )
    assert count(_message([block])) == MESSAGE_OVERHEAD + h("web_search", '{"query": "x"}')
