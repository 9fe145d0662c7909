"""Bad input to the state annotation ``reducer.as_langgraph_reducer()``: what cannot be made into a
message raises a precise ``TypeError``/``ValueError`` naming ``existing[i]``/``new[i]`` and the
field, before LangChain's coercion fails with an ``AttributeError``, ``NotImplementedError`` or
``KeyError``; the same inputs are accepted and rejected with and without langgraph installed; the
containers ``reduce()`` accepts (list, tuple, generator, one message) are accepted by both.
"""

from __future__ import annotations

import copy
import sys
from collections.abc import Callable, Iterator
from typing import Any, cast

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    MessageLikeRepresentation,
    SystemMessage,
    ToolMessage,
)
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages
from typing_extensions import Annotated, TypedDict  # noqa: UP035

import agentstate_reducer.merge as state_module
from agentstate_reducer import MessageReducer, read_message

REDUCER = MessageReducer(min_messages=2, max_messages=50)  # never triggers on these small lists
EXISTING: list[MessageLikeRepresentation] = [SystemMessage("s", id="sys"), HumanMessage("q", id="h1")]
EXISTING_DICTS = [{"role": "system", "content": "s", "id": "sys"},
                  {"role": "user", "content": "q", "id": "h1"}]


def annotation(existing: Any, new: Any) -> list[Any]:
    return REDUCER.as_langgraph_reducer()(existing, new)


