"""Every reader by columns in ``agentstate_reducer._columns.bulk`` equals its reference that reads
one message at a time, on generated histories of every common shape (hypothesis)."""

from __future__ import annotations

from operator import eq
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import (
    AIMessage,
    ChatMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)
from openai.types.responses import ResponseCompactionItem

from agentstate_reducer._columns import warm
from agentstate_reducer._columns.bulk import compaction_indices, fast_views, pinned_indices, read_plain
from agentstate_reducer._columns.warm import _heuristic_counts
from agentstate_reducer.messages import (
    PINNED_KINDS,
    json_text,
    read_message,
    snapshot,
    snapshots,
    tool_call_payloads,
    unchanged,
)
from agentstate_reducer.messages.fields import apply_view
from agentstate_reducer.messages.jsontext import _JSON
from agentstate_reducer.tokens import MESSAGE_OVERHEAD, heuristic_counter, heuristic_text_tokens
from agentstate_reducer.tokens.rules import plain_texts

texts = st.text(max_size=12)
ids = st.one_of(st.none(), st.just(""), texts, st.integers(-3, 3), st.booleans())
names = st.one_of(st.none(), texts, st.integers(0, 2))
json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), texts),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(texts, inner, max_size=3)),
    max_leaves=8,
)
blocks = st.lists(
    st.one_of(
        st.builds(lambda t: {"type": "text", "text": t}, texts),
        st.builds(lambda i: {"type": "tool_use", "id": i, "name": "f", "input": {}}, texts),
        st.builds(lambda i, t: {"type": "tool_result", "tool_use_id": i, "content": t}, texts, texts),
        st.builds(lambda t: {"type": "compaction", "content": t}, st.one_of(texts, st.none())),
        st.builds(lambda t: {"type": "non_standard", "value": {"type": "compaction", "content": t}}, texts),
    ),
    max_size=3,
)
contents = st.one_of(texts, texts, blocks, st.none(), st.integers(0, 3))
lc_calls = st.lists(
    st.builds(lambda i, a: {"name": "f", "args": a, "id": i}, st.one_of(texts, st.none()), json_values),
    max_size=2,
)
openai_calls = st.lists(
    st.builds(
        lambda i, a: {"id": i, "type": "function", "function": {"name": "f", "arguments": a}},
        texts,
        st.one_of(texts, json_values),
    ),
    max_size=2,
)


def _dict(
    role: str, content: Any, msg_id: Any, name: Any, calls: Any, answered: Any, key: str
) -> dict[str, Any]:
    msg: dict[str, Any] = {key: role, "content": content, "id": msg_id}
    if name is not None:
        msg["name"] = name
    if calls is not None:
        msg["tool_calls"] = calls
    if answered is not None:
        msg["tool_call_id"] = answered
    return msg


dict_messages = st.builds(
    _dict,
    st.sampled_from(["user", "assistant", "system", "tool", "developer", "human", "ai", "weird"]),
    contents,
    ids,
    names,
    st.one_of(st.none(), openai_calls, lc_calls),
    st.one_of(st.none(), ids),
    st.sampled_from(["role", "role", "type"]),
)


def _object(kind: str, content: Any, msg_id: Any, calls: list[dict[str, Any]], answered: str) -> Any:
    text = content if isinstance(content, str | list) else str(content)
    if kind == "human":
        return HumanMessage(text, id=msg_id)
    if kind == "system":
        return SystemMessage(text, id=msg_id)
    if kind == "ai":
        good = [
            {**c, "id": c["id"] or "x", "args": c["args"] if isinstance(c["args"], dict) else {}}
            for c in calls
        ]
        return AIMessage(text, id=msg_id, tool_calls=good)
    if kind == "tool":
        return ToolMessage(text, id=msg_id, tool_call_id=answered)
    if kind == "chat":
        return ChatMessage(content=text, role="assistant", id=msg_id)
    return RemoveMessage(id=msg_id or "r")


object_messages = st.builds(
    _object,
    st.sampled_from(["human", "system", "ai", "ai", "tool", "chat", "remove"]),
    contents,
    st.one_of(st.none(), texts),
    lc_calls,
    texts,
)
#: Responses compaction items, as dicts and SDK objects
compaction_items = st.one_of(
    st.builds(lambda i: {"type": "compaction", "id": i, "encrypted_content": "gAAAA"}, ids),
    st.builds(lambda i: ResponseCompactionItem(id=i, encrypted_content="gAAAA", type="compaction"), texts),
    st.builds(lambda t: {"type": "ai", "data": {"content": [{"type": "compaction", "content": t}]}}, texts),
)
histories = st.one_of(
    st.lists(dict_messages, max_size=12),
    st.lists(object_messages, max_size=12),
    st.lists(st.one_of(dict_messages, object_messages, compaction_items), max_size=12),
)


