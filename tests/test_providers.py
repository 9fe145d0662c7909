"""Each provider shape's own pairing rules, with exact ids, and long runs that stay bounded and
sendable at every turn: OpenAI Responses items (dicts and the openai SDK's objects), Gemini
contents, Bedrock Converse messages, Anthropic SDK Message objects."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentstate_reducer import MessageReducer, ReducerConfig, read_message
from agentstate_reducer._columns.bulk import pinned_indices, read_plain
from agentstate_reducer.messages import (
    LEADS_JOIN,
    LEADS_REQUIRED,
    PINNED_KINDS,
    snapshot,
    snapshots,
    tool_call_payloads,
)
from agentstate_reducer.messages.read import RESPONSES_CALLS
from agentstate_reducer.tokens import heuristic_counter
from tests.convo import PROPERTY_BUILDERS, Spec, ids
from tests.test_properties import violations


def rids(messages: list[Any]) -> list[str | None]:
    """Item ids as they are (``tests.convo.ids`` leaves out the extra items of a step)."""
    return [read_message(m).id for m in messages]


def valid(messages: list[Any]) -> bool:
    return violations([read_message(m) for m in messages]) == []


def user(mid: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "id": mid, "content": [{"type": "input_text", "text": mid}]}


def said(mid: str) -> dict[str, Any]:
    text = {"type": "output_text", "text": "answer " + mid, "annotations": []}
    return {"type": "message", "role": "assistant", "id": mid, "content": [text]}


def think(mid: str) -> dict[str, Any]:
    return {"type": "reasoning", "id": mid, "summary": [], "encrypted_content": "gAAAA" + "x" * 50}


def fcall(mid: str, call_id: str) -> dict[str, Any]:
    return {"type": "function_call", "id": mid, "call_id": call_id, "name": "lookup", "arguments": "{}"}


def fout(mid: str, call_id: str) -> dict[str, Any]:
    return {"type": "function_call_output", "id": mid, "call_id": call_id, "output": "result " + mid}


def reduce(messages: list[Any], **config: Any) -> tuple[list[str | None], list[str | None], Any]:
    out = MessageReducer(config=ReducerConfig(preserve_first=False, **config)).reduce(messages)
    assert valid(out.surviving)
    return rids(out.surviving), rids(out.pruned), out


# --- OpenAI Responses ---------------------------------------------------------------------------


def test_a_reasoning_item_is_kept_with_the_item_it_precedes() -> None:
    items = [user("h1"), think("rs1"), said("m1"), user("h2"), think("rs2"), said("m2")]
    # room for one message: the newest unit is the reasoning item and its message, kept whole
    kept, pruned, out = reduce(items, min_messages=1, max_messages=2, start_on_human=False)
    assert kept == ["h2", "rs2", "m2"]
    assert pruned == ["h1", "rs1", "m1"]
    assert out.stats.over_target is True


def test_parallel_calls_of_one_model_turn_are_one_unit() -> None:
    items = [
        user("h1"),
        think("rs1"),
        fcall("fc_a", "x"),
        fcall("fc_b", "y"),
        fout("out_x", "x"),
        fout("out_y", "y"),
        said("m1"),
    ]
    kept, pruned, _ = reduce(items, min_messages=4, max_messages=5, start_on_human=False)
    assert kept == ["h1", "m1"]  # fc_b with out_y alone would fit, but not without fc_a and rs1
    assert pruned == ["rs1", "fc_a", "fc_b", "out_x", "out_y"]
    kept, _, _ = reduce(items)
    assert kept == rids(items)


def test_a_reasoning_item_without_its_following_item_is_pruned() -> None:
    # an interrupted run: the model's reasoning was stored, its output never came
    items = [user("h1"), think("rs1"), user("h2"), said("m2")]
    kept, pruned, out = reduce(items)
    assert kept == ["h1", "h2", "m2"] and pruned == ["rs1"]
    assert out.stats.repaired and not out.stats.triggered
    # at the end it is pending (the run is still going), not broken
    kept, pruned, _ = reduce([user("h1"), think("rs1")])
    assert kept == ["h1", "rs1"] and pruned == []


def test_appending_a_user_message_after_a_reasoning_item_is_caught() -> None:
    reducer = MessageReducer(config=ReducerConfig(min_messages=50, max_messages=100, preserve_first=False))
    first = reducer.reduce([user("h1"), think("rs1")])
    assert rids(first.surviving) == ["h1", "rs1"]
    broken = reducer.reduce(first.surviving, [user("h2")])  # checked through the memo of the last output
    assert rids(broken.surviving) == ["h1", "h2"] and rids(broken.pruned) == ["rs1"]
    fine = reducer.reduce(first.surviving, [fcall("fc1", "x")])
    assert rids(fine.surviving) == ["h1", "rs1", "fc1"] and fine.pruned == []


def test_a_dangling_call_does_not_take_the_message_after_it_along() -> None:
    items = [user("h1"), fcall("fc1", "never"), said("m1"), user("h2"), said("m2")]
    kept, pruned, _ = reduce(items)
    assert kept == ["h1", "m1", "h2", "m2"] and pruned == ["fc1"]
    # with a reasoning item heading the model turn, the whole turn goes: its items cannot be sent
    # without the reasoning item, and the reasoning item not without them
    items = [user("h1"), think("rs1"), fcall("fc1", "never"), said("m1"), user("h2"), said("m2")]
    kept, pruned, _ = reduce(items)
    assert kept == ["h1", "h2", "m2"] and pruned == ["rs1", "fc1", "m1"]
    items = [
        user("h1"),
        think("rs1"),
        fcall("fc_a", "x"),
        fcall("fc_d", "never"),
        fcall("fc_b", "y"),
        fout("out_x", "x"),
        fout("out_y", "y"),
        said("m1"),
        user("h2"),
    ]
    kept, pruned, _ = reduce(items)
    assert kept == ["h1", "m1", "h2"]
    assert pruned == ["rs1", "fc_a", "fc_d", "fc_b", "out_x", "out_y"]


@pytest.mark.parametrize(("call_type", "output_type"), list(RESPONSES_CALLS.items()))
def test_every_call_type_of_the_pairing_table_pairs_by_call_id(call_type: str, output_type: str) -> None:
    call = {"type": call_type, "id": "c1", "call_id": "call_1", "status": "completed"}
    output = {"type": output_type, "id": "o1", "call_id": "call_1", "output": "done"}
    assert read_message(call)[:6] == ("ai", None, "c1", None, ("call_1",), ())
    assert read_message(output).kind == "tool" and read_message(output).result_ids == ("call_1",)
    kept, _, _ = reduce([user("h1"), call, output, said("m1")])
    assert kept == ["h1", "c1", "o1", "m1"]
    kept, pruned, _ = reduce([user("h1"), call, user("h2"), said("m2")])  # never answered
    assert kept == ["h1", "h2", "m2"] and pruned == ["c1"]
    kept, pruned, _ = reduce([user("h1"), output, said("m1")])  # an output without its call
    assert kept == ["h1", "m1"] and pruned == ["o1"]


def test_mcp_approvals_pair_by_approval_request_id_and_mcp_calls_hold_their_output() -> None:
    request = {
        "type": "mcp_approval_request",
        "id": "mcpr_1",
        "server_label": "s",
        "name": "f",
        "arguments": "{}",
    }
    response = {
        "type": "mcp_approval_response",
        "id": "ar_1",
        "approval_request_id": "mcpr_1",
        "approve": True,
    }
    mcp_call = {
        "type": "mcp_call",
        "id": "mcp_1",
        "server_label": "s",
        "name": "f",
        "arguments": "{}",
        "output": "ok",
    }
    items = [user("h1"), request, response, mcp_call, said("m1")]
    kept, _, _ = reduce(items)
    assert kept == ["h1", "mcpr_1", "ar_1", "mcp_1", "m1"]
    orphan = {**response, "id": "ar_2", "approval_request_id": "gone"}
    kept, pruned, _ = reduce([user("h1"), orphan, mcp_call, said("m1")])
    assert kept == ["h1", "mcp_1", "m1"] and pruned == ["ar_2"]
    kept, pruned, _ = reduce([user("h1"), request, user("h2")])
    assert kept == ["h1", "h2"] and pruned == ["mcpr_1"]


def test_the_newest_compaction_item_is_kept_and_an_older_one_is_pruned() -> None:
    older = {"type": "compaction", "id": "cmp_1", "encrypted_content": "gAAAA"}
    newest = {"type": "compaction", "id": "cmp_2", "encrypted_content": "gAAAA"}
    items = [older, user("h1"), said("m1"), newest, user("h2"), said("m2")]
    kept, pruned, _ = reduce(items, min_messages=3, max_messages=5)
    assert kept == ["cmp_2", "h2", "m2"] and pruned == ["cmp_1", "h1", "m1"]


def test_an_unknown_item_type_goes_with_the_item_after_it_and_is_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    future = {"type": "hologram_call", "id": "holo_1", "status": "completed"}
    items = [user("h1"), future, said("m1"), user("h2"), said("m2")]
    with caplog.at_level(logging.DEBUG, logger="agentstate_reducer.messages"):
        kept, pruned, _ = reduce(items, min_messages=2, max_messages=3)
        reduce(items, min_messages=2, max_messages=3)
    assert kept == ["h2", "m2"] and pruned == ["h1", "holo_1", "m1"]  # not pinned forever
    logged = [r for r in caplog.records if "hologram_call" in r.getMessage()]
    assert len(logged) == 1


def test_a_hosted_tool_call_is_an_ai_item_kept_with_the_answer_after_it() -> None:
    search = {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"type": "search"}}
    items = [user("h1"), said("m0"), user("h2"), search, said("m2")]
    kept, pruned, _ = reduce(items, min_messages=1, max_messages=2, start_on_human=False)
    assert kept == ["h2", "ws_1", "m2"] and pruned == ["h1", "m0"]


def test_user_turns_are_user_messages_only() -> None:
    easy = {"role": "user", "content": "hi"}  # EasyInputMessage, no type
    assert read_message(easy).kind == "human"
    assert read_message(user("h1")).kind == "human" and read_message(user("h1")).leads == 0
    assert read_message(said("m1")).leads == LEADS_JOIN
    assert read_message(think("rs1")).leads == LEADS_REQUIRED
    assert read_message({"type": "message", "role": "developer", "content": "rules"}).kind == "system"


def test_openai_sdk_response_objects_read_like_their_dicts() -> None:
    from openai.types.responses import (
        ResponseFunctionToolCall,
        ResponseOutputMessage,
        ResponseOutputText,
        ResponseReasoningItem,
    )
    from openai.types.responses.response_reasoning_item import Summary

    reasoning = ResponseReasoningItem(
        type="reasoning",
        id="rs_1",
        summary=[Summary(type="summary_text", text="hmm")],
        encrypted_content="gAAAA",
    )
    call = ResponseFunctionToolCall(
        type="function_call", id="fc_1", call_id="call_1", name="lookup", arguments="{}", status="completed"
    )
    text = ResponseOutputText(type="output_text", text="done", annotations=[])
    message = ResponseOutputMessage(
        type="message", id="msg_1", role="assistant", status="completed", content=[text]
    )
    assert read_message(reasoning).leads == LEADS_REQUIRED and read_message(reasoning).kind == "ai"
    assert read_message(call)[:6] == ("ai", None, "fc_1", None, ("call_1",), ())
    assert read_message(message).kind == "ai" and read_message(message).leads == LEADS_JOIN
    items: list[Any] = [user("h1"), reasoning, call, fout("out_1", "call_1"), message, user("h2"), said("m2")]
    kept, pruned, _ = reduce(items, min_messages=2, max_messages=3)
    assert kept == ["h2", "m2"] and pruned == ["h1", "rs_1", "fc_1", "out_1", "msg_1"]
    kept, _, _ = reduce(items)
    assert kept == rids(items)


def test_responses_token_mode_keeps_whole_model_turns() -> None:
    items = [user("h1"), think("rs1"), fcall("fc1", "x"), fout("o1", "x"), said("m1"), user("h2"), said("m2")]
    kept, _, out = reduce(items, max_tokens=60, target_tokens=40, token_counter=lambda m: 10)
    assert kept == ["h2", "m2"] and out.stats.tokens_after == 20
    kept, _, out = reduce(
        items, max_tokens=60, target_tokens=40, token_counter=lambda m: 10, start_on_human=False
    )
    # m1 is the model's next response (after the tool output): a unit of its own; rs1, fc1 and o1
    # go together or not at all
    assert kept == ["m1", "h2", "m2"]
    kept, _, out = reduce(
        items, max_tokens=60, target_tokens=50, token_counter=lambda m: 10, start_on_human=False
    )
    assert kept == ["m1", "h2", "m2"]  # o1 alone (or fc1 and o1) would fit too


# --- Gemini -------------------------------------------------------------------------------------


def _model(*parts: dict[str, Any]) -> dict[str, Any]:
    return {"role": "model", "parts": list(parts)}


def _call(name: str) -> dict[str, Any]:
    return {"function_call": {"name": name, "args": {}}}


def _response(name: str, result: str) -> dict[str, Any]:
    return {"function_response": {"name": name, "response": {"result": result}}}


def test_gemini_calls_without_ids_pair_with_the_responses_by_name_and_order() -> None:
    call = _model(_call("lookup"), _call("lookup"), _call("fetch"))
    answer = {
        "role": "user",
        "parts": [_response("lookup", "a"), _response("fetch", "c"), _response("lookup", "b")],
    }
    assert read_message(call).call_ids == ("lookup#0", "lookup#1", "fetch#0")
    assert read_message(answer).kind == "tool"  # never a human turn
    assert set(read_message(answer).result_ids) == set(read_message(call).call_ids)
    question = {"role": "user", "parts": [{"text": "look it up"}]}
    final = _model({"text": "here it is"})
    out = MessageReducer().reduce([question, call, answer, final])
    assert out.pruned == []
    # one response short, and the user writes again: the call is unanswered, pruned with its result
    partial = {"role": "user", "parts": [_response("lookup", "a"), _response("fetch", "c")]}
    again = {"role": "user", "parts": [{"text": "again"}]}
    out = MessageReducer().reduce([question, call, partial, again])
    assert out.surviving == [question, again] and out.pruned == [call, partial]


def test_gemini_function_role_and_ids_pair_by_id() -> None:
    call = _model({"functionCall": {"id": "c1", "name": "f", "args": {}}}, {"thoughtSignature": "c2ln"})
    answer = {"role": "function", "parts": [{"functionResponse": {"id": "c1", "name": "f", "response": {}}}]}
    assert read_message(call).call_ids == ("c1",)
    assert read_message(answer)[4:6] == ((), ("c1",))
    assert read_message(answer).kind == "tool"


def test_google_genai_contents_are_read_without_being_changed() -> None:
    from google.genai import types

    call = types.Content(
        role="model",
        parts=[
            types.Part(function_call=types.FunctionCall(name="f", args={}), thought_signature=b"sig"),
            types.Part(function_call=types.FunctionCall(name="f", args={"a": 1})),
        ],
    )
    answer = types.Content(
        role="user",
        parts=[
            types.Part(function_response=types.FunctionResponse(name="f", response={"r": 1})),
            types.Part(function_response=types.FunctionResponse(name="f", response={"r": 2})),
        ],
    )
    before = [call.model_copy(deep=True), answer.model_copy(deep=True)]
    assert read_message(call).call_ids == ("f#0", "f#1")
    assert read_message(answer).kind == "tool" and read_message(answer).result_ids == ("f#0", "f#1")
    question = types.Content(role="user", parts=[types.Part(text="go")])
    assert MessageReducer().reduce([question, call, answer]).pruned == []
    assert [call, answer] == before


# --- Bedrock Converse ---------------------------------------------------------------------------


def test_bedrock_tool_use_and_result_pair_by_tool_use_id_with_reasoning_in_the_turn() -> None:
    reasoning = {"reasoningContent": {"reasoningText": {"text": "think", "signature": "sig"}}}
    use = {
        "role": "assistant",
        "content": [reasoning, {"toolUse": {"toolUseId": "t1", "name": "f", "input": {}}}],
    }
    result = {"role": "user", "content": [{"toolResult": {"toolUseId": "t1", "content": [{"text": "42"}]}}]}
    assert read_message(use).call_ids == ("t1",)
    assert read_message(result).kind == "tool" and read_message(result).result_ids == ("t1",)
    question = {"role": "user", "content": [{"text": "q"}]}
    answer = {"role": "assistant", "content": [{"text": "42"}]}
    assert MessageReducer().reduce([question, use, result, answer]).pruned == []
    late = MessageReducer().reduce([question, use, question, result, answer])  # not adjacent
    assert late.pruned == [use, result]


# --- Anthropic SDK objects ----------------------------------------------------------------------


def test_anthropic_message_objects_are_assistant_turns_with_their_tool_use_blocks() -> None:
    from anthropic.types import (
        Message,
        ServerToolUseBlock,
        TextBlock,
        ToolUseBlock,
        Usage,
        WebSearchToolResultBlock,
    )

    def message(mid: str, blocks: list[Any]) -> Message:
        return Message(
            id=mid,
            type="message",
            role="assistant",
            model="claude-test",
            content=blocks,
            stop_reason="end_turn",
            stop_sequence=None,
            usage=Usage(input_tokens=1, output_tokens=1),
        )

    searched = message(
        "m1",
        [
            ServerToolUseBlock(
                type="server_tool_use", id="srvtoolu_1", name="web_search", input={"query": "q"}
            ),
            WebSearchToolResultBlock(type="web_search_tool_result", tool_use_id="srvtoolu_1", content=[]),
            TextBlock(type="text", text="found it"),
        ],
    )
    assert read_message(searched)[:6] == ("ai", "assistant", "m1", searched.content, (), ())
    called = message("m2", [ToolUseBlock(type="tool_use", id="toolu_1", name="f", input={})])
    assert read_message(called).call_ids == ("toolu_1",) and read_message(called).leads == 0
    result = {
        "role": "user",
        "id": "r2",
        "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "x"}],
    }
    items: list[Any] = [{"role": "user", "id": "h1", "content": "q"}, searched, called, result]
    out = MessageReducer(config=ReducerConfig(min_messages=2, max_messages=3, preserve_first=False)).reduce(
        items
    )
    assert rids(out.surviving) == ["h1", "m2", "r2"]  # the tool_result keeps its tool_use
    assert rids(out.pruned) == ["m1"]


# --- long runs ----------------------------------------------------------------------------------

TURN: Spec = [
    ("human", "h"),
    ("call", "c", ["x", "y"]),
    ("tool", "tx", "x"),
    ("tool", "ty", "y"),
    ("ai", "a"),
]


@pytest.mark.parametrize(
    "fmt", sorted(set(PROPERTY_BUILDERS) - {"langchain_dict", "langchain_object", "openai_dict"})
)
def test_200_turns_stay_bounded_and_valid_at_every_turn(fmt: str) -> None:
    build = PROPERTY_BUILDERS[fmt]
    reducer = MessageReducer(config=ReducerConfig(min_messages=8, max_messages=16, preserve_first=False))
    history: list[Any] = build([("system", "s")])
    longest = 0
    for turn in range(1, 201):
        new = build([(kind, f"{mid}{turn}", *(([f"{c}{turn}" for c in rest[0]],) if kind == "call" else
                     (f"{rest[0]}{turn}",) if rest else ())) for kind, mid, *rest in TURN])  # fmt: skip
        history = reducer.reduce(history, new).surviving
        assert valid(history), ids(history)
        longest = max(longest, len(history))
    assert ids(history)[0] == "s"
    assert ids(history)[-5:] == ["h200", "c200", "tx200", "ty200", "a200"]
    assert longest <= 16 + 1 + 3  # the system prompt, and the Responses shape's extra items


# --- the readers by columns agree with read_message on every provider shape ---------------------


def _pool() -> list[Any]:
    spec: Spec = [
        ("system", "s"),
        ("unknown", "u"),
        ("human", "h"),
        ("call", "c", ["x", "y"]),
        ("tool", "t", "x"),
        ("ai", "a"),
    ]
    pool: list[Any] = []
    for build in PROPERTY_BUILDERS.values():
        pool += build(spec)
    pool += [
        {"type": "message", "role": "assistant", "content": "text content", "id": "m_str"},
        {"type": "message", "role": "user", "content": "text content", "id": "u_str"},
        {"type": "reasoning", "id": "rs_str", "content": "text", "summary": []},
        {"type": "compaction", "id": "cmp", "content": "text"},
        {"type": "compaction", "id": "cmp2"},
        {"type": "hologram_call", "id": "holo"},
        {"type": "hologram", "id": "holo_c", "content": "with content: an unknown role"},
        {"type": "web_search_call", "id": "ws", "status": "completed"},
        {"type": "item_reference", "id": "ref"},
        {"role": "user", "content": "easy input"},
    ]
    return pool


POOL = _pool()


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(range(len(POOL))), max_size=14), st.booleans())
def test_readers_by_columns_equal_read_message(picks: list[int], with_calls: bool) -> None:
    msgs = [POOL[i] for i in picks]
    read, calls = read_plain(msgs, with_calls=with_calls)
    for info, msg in zip(read, msgs, strict=True):
        if info is not None:
            assert tuple(info) == tuple(read_message(msg))
    for i, payloads in calls.items():
        assert payloads == tool_call_payloads(msgs[i])
    assert sorted(pinned_indices(msgs)) == [
        i for i, m in enumerate(msgs) if read_message(m).kind in PINNED_KINDS
    ]
    assert snapshots(msgs) == [snapshot(m) for m in msgs]
    counter = heuristic_counter(cache_size=0)
    assert counter.count_messages(msgs) == [counter.count_uncached(m) for m in msgs]


def test_a_call_of_a_model_turn_left_unanswered_is_caught_through_the_memo() -> None:
    """The memo of the last output knows every call of its trailing model turn, not only the
    last item's: a parallel call never answered is pruned when the turn goes on without it."""
    reducer = MessageReducer(config=ReducerConfig(min_messages=50, max_messages=100, preserve_first=False))
    first = reducer.reduce([user("h1"), fcall("fc_a", "x"), fcall("fc_b", "y"), fout("out_y", "y")])
    assert rids(first.surviving) == ["h1", "fc_a", "fc_b", "out_y"]  # x is pending
    later = reducer.reduce(first.surviving, [said("m1")])
    afresh = MessageReducer(config=ReducerConfig(preserve_first=False)).reduce([*first.surviving, said("m1")])
    assert rids(later.surviving) == rids(afresh.surviving) == ["h1", "fc_b", "out_y", "m1"]
    assert rids(later.pruned) == ["fc_a"]