def without_langgraph(existing: Any, new: Any) -> list[Any]:
    """The annotation on the no-langgraph fallback (``_merge_dicts``)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(sys.modules, "langgraph.graph.message", None)  # importing it now raises ImportError
        return REDUCER.as_langgraph_reducer()(existing, new)


BOTH_PATHS = [pytest.param(annotation, id="langgraph"), pytest.param(without_langgraph, id="fallback")]


def ids(messages: list[Any]) -> list[str | None]:
    return [read_message(m).id for m in messages]


def contents(messages: list[Any]) -> list[Any]:
    return [read_message(m).content for m in messages]


def ai(**fields: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": "", **fields}


def call(**fields: Any) -> dict[str, Any]:
    return {"id": "c1", "name": "f", "args": {}, **fields}


def openai_call(**function: Any) -> dict[str, Any]:
    return {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}", **function}}


OK = {"role": "user", "content": "fine"}

# (new, the exception, an exact substring of its message)
BAD_INPUT = [
    # what LangChain fails on with AttributeError / NotImplementedError / KeyError
    pytest.param([OK, OK, ai(tool_calls={"id": "c1"})], TypeError,
                 "new[2].tool_calls must be a list of tool calls, got dict", id="tool_calls-dict"),
    pytest.param([OK, 5], TypeError,
                 "new[1] is an int: expected a message (dict or BaseMessage), a (role, content) tuple "
                 "or a str",
                 id="int-message"),
    pytest.param([None], TypeError, "new[0] is None: expected a message (dict or BaseMessage)",
                 id="None-message"),
    pytest.param([(m for m in [OK])], TypeError, "new[0] is a generator: expected a message",
                 id="nested-generator"),
    pytest.param([{"role": None, "content": "x"}], ValueError,
                 "new[0].role is None: give 'user', 'assistant', 'system' or 'tool'", id="role-None"),
    pytest.param([{"type": None, "content": "x"}], ValueError, "new[0].type is None: give 'user'",
                 id="type-None"),
    pytest.param([ai(tool_calls=["call"])], TypeError,
                 "new[0].tool_calls[0] must be a dict (a tool call), got a str", id="tool-call-str"),
    pytest.param([ai(tool_calls=[openai_call()]), ai(tool_calls=[{"type": "function", "function": {}}])],
                 ValueError, "new[1].tool_calls[0] has no 'id'", id="openai-call-no-id"),
    pytest.param([ai(tool_calls=[{"id": "c1", "function": "f"}])], TypeError,
                 "new[0].tool_calls[0].function must be a dict with 'name' and 'arguments', got a str",
                 id="openai-function-str"),
    pytest.param([{"role": "tool", "content": "r"}], ValueError,
                 "new[0] is a tool result without a 'tool_call_id'", id="tool-no-call-id"),
    pytest.param([{"role": "tool", "content": "r", "tool_call_id": None}], ValueError,
                 "new[0] is a tool result without a 'tool_call_id'", id="tool-call-id-None"),
    pytest.param([{"role": "user", "content": "x", 1: 2}], TypeError,
                 "new[0] has a key 1 that is not a str", id="non-str-key"),
    pytest.param([{"role": "user", "content": "x", "additional_kwargs": 5}], TypeError,
                 "new[0].additional_kwargs must be a dict, got an int", id="additional-kwargs-int"),
    pytest.param([{"role": "user", "content": "x", "additional_kwargs": None}], TypeError,
                 "new[0].additional_kwargs must be a dict, got None", id="additional-kwargs-None"),
    pytest.param([{"role": "tool", "content": "x", "tool_call_id": "c", "status": []}], ValueError,
                 "new[0].status is []: give 'success' or 'error'", id="tool-status-unhashable"),
    pytest.param([("user", "hi", "extra")], TypeError,
                 "new[0] is a tuple of 3 items, not a (role, content) pair", id="triple"),
    pytest.param([(HumanMessage("a"), HumanMessage("b"))], TypeError,
                 "new[0] is a tuple of 2 items, not a (role, content) pair", id="nested-tuple-of-messages"),
    pytest.param([b"hi"], TypeError, "new[0] is a bytes: expected a message", id="bytes"),
    pytest.param([HumanMessage("ok"), object()], TypeError, "new[1] is an object: expected a message",
                 id="foreign-object"),
    # what LangChain rejects with an imprecise ValueError (no index, no field) or a TypeError
    pytest.param([{"role": "critic", "content": "x"}], ValueError,
                 "new[0].role is 'critic', a role LangChain cannot coerce: give 'user'", id="unknown-role"),
    pytest.param([{"role": "User", "content": "x"}], ValueError, "new[0].role is 'User'", id="role-case"),
    pytest.param([{"role": ["user"], "content": "x"}], TypeError, "new[0].role must be a str, got a list",
                 id="role-list"),
    pytest.param([{"content": "x"}], ValueError, "new[0] has no 'role' (or 'type')", id="no-role"),
    pytest.param([{"role": "user"}], ValueError, "new[0] has no 'content'", id="no-content"),
    pytest.param([{"type": "ai", "data": {"content": "x"}}], ValueError, "use messages_from_dict",
                 id="messages-to-dict-form"),
    pytest.param([{"role": "user", "content": 5}], TypeError,
                 "new[0].content must be a str or a list of content blocks (str or dict), got an int",
                 id="content-int"),
    pytest.param([{"role": "user", "content": 0}], TypeError, "new[0].content must be a str",
                 id="content-zero"),
    pytest.param([{"role": "user", "content": ["ok", 3]}], TypeError,
                 "new[0].content[1] must be a str or a dict content block, got an int",
                 id="content-block-int"),
    pytest.param([{"role": "user", "content": "x", "name": 3}], TypeError,
                 "new[0].name must be a str, got an int", id="name-int"),
    pytest.param([{"role": "user", "content": "x", "id": ["a"]}], TypeError,
                 "new[0].id must be a str, got a list", id="id-list"),
    pytest.param([{"role": "tool", "content": "x", "tool_call_id": ["c"]}], TypeError,
                 "new[0].tool_call_id must be a str, got a list", id="tool-call-id-list"),
    pytest.param([{"role": "tool", "content": "x", "tool_call_id": "c", "status": "bad"}], ValueError,
                 "new[0].status is 'bad': give 'success' or 'error'", id="tool-status"),
    pytest.param([{"role": "tool", "content": "x", "tool_call_id": "c", "additional_kwargs": {"status": 3}}],
                 ValueError, "new[0].status is 3", id="tool-status-nested"),
    pytest.param([{"role": "user", "content": "x", "response_metadata": "s"}], TypeError,
                 "new[0].response_metadata must be a dict, got a str", id="response-metadata-str"),
    pytest.param([{"role": "user", "content": "x", "message_type": "ai"}], ValueError,
                 "new[0] has a field 'message_type'", id="message-type-field"),
    pytest.param([{"role": "function", "content": "x"}], ValueError,
                 "new[0] is a function result without a 'name'", id="function-no-name"),
    pytest.param([{"type": "remove", "content": ""}], ValueError, "new[0] is a removal without an 'id'",
                 id="remove-no-id"),
    pytest.param([ai(tool_calls=[call(id=3)])], TypeError,
                 "new[0].tool_calls[0].id must be a str, got an int", id="call-id-int"),
    pytest.param([ai(tool_calls=[{"id": "c1", "args": {}}])], ValueError,
                 "new[0].tool_calls[0] has no 'name'", id="call-no-name"),
    pytest.param([ai(tool_calls=[call(name=3)])], TypeError, "new[0].tool_calls[0].name must be a str",
                 id="call-name-int"),
    pytest.param([ai(tool_calls=[call(args='{"a": 1}')])], TypeError,
                 "new[0].tool_calls[0].args must be a dict, got a str (a JSON string goes in OpenAI's "
                 "function.arguments)", id="call-args-json-string"),
    pytest.param([ai(tool_calls=[call(args={1: "x"})])], TypeError, "new[0].tool_calls[0].args has a key 1",
                 id="call-args-int-key"),
    pytest.param([ai(tool_calls=[call(zzz=1)])], ValueError, "new[0].tool_calls[0] has unknown key 'zzz'",
                 id="call-unknown-key"),
    pytest.param([ai(tool_calls=[openai_call(arguments="{")])], ValueError,
                 "new[0].tool_calls[0].function.arguments is not valid JSON", id="openai-bad-json"),
    pytest.param([ai(tool_calls=[openai_call(arguments="[1]")])], TypeError,
                 "new[0].tool_calls[0].function.arguments must be a JSON object, got a list",
                 id="openai-json-list"),
    pytest.param([ai(tool_calls=[openai_call(arguments=None)])], TypeError,
                 "new[0].tool_calls[0].function.arguments must be a JSON object string or a dict, got None",
                 id="openai-arguments-None"),
    pytest.param([ai(tool_calls=[openai_call(name=None)])], TypeError,
                 "new[0].tool_calls[0].function.name must be a str, got None", id="openai-name-None"),
    pytest.param([(1, "x")], TypeError,
                 "new[0][0], the role of a (role, content) pair, must be a str, got an int",
                 id="pair-role-int"),
    pytest.param([("user", 5)], TypeError,
                 "new[0][1], the content, must be a str or a list of blocks, got an int",
                 id="pair-content-int"),
    pytest.param(("hello", "there"), ValueError,
                 "new[0][0], the role of a (role, content) pair, is 'hello'", id="two-strings-are-a-pair"),
    pytest.param([("tool", "x")], ValueError, "a 'tool' message needs a dict", id="pair-tool-role"),
    pytest.param({"lc": 1, "type": "constructor", "id": ["langchain", "HumanMessage"],
                  "kwargs": {"content": 3}},
                 TypeError, "new[0].kwargs.content must be a str", id="serialized-bad-content"),
    # the whole update
    pytest.param(None, ValueError, "new is None: a state update adds a list of messages or one message; "
                 "to add nothing, return [] or leave the key out of the update", id="new-None"),
    pytest.param(5, TypeError, "new is an int: expected a message", id="new-int"),
    pytest.param(b"hi", TypeError, "new is a bytes: expected a list of messages", id="new-bytes"),
]


@pytest.mark.parametrize("merge", BOTH_PATHS)
@pytest.mark.parametrize(("new", "error", "text"), BAD_INPUT)
def test_bad_input_raises_naming_index_and_field(
    merge: Callable[[Any, Any], list[Any]], new: Any, error: type[Exception], text: str
) -> None:
    with pytest.raises(error) as caught:
        merge(list(EXISTING), new)
    assert type(caught.value) is error  # not a pydantic ValidationError or JSONDecodeError subclass
    assert text in str(caught.value)


@pytest.mark.parametrize(
    "new",
    [
        pytest.param([ai(tool_calls={"id": "c1"})], id="tool_calls-dict"),
        pytest.param([5], id="int"),
        pytest.param([None], id="None"),
        pytest.param([(m for m in [OK])], id="generator"),
        pytest.param([ai(tool_calls=[{"type": "function", "function": {"name": "f", "arguments": "{}"}}])],
                     id="openai-call-no-id"),
        pytest.param([{"role": "tool", "content": "r"}], id="tool-no-call-id"),
    ],
)
def test_langchain_itself_fails_outside_type_and_value_error(new: Any) -> None:
    """Why the checks exist: on these, add_messages raises from deep inside LangChain."""
    with pytest.raises(Exception) as caught:
        add_messages(list(EXISTING), new)
    assert not isinstance(caught.value, TypeError | ValueError)
    with pytest.raises((TypeError, ValueError), match=r"new\[0\]"):
        annotation(list(EXISTING), new)


@pytest.mark.parametrize("merge", BOTH_PATHS)
def test_existing_is_checked_and_named(merge: Callable[[Any, Any], list[Any]]) -> None:
    with pytest.raises(TypeError, match=r"existing\[1\]\.tool_calls must be a list of tool calls, got dict"):
        merge([OK, ai(tool_calls={"id": "c1"})], [])
    with pytest.raises(TypeError, match=r"existing is an int"):
        merge(3, [])


@pytest.mark.parametrize("merge", BOTH_PATHS)
def test_existing_none_is_an_empty_history(merge: Callable[[Any, Any], list[Any]]) -> None:
    assert contents(merge(None, [HumanMessage("first", id="f")])) == ["first"]


def test_new_none_is_rejected_as_add_messages_rejects_it() -> None:
    with pytest.raises(ValueError, match="non-null"):
        add_messages(list(EXISTING), cast("list[Any]", None))  # None on purpose: the bad input
    with pytest.raises(ValueError, match="new is None"):
        annotation(list(EXISTING), None)


# -- accepted containers and shapes --------------------------------------------------------------


def gen(*messages: Any) -> Iterator[Any]:
    yield from messages


CONTAINERS: list[Any] = [
    pytest.param(lambda: [HumanMessage("a", id="a"), AIMessage("b", id="b")], ["a", "b"], id="list"),
    pytest.param(lambda: (HumanMessage("a", id="a"), AIMessage("b", id="b")), ["a", "b"],
                 id="tuple-of-messages"),
    pytest.param(lambda: gen(HumanMessage("a", id="a"), AIMessage("b", id="b")), ["a", "b"], id="generator"),
    pytest.param(lambda: HumanMessage("a", id="a"), ["a"], id="one-message"),
    pytest.param(lambda: {"role": "user", "content": "a", "id": "a"}, ["a"], id="one-dict"),
]


@pytest.mark.parametrize("merge", BOTH_PATHS)
@pytest.mark.parametrize(("make", "expected"), CONTAINERS)
def test_annotation_accepts_the_containers(
    merge: Callable[[Any, Any], list[Any]], make: Callable[[], Any], expected: list[str]
) -> None:
    out = merge(list(EXISTING), make())
    assert ids(out) == ["sys", "h1", *expected]


@pytest.mark.parametrize(("make", "expected"), CONTAINERS)
def test_reduce_accepts_the_same_containers(make: Callable[[], Any], expected: list[str]) -> None:
    out = REDUCER.reduce(list(EXISTING), new=make()).surviving
    assert ids(out) == ["sys", "h1", *expected]


def test_generator_is_read_once() -> None:
    reads: list[int] = []

    def counted() -> Iterator[Any]:
        reads.append(1)
        yield {"role": "user", "content": "g", "id": "g"}

    out = annotation(list(EXISTING), counted())
    assert ids(out) == ["sys", "h1", "g"]
    assert reads == [1]


@pytest.mark.parametrize("merge", BOTH_PATHS)
@pytest.mark.parametrize(
    ("new", "content"),
    [
        pytest.param("hi", "hi", id="str"),
        pytest.param(("assistant", "hi"), "hi", id="role-tuple"),
        pytest.param([["assistant", "hi"]], "hi", id="role-2-list-in-a-list"),
        pytest.param([("user", [{"type": "text", "text": "t"}])], [{"type": "text", "text": "t"}],
                     id="pair-blocks"),
        pytest.param({"type": "ai", "content": None}, None, id="content-None"),
        pytest.param(ai(tool_calls=[openai_call(arguments={"a": 1})]), "", id="openai-args-dict"),
        pytest.param(ai(tool_calls=(call(id=None),)), "", id="call-id-None-in-a-tuple"),
    ],
)
def test_coercible_shapes_are_accepted(
    merge: Callable[[Any, Any], list[Any]], new: Any, content: Any
) -> None:
    out = merge(list(EXISTING), new)
    assert len(out) == 3
    got = read_message(out[2]).content
    if merge is annotation and content is None:
        content = ""  # LangChain turns content None into ""
    assert got == content


def test_removal_dict_without_content_is_accepted_by_langgraph_path() -> None:
    """add_messages needs 'content' even in a removal; the fallback's documented form has none."""
    existing: list[MessageLikeRepresentation] = [HumanMessage("q", id="h"), AIMessage("a", id="a")]
    removal: list[MessageLikeRepresentation] = [{"type": "remove", "id": "a"}]
    with pytest.raises(ValueError, match="must contain 'role' and 'content'"):
        add_messages(list(existing), removal)
    assert ids(annotation(existing, [{"type": "remove", "id": "a"}])) == ["h"]
    assert ids(without_langgraph(EXISTING_DICTS, [{"type": "remove", "id": "h1"}])) == ["sys"]