@settings(max_examples=100, deadline=None)
@given(histories, st.booleans())
def test_read_plain_equals_read_message(msgs: list[Any], with_calls: bool) -> None:
    read, calls = read_plain(msgs, with_calls=with_calls)
    assert len(read) == len(msgs)
    for info, msg in zip(read, msgs, strict=True):
        if info is not None:
            assert info == read_message(msg)
            assert tuple(info) == tuple(read_message(msg))
    for i, payloads in calls.items():
        assert read[i] is not None
        assert payloads == tool_call_payloads(msgs[i])
    if not with_calls:
        assert calls == {}


@settings(max_examples=100, deadline=None)
@given(histories)
def test_snapshots_equal_snapshot_of_each(msgs: list[Any]) -> None:
    assert snapshots(msgs) == [snapshot(m) for m in msgs]


@settings(max_examples=100, deadline=None)
@given(st.one_of(st.lists(dict_messages, max_size=12), st.lists(object_messages, max_size=12)), st.data())
def test_fast_views_compare_as_unchanged_does(msgs: list[Any], data: st.DataObject) -> None:
    snaps = [snapshot(m) for m in msgs]
    for i in data.draw(st.lists(st.integers(0, max(len(msgs) - 1, 0)), max_size=3)) if msgs else []:
        if isinstance(msgs[i], dict):
            msgs[i]["content"] = data.draw(contents)
        else:
            msgs[i].content = data.draw(texts)
    views = fast_views(msgs)
    if msgs and isinstance(msgs[0], dict):
        assert views is None  # dicts are compared whole
        return
    assert views is not None
    lives = map(apply_view, views, msgs)
    assert list(map(eq, snaps, lives)) == [unchanged(s, m) for s, m in zip(snaps, msgs, strict=True)]


@settings(max_examples=100, deadline=None)
@given(histories)
def test_heuristic_counts_by_columns_equal_the_rule_of_each_reading(msgs: list[Any]) -> None:
    read, _ = read_plain(msgs)
    plain = [info for info in read if info is not None]
    expected = [MESSAGE_OVERHEAD + sum(map(heuristic_text_tokens, plain_texts(info))) for info in plain]
    assert _heuristic_counts(plain, False) == expected
    assert heuristic_counter(cache_size=0).count_messages(msgs) == [
        heuristic_counter(cache_size=0).count_uncached(m) for m in msgs
    ]


@settings(max_examples=100, deadline=None)
@given(histories)
def test_pinned_indices_equal_the_pinned_kinds_of_each_reading(msgs: list[Any]) -> None:
    expected = [i for i, m in enumerate(msgs) if read_message(m).kind in PINNED_KINDS]
    assert sorted(pinned_indices(msgs)) == expected


@settings(max_examples=100, deadline=None)
@given(histories)
def test_compaction_indices_equal_the_compactions_of_each_reading(msgs: list[Any]) -> None:
    expected = [i for i, m in enumerate(msgs) if read_message(m).compaction]
    assert compaction_indices(msgs) == expected


@settings(max_examples=200, deadline=None)
@given(json_values)
def test_json_text_equals_the_json_encoder(value: Any) -> None:
    assert json_text(value) == _JSON.encode(value)


@settings(max_examples=100, deadline=None)
@given(st.one_of(st.lists(dict_messages, max_size=12), st.lists(object_messages, max_size=12)), st.data())
def test_the_warm_lookup_by_columns_equals_the_lookup_one_by_one(
    msgs: list[Any], data: st.DataObject
) -> None:
    counter = heuristic_counter()
    for _ in range(2):  # cached from the second sight on
        counter.count_messages(msgs)
    for i in data.draw(st.lists(st.integers(0, max(len(msgs) - 1, 0)), max_size=3)) if msgs else []:
        if isinstance(msgs[i], dict):
            msgs[i]["content"] = data.draw(contents)
        else:
            msgs[i].content = data.draw(texts)
    by_columns = warm.lookup(counter, msgs)
    if msgs and isinstance(msgs[0], dict):
        assert by_columns is None  # dicts are checked one by one
        return
    assert by_columns is not None
    counts, infos, missed = by_columns
    each_counts, each_infos, each_missed = counter._lookup_each(msgs)
    assert missed == each_missed
    hit = [i for i in range(len(msgs)) if i not in missed]
    assert [counts[i] for i in hit] == [each_counts[i] for i in hit]
    assert [infos[i] for i in hit] == [each_infos[i] for i in hit]