@pytest.mark.parametrize("merge", BOTH_PATHS)
def test_removal_dict_in_existing_stays_as_in_add_messages(merge: Callable[[Any, Any], list[Any]]) -> None:
    """add_messages keeps a RemoveMessage found in the existing list; a removal dict there needs no
    'content' either."""
    out = merge([*EXISTING_DICTS, {"type": "remove", "id": "h1"}], [])
    assert [read_message(m).kind for m in out] == ["system", "human", "remove"]


def test_serialized_message_is_unpacked_by_both_paths() -> None:
    serialized = {"lc": 1, "type": "constructor", "id": ["langchain", "schema", "messages", "AIMessage"],
                  "kwargs": {"content": "from dumpd", "id": "d"}}
    out = annotation(list(EXISTING), serialized)
    assert isinstance(out[2], AIMessage) and out[2].content == "from dumpd" and out[2].id == "d"
    out = without_langgraph(list(EXISTING_DICTS), serialized)
    assert out[2] == {"type": "ai", "content": "from dumpd", "id": "d"}


def test_reduce_keeps_what_it_cannot_read() -> None:
    """reduce() does not coerce: a message it cannot read stays, as an unknown role."""
    odd = [{"role": None, "content": "x", "id": "odd"}, ai(id="tc", tool_calls={"id": "c1"})]
    out = REDUCER.reduce(list(EXISTING_DICTS), new=odd).surviving
    assert out[2:] == odd
    with pytest.raises(ValueError, match=r"new\[0\]\.role is None"):
        annotation(list(EXISTING_DICTS), odd)


def test_a_missed_shape_still_names_the_message(monkeypatch: pytest.MonkeyPatch) -> None:
    """Were a shape to get past the checks, LangChain's error is still reported with the index."""
    monkeypatch.setattr(state_module, "_check_message", lambda m, where, base: None)
    expected = r"new\[1\] cannot be coerced to a LangChain message: AttributeError"
    with pytest.raises(ValueError, match=expected):
        annotation(list(EXISTING), [OK, ai(tool_calls={"id": "c1"})])


class GraphState(TypedDict):  # at module level: LangGraph evaluates the (string) annotation here
    messages: Annotated[list, REDUCER.as_langgraph_reducer()]


@pytest.mark.parametrize("merge", BOTH_PATHS)
def test_the_previous_output_is_not_checked_again(
    merge: Callable[[Any, Any], list[Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only ``new`` is checked when ``existing`` is the list the annotation returned last."""
    checked: list[str] = []
    check = state_module._check_message

    def counting(m: Any, where: str, base: type) -> None:
        checked.append(where)
        check(m, where, base)

    monkeypatch.setattr(state_module, "_check_message", counting)
    fn = REDUCER.as_langgraph_reducer()
    history: list[Any] = []
    for i in range(3):
        history += [ai(id=f"a{i}", tool_calls=[call(id=f"c{i}")]),
                    {"role": "tool", "content": "r", "tool_call_id": f"c{i}", "id": f"t{i}"}]
    if merge is without_langgraph:
        monkeypatch.setitem(sys.modules, "langgraph.graph.message", None)
    out = fn(history, [])
    assert checked == [f"existing[{i}]" for i in range(6)]
    checked.clear()
    out = fn(out, [ai(id="a9", tool_calls=[call(id="c9")])])
    assert checked == ["new[0]"]
    checked.clear()
    copied = [*out, {"role": "tool", "content": "r", "tool_call_id": 9, "id": "t9"}]
    with pytest.raises(TypeError, match=r"existing\[7\]\.tool_call_id must be a str, got an int"):
        fn(copied, [])  # a different list: checked again


def test_bad_update_inside_a_graph_names_the_message() -> None:
    def node(state: Any) -> dict[str, Any]:  # Any: a TypedDict here would be its input schema
        return {"messages": [{"role": "assistant", "content": "", "tool_calls": {"id": "c1", "name": "f"}}]}

    builder = StateGraph(GraphState)
    builder.add_node("agent", node)
    builder.add_edge(START, "agent")
    graph = builder.compile(checkpointer=InMemorySaver())
    with pytest.raises(TypeError, match=r"new\[0\]\.tool_calls must be a list of tool calls, got dict"):
        graph.invoke({"messages": [("user", "hi")]}, {"configurable": {"thread_id": "bad-update"}})


# -- random malformed messages ---------------------------------------------------------------------

_ROLES = ["user", "assistant", "ai", "human", "system", "developer", "tool", "function", "remove",
          "critic", "User", "", "constructor"]
_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-1, 2),
    st.text(max_size=3),
    st.sampled_from(["c1", "h1", "sys", "success", "error", "{}", '{"a": 1}', "[1]", "{", "null"]),
    st.lists(st.one_of(st.text(max_size=2), st.integers(0, 1), st.just({"type": "text", "text": "t"})),
             max_size=2),
    st.dictionaries(st.one_of(st.sampled_from(["a", "status", "example", "type"]), st.integers(0, 1)),
                    st.one_of(st.none(), st.integers(0, 1), st.text(max_size=2)), max_size=2),
    st.tuples(st.text(max_size=2)),
)
_ROLE_VALUES = st.one_of(st.sampled_from(_ROLES), _VALUES)
_FUNCTION = st.one_of(_VALUES, st.fixed_dictionaries({}, optional={
    "name": st.one_of(st.just("f"), _VALUES),
    "arguments": st.one_of(st.sampled_from(["{}", '{"a": 1}', "[1]", "{", "null", '"s"']), _VALUES),
}))
_TOOL_CALL = st.one_of(_VALUES, st.fixed_dictionaries({}, optional={
    "id": st.one_of(st.just("c1"), _VALUES),
    "name": st.one_of(st.just("f"), _VALUES),
    "args": st.one_of(st.just({"a": 1}), _VALUES),
    "type": st.one_of(st.just("tool_call"), st.just("function"), _VALUES),
    "function": _FUNCTION,
    "zzz": _VALUES,
}))
_FIELDS = {
    "role": _ROLE_VALUES,
    "type": _ROLE_VALUES,
    "content": _VALUES,
    "id": st.one_of(st.sampled_from(["h1", "sys", "x", "y"]), _VALUES),
    "name": _VALUES,
    "tool_call_id": st.one_of(st.just("c1"), _VALUES),
    "tool_calls": st.one_of(_VALUES, st.lists(_TOOL_CALL, max_size=3), st.tuples(_TOOL_CALL)),
    "additional_kwargs": _VALUES,
    "response_metadata": _VALUES,
    "status": _VALUES,
    "example": _VALUES,
    "message_type": _VALUES,
    "data": _VALUES,
}
_DICT_MESSAGE = st.fixed_dictionaries({}, optional=_FIELDS).flatmap(
    lambda m: st.one_of(
        st.just(m),
        st.just({**m, 7: "seven"}),
        st.sampled_from(["HumanMessage", "AIMessageChunk", "ToolMessage", "RemoveMessage", "Foo"]).map(
            lambda cls: {"lc": 1, "type": "constructor", "id": ["langchain", cls], "kwargs": m}
        ),
    )
)
_VALID_MESSAGES: list[dict[str, Any]] = [
    {"role": "user", "content": "q", "id": "u"},
    {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "name": "f", "args": {"a": 1}}]},
    {"role": "assistant", "content": "",
     "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}]},
    {"role": "tool", "content": "r", "tool_call_id": "c1", "status": "success"},
    {"type": "remove", "id": "h1"},
    {"role": "function", "content": "r", "name": "f"},
    {"type": "human", "content": [{"type": "text", "text": "t"}], "additional_kwargs": {"a": 1}},
]
_DELETE = object()


@st.composite
def _one_field_broken(draw: st.DrawFn) -> dict[str, Any]:
    """A valid message with one or two fields, at any depth, replaced by a random value or deleted."""
    message = copy.deepcopy(draw(st.sampled_from(_VALID_MESSAGES)))
    for _ in range(draw(st.integers(1, 2))):
        target: Any = message
        calls = message.get("tool_calls")
        if isinstance(calls, list) and calls and isinstance(calls[0], dict) and draw(st.booleans()):
            target = calls[0]
            if isinstance(target.get("function"), dict) and draw(st.booleans()):
                target = target["function"]
        key = draw(st.one_of(st.sampled_from(sorted(target)), st.sampled_from(sorted(_FIELDS))))
        value = draw(st.one_of(st.just(_DELETE), _VALUES, st.sampled_from(_ROLES)))
        if value is _DELETE:
            target.pop(key, None)
        else:
            target[key] = value
    return message


_MESSAGE = st.one_of(
    _DICT_MESSAGE,
    _one_field_broken(),
    _one_field_broken(),
    _VALUES,
    st.tuples(_ROLE_VALUES, _VALUES),
    st.just(HumanMessage("obj", id="obj")),
)


def _outcome(merge: Callable[[Any, Any], list[Any]], existing: list[Any], new: list[Any]) -> tuple[str, str]:
    try:
        out = merge(existing, new)
    except (TypeError, ValueError) as exc:
        return type(exc).__name__, str(exc)
    assert isinstance(out, list)
    return "ok", ""


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(st.lists(_MESSAGE, min_size=1, max_size=3), st.booleans())
def test_random_malformed_messages_raise_type_or_value_error(new: list[Any], as_existing: bool) -> None:
    """Never AttributeError/NotImplementedError/KeyError from LangChain; the same outcome, with the
    same message, with and without langgraph; never an error the checks left to LangChain."""
    existing, update = (list(EXISTING_DICTS) + new, []) if as_existing else (list(EXISTING_DICTS), new)
    got = _outcome(annotation, existing, update)
    event(f"outcome: {got[0]}")
    fallback = _outcome(without_langgraph, existing, update)
    assert got == fallback
    assert "cannot be coerced to a LangChain message" not in got[1]
    if got[0] == "ok":
        out = annotation(existing, update)
        assert all(isinstance(m, BaseMessage) for m in out)
    else:
        side = "existing" if as_existing else "new"
        assert got[1].startswith(f"{side}[")


def test_tool_message_objects_pass_unchecked() -> None:
    """BaseMessage instances are taken as they are: nothing to coerce."""
    call_msg = AIMessage("", id="a1", tool_calls=[{"name": "f", "args": {}, "id": "c1", "type": "tool_call"}])
    out = annotation(list(EXISTING), (call_msg, ToolMessage("r", tool_call_id="c1", id="t1")))
    assert ids(out) == ["sys", "h1", "a1", "t1"]
