"""Token mode reads the counts of a history's unchanged old messages without checking them, and
checks the ones its decision reads.

A reducer that reduced a history before plans on the remembered counts of the messages equal
(``==``, identity first) to those of its last reduction at the same places, then confirms those
the decision depends on (``reducer._read_by``: the newest messages worth more than
``max_tokens``, and every kept message) and plans again with every count checked when one of
them changed. So a message edited in place is recounted wherever the decision reads its count,
and the survivors always equal a fresh reducer's; an edit older than that window changes only
``stats.tokens_before``, which may then hold the edited message's count from before the edit
(docs/tokens.md).
"""

from __future__ import annotations

import copy
import dataclasses
import operator
import random
import threading
from itertools import accumulate
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from langchain_core.messages import (
    AIMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    convert_to_openai_messages,
)

from agentstate_reducer import MessageReducer, ReducerConfig, _columns
from agentstate_reducer._columns.table import plan_by_table
from agentstate_reducer.planner import Plan
from agentstate_reducer.reducer import _read_by
from agentstate_reducer.tokens import heuristic_counter


def history(n_turns: int, seed: int, *, dicts: bool = False, mid_system: bool = False) -> list[Any]:
    """A system prompt, then turns of human / (AI tool call, tool result) / AI answer."""
    rng = random.Random(seed)

    def text(low: int, high: int) -> str:
        return " ".join(
            rng.choice(("alpha", "beta", "gamma", "delta")) for _ in range(rng.randint(low, high))
        )

    msgs: list[Any] = [SystemMessage(text(5, 20), id="sys")]
    for t in range(n_turns):
        msgs.append(HumanMessage(text(1, 30), id=f"h{t}"))
        if rng.random() < 0.5:
            call = {"name": "search", "args": {"q": text(1, 4)}, "id": f"call{t}"}
            msgs.append(AIMessage("", tool_calls=[call], id=f"c{t}"))
            msgs.append(ToolMessage(text(1, 60), tool_call_id=f"call{t}", id=f"t{t}"))
        if mid_system and rng.random() < 0.05:
            msgs.append(SystemMessage(text(1, 5), id=f"s{t}"))
        msgs.append(AIMessage(text(1, 40), id=f"a{t}"))
    if dicts:
        return [{**m, "id": f"m{i}"} for i, m in enumerate(convert_to_openai_messages(msgs))]
    return msgs


def edit(message: Any, text: str) -> None:
    """Change a message's text in place, its structure kept: the content of a message with
    text, else (an AI message calling tools) the arguments of its first call."""
    if isinstance(message, dict):
        if message.get("content"):
            message["content"] = message["content"] + text
        else:
            message["tool_calls"][0]["function"]["arguments"] += text
    elif message.content:
        message.content = message.content + text
    else:
        message.tool_calls[0]["args"]["q"] += text


def warm_reducer(config: ReducerConfig, msgs: list[Any]) -> MessageReducer:
    reducer = MessageReducer(config=config)
    reducer.reduce(msgs)
    reducer.reduce(msgs)  # the heuristic caches a message it reads by columns on its second sight
    return reducer


def config(msgs: list[Any], share: float, **kw: Any) -> ReducerConfig:
    total = sum(heuristic_counter(cache_size=0).count_messages(msgs))
    return ReducerConfig(max_tokens=max(1, int(total * share)), token_counter=heuristic_counter(), **kw)


def fresh(config: ReducerConfig) -> MessageReducer:
    return MessageReducer(config=dataclasses.replace(config, token_counter=heuristic_counter()))


def new_message(dicts: bool) -> Any:
    return (
        {"role": "user", "content": "and now?", "id": "new"} if dicts else HumanMessage("and now?", id="new")
    )


@pytest.mark.parametrize("dicts", [False, True])
def test_counts_of_a_remembered_prefix_come_unchecked_and_confirm_the_window(dicts: bool) -> None:
    """The column path's count with a remembered list's columns (what a reducer's memo hands
    it) takes the shared prefix's counts unchecked; ``confirm`` checks any part of them."""
    msgs = history(60, 1, dicts=dicts)
    counter = heuristic_counter()
    counter.count_messages(msgs)
    columns = _columns.count(counter, msgs).columns  # the second sight caches them
    assert columns is not None
    counts, _, unchecked, _ = _columns.count(counter, [*msgs, new_message(dicts)], columns, len(msgs))
    assert unchecked is not None and unchecked.upto == len(msgs)
    assert counts[: len(msgs)] == heuristic_counter(cache_size=0).count_messages(msgs)
    assert counter.confirm(msgs, unchecked, 0)
    edit(msgs[5], " edited")
    assert not counter.confirm(msgs, unchecked, 0)
    assert counter.confirm(msgs, unchecked, 6)  # the edit is older than what is confirmed
    assert not counter.confirm(msgs, unchecked, 6, [5])
    assert counter.confirm(msgs, unchecked, 6, [0, 1])


@pytest.mark.parametrize("dicts", [False, True])
def test_an_edit_the_decision_reads_is_recounted(dicts: bool) -> None:
    msgs = history(60, 2, dicts=dicts)
    cfg = config(msgs, 0.3)
    reducer = warm_reducer(cfg, msgs)
    edit(msgs[-1], " and a much longer answer" * 40)  # newest: kept, or pushed out by its size
    new = new_message(dicts)
    got = reducer.reduce(msgs, [new])
    want = fresh(cfg).reduce(msgs, [new])
    assert got.surviving == want.surviving and got.pruned == want.pruned
    assert got.stats == want.stats


@pytest.mark.parametrize("dicts", [False, True])
def test_an_edit_older_than_the_window_changes_only_tokens_before(dicts: bool) -> None:
    msgs = history(60, 3, dicts=dicts)
    cfg = config(msgs, 0.3)
    reducer = warm_reducer(cfg, msgs)
    before = heuristic_counter(cache_size=0).count_messages([msgs[1]])[0]
    edit(msgs[1], " edited" * 30)  # the first human message: long pruned
    after = heuristic_counter(cache_size=0).count_messages([msgs[1]])[0]
    assert after > before
    new = new_message(dicts)
    got = reducer.reduce(msgs, [new])
    want = fresh(cfg).reduce(msgs, [new])
    assert want.stats.triggered and any(m is msgs[1] for m in want.pruned)
    assert got.surviving == want.surviving and got.pruned == want.pruned
    assert want.stats.tokens_before is not None
    # the column path takes the pruned message's count unchecked (its count before the edit);
    # the reference checks every count
    stale = want.stats.tokens_before - after + before
    assert got.stats.tokens_before == (stale if _columns.enabled else want.stats.tokens_before)
    assert got.stats.tokens_after == want.stats.tokens_after
    # a reduction that reads every count (untriggered: the history cut to what survived, plus
    # the edited message) counts the edited message anew
    short = [msgs[0], msgs[1], *got.surviving[1:]]
    again = reducer.reduce(short).stats
    assert not again.triggered
    assert again.tokens_before == fresh(cfg).reduce(short).stats.tokens_before


def test_an_untriggered_reduction_checks_every_count() -> None:
    msgs = history(30, 4)
    cfg = config(msgs, 1.5)
    reducer = warm_reducer(cfg, msgs)
    edit(msgs[1], " edited" * 30)
    got = reducer.reduce(msgs)
    assert not got.stats.triggered
    assert got.stats == fresh(cfg).reduce(msgs).stats


@pytest.mark.parametrize("dicts", [False, True])
@settings(max_examples=150, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    turns=st.integers(1, 40),
    share=st.floats(0.05, 1.2),
    target=st.floats(0.2, 1.0),
    preserve_first=st.booleans(),
    start_on_human=st.booleans(),
    mid_system=st.booleans(),
    edits=st.lists(st.tuples(st.floats(0, 1), st.integers(1, 200)), max_size=4),
)
def test_warm_equals_fresh_after_edits_in_place(
    dicts: bool,
    seed: int,
    turns: int,
    share: float,
    target: float,
    preserve_first: bool,
    start_on_human: bool,
    mid_system: bool,
    edits: list[tuple[float, int]],
) -> None:
    msgs = history(turns, seed, dicts=dicts, mid_system=mid_system)
    base = config(msgs, share, preserve_first=preserve_first, start_on_human=start_on_human)
    assert base.max_tokens is not None
    cfg = dataclasses.replace(base, target_tokens=max(0, int(base.max_tokens * target)))
    reducer = warm_reducer(cfg, msgs)
    counter = heuristic_counter(cache_size=0)
    old = counter.count_messages(msgs)
    edited = set()
    for where, size in edits:
        i = min(int(where * len(msgs)), len(msgs) - 1)
        edit(msgs[i], " x" * size)
        edited.add(i)
    new = new_message(dicts)
    got = reducer.reduce(msgs, [new])
    want = fresh(cfg).reduce(msgs, [new])
    assert got.surviving == want.surviving and got.pruned == want.pruned
    assert [id(m) for m in got.surviving] == [id(m) for m in want.surviving]
    # tokens_before: each edited message counted now, or (older than the window) as before
    now = counter.count_messages(msgs)
    assert want.stats.tokens_before is not None
    stale = {want.stats.tokens_before - sum(now[i] - old[i] for i in subset) for subset in _subsets(edited)}
    assert got.stats.tokens_before in stale
    for field in (
        "triggered",
        "messages_before",
        "messages_after",
        "pruned_count",
        "tokens_after",
        "over_target",
    ):
        assert getattr(got.stats, field) == getattr(want.stats, field), field
    if not edited:
        assert got.stats == want.stats


def _subsets(items: set[int]) -> list[list[int]]:
    out: list[list[int]] = [[]]
    for item in sorted(items):
        out += [[*s, item] for s in out]
    return out


@settings(max_examples=300, deadline=None)
@given(
    costs=st.lists(st.integers(0, 50), min_size=1, max_size=400),
    share=st.floats(0, 0.99),
    upto_share=st.floats(0, 1),
)
def test_read_by_starts_at_the_newest_messages_worth_more_than_max_tokens(
    costs: list[int], share: float, upto_share: float
) -> None:
    total = sum(costs)
    max_tokens = int(total * share)
    assume(total > max_tokens)
    n = len(costs)
    upto = int(n * upto_share)
    kept = (0, n - 1)
    p = Plan(kept, True, False, total, 0, None, (max_tokens + 1, n))  # found for another amount
    lo, extra = _read_by(p, costs, max_tokens, upto, ())
    suffix = list(accumulate(reversed(costs)))  # suffix[j]: the newest j + 1 messages
    s = n - 1 - next(j for j, v in enumerate(suffix) if v > max_tokens)
    assert lo == min(s, upto)
    assert extra == [i for i in kept if i < lo]
    # where the planner found the newest messages worth more than max_tokens, that is taken
    found = dataclasses.replace(p, newest=(max_tokens, s))
    assert _read_by(found, costs, max_tokens, upto, ()) == (lo, extra)
    # a plan not made by the table, or untriggered, or around a held summary: every message
    assert _read_by(Plan(kept, True, False, total, 0, None), costs, max_tokens, upto, ()) == (0, [])
    untriggered = dataclasses.replace(found, triggered=False)
    assert _read_by(untriggered, costs, max_tokens, upto, ()) == (0, [])
    assert _read_by(p, costs, max_tokens, upto, (0,)) == (0, [])


@pytest.mark.parametrize("dicts", [False, True])
def test_a_history_growing_turn_by_turn_is_confirmed_without_edits(dicts: bool) -> None:
    """Each turn adds messages the heuristic counted once by columns (not cached yet): they are
    checked, not taken unchecked, so a confirmation of every unchecked count succeeds."""
    msgs = history(40, 5, dicts=dicts)
    counter = heuristic_counter()
    seen = 10
    counter.count_messages(msgs[:seen])
    columns = _columns.count(counter, msgs[:seen]).columns  # the second sight caches them
    while seen < len(msgs):
        before, seen = seen, min(len(msgs), seen + 3)
        counts, _, unchecked, columns = _columns.count(counter, msgs[:seen], columns, before)
        assert counts == heuristic_counter(cache_size=0).count_messages(msgs[:seen])
        assert unchecked is not None
        assert counter.confirm(msgs[:seen], unchecked, 0)


class _ReadOneByOne(HumanMessage):
    """A LangChain message class the counter does not read by columns (its own ``__getattr__``)."""

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(name)


def test_a_message_turned_into_a_class_read_otherwise_leaves_the_rest_confirmed() -> None:
    """The counter forgets its memo when a message changes to a class it cannot read by
    columns; the counts it took unchecked before that are still confirmed (and an edit there
    recounted)."""
    msgs: list[Any] = [SystemMessage("be brief", id="s")]
    for t in range(10):
        msgs += [HumanMessage(f"question {t} " * 5, id=f"h{t}"), AIMessage(f"answer {t} " * 5, id=f"a{t}")]
    msgs[-1] = AIMessage([{"type": "text", "text": "short"}], id="a9")  # cached at first sight
    cfg = ReducerConfig(max_tokens=150, token_counter=heuristic_counter())
    reducer = MessageReducer(config=cfg)
    reducer.reduce(msgs)
    msgs[-1].content[0]["text"] = "a very long answer " * 100
    msgs[3].__class__ = _ReadOneByOne
    new = HumanMessage("and now?", id="new")
    got = reducer.reduce(msgs, [new])
    want = fresh(cfg).reduce(msgs, [new])
    assert [m.id for m in got.surviving] == [m.id for m in want.surviving] == ["s", "new"]
    assert got.stats == want.stats


def test_a_failed_summary_kept_whole_reports_checked_counts() -> None:
    """With ``on_summary_error="keep"`` nothing is pruned: both token figures are of every
    message, counted after the edit."""

    def down(messages: list[Any]) -> str:
        raise RuntimeError("summarizer down")

    msgs = history(20, 6)
    cfg = config(msgs, 0.3, summarize_fn=down, on_summary_error="keep")
    reducer = warm_reducer(cfg, msgs)
    edit(msgs[1], " a much longer first question" * 50)
    new = new_message(False)
    got = reducer.reduce(msgs, [new])
    want = fresh(cfg).reduce(msgs, [new])
    total = sum(heuristic_counter(cache_size=0).count_messages([*msgs, new]))
    assert got.pruned == [] and got.stats.summary_error is not None
    assert got.stats.tokens_before == got.stats.tokens_after == want.stats.tokens_after == total


def replace(msgs: list[Any], op: str, value: int) -> list[Any]:
    """A new list with messages replaced by other objects (nothing changed in place): ``copy``
    one message by an equal copy, ``copy_rest`` every message but the first, ``reword`` one by a
    copy with other text (its id kept)."""
    out = list(msgs)
    if op == "copy_rest":
        return [out[0], *map(copy.deepcopy, out[1:])]
    i = value % len(out)
    out[i] = copy.deepcopy(out[i])
    if op == "reword":
        edit(out[i], " y" * (1 + value % 5))
    return out


STEPS = st.lists(
    st.tuples(
        st.sampled_from(
            ("append", "replace_last", "edit", "truncate", "same", "copy", "copy_rest", "reword")
        ),
        st.integers(0, 10_000),
    ),
    min_size=1,
    max_size=12,
)


@pytest.mark.parametrize("dicts", [False, True])
@settings(max_examples=120, deadline=None)
@given(seed=st.integers(0, 10_000), steps=STEPS, cache_size=st.sampled_from((8, 64, 65_536)))
def test_unchecked_counts_confirmed_are_fresh_counts(
    dicts: bool, seed: int, steps: list[tuple[str, int]], cache_size: int
) -> None:
    """Histories that grow, lose their last message, are cut or edited in place, counted turn
    after turn: counts that ``confirm`` accepts are fresh counts, else ``read_and_count`` gives
    fresh counts; and a later call, which may take the counter's lists over, never changes what
    an earlier call's ``Unchecked`` compares with."""
    pool = history(40, seed, dicts=dicts)
    counter = heuristic_counter(cache_size=cache_size)
    exact = heuristic_counter(cache_size=0)
    msgs = pool[:10]
    earlier: list[tuple[Any, list[Any]]] = []
    for op, value in steps:
        if op == "append" and len(msgs) < len(pool):
            msgs = msgs + pool[len(msgs) : len(msgs) + 1 + value % 3]
        elif op == "replace_last":
            msgs = [*msgs[:-1], new_message(dicts)]
        elif op == "edit":
            edit(msgs[value % len(msgs)], " x" * (1 + value % 7))
        elif op == "truncate":
            msgs = msgs[: 1 + value % len(msgs)]
        elif op in ("copy", "copy_rest", "reword"):
            msgs = replace(msgs, op, value)
        counts, infos, unchecked = counter.read_and_count_unchecked(list(msgs))
        want = exact.read_and_count(msgs)
        if unchecked is None or counter.confirm(msgs, unchecked, 0):
            assert (counts, infos) == want
        else:
            assert counter.read_and_count(list(msgs)) == want
        for handle, before in earlier:  # what earlier calls compare with stays as it was
            assert all(map(operator.is_, handle.snapshots[: handle.upto], before))
        if unchecked is not None:
            earlier.append((unchecked, unchecked.snapshots[: unchecked.upto]))


@pytest.mark.parametrize("dicts", [False, True])
@settings(max_examples=100, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    turns=st.integers(1, 30),
    share=st.floats(0.05, 1.2),
    steps=st.lists(
        st.tuples(st.sampled_from(("copy", "copy_rest", "reword", "grow")), st.integers(0, 10_000)),
        min_size=1,
        max_size=5,
    ),
)
def test_warm_equals_fresh_after_messages_are_replaced(
    dicts: bool, seed: int, turns: int, share: float, steps: list[tuple[str, int]]
) -> None:
    """A warm reduction takes the old counts of the messages equal (``==``) to those of its
    last list at the same places; a message replaced by another object with other text, where
    the decision does not read it, is counted anew all the same: no edit is in place, so every
    figure equals a fresh reducer's."""
    pool = history(turns + 10, seed, dicts=dicts)
    msgs = pool[: max(2, len(pool) - 12)]
    cfg = config(msgs, share)
    reducer = warm_reducer(cfg, msgs)
    for op, value in steps:
        if op == "grow":
            msgs = pool[: len(msgs) + 1 + value % 3]
        else:
            msgs = replace(msgs, op, value)
        new = new_message(dicts)
        got = reducer.reduce(msgs, [new])
        want = fresh(cfg).reduce(msgs, [new])
        assert [id(m) for m in got.surviving] == [id(m) for m in want.surviving]
        assert [id(m) for m in got.pruned] == [id(m) for m in want.pruned]
        assert got.stats == want.stats


def test_lists_handed_out_stay_as_they_were_while_another_thread_counts() -> None:
    """A caller still planning on the counts and readings ``read_and_count_unchecked`` handed it
    while another thread counts the same history with another last message, then with more:
    the other thread's calls copy what they need instead of taking those lists over."""
    counter = heuristic_counter()
    h = history(10, 3)
    for _ in range(3):
        counter.read_and_count_unchecked(h)
    counts, infos, _ = counter.read_and_count_unchecked([*h, HumanMessage("short", id="x1")])
    before = (list(counts), list(infos))

    def other_thread() -> None:
        theirs = [*h, AIMessage("long " * 400, id="x2")]
        counter.read_and_count_unchecked(theirs)
        counter.read_and_count_unchecked([*theirs, HumanMessage("more", id="x3")])

    worker = threading.Thread(target=other_thread)
    worker.start()
    worker.join()
    assert counts == before[0] and infos == before[1]
    assert all(map(operator.is_, infos, before[1]))


def test_a_reduction_in_another_thread_while_one_plans_changes_nothing_it_reads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two reducers sharing one counter: while the first plans, the second reduces the same
    history with a long last message in another thread. The first keeps what a fresh reducer
    keeps."""
    msgs = [SystemMessage("sys", id="s")] + [
        (HumanMessage if i % 2 == 0 else AIMessage)("word " * 10, id=f"m{i}") for i in range(40)
    ]
    counter = heuristic_counter()
    cfg = ReducerConfig(max_tokens=300, target_tokens=200, token_counter=counter)
    first = warm_reducer(cfg, msgs)
    planner = plan_by_table

    def plan_while_another_thread_reduces(*args: Any, **kwargs: Any) -> Any:
        monkeypatch.setattr(_columns, "plan", planner)
        other = threading.Thread(
            target=MessageReducer(config=cfg).reduce, args=(msgs, [AIMessage("long " * 2000, id="b")])
        )
        other.start()
        other.join()
        return planner(*args, **kwargs)

    monkeypatch.setattr(_columns, "plan", plan_while_another_thread_reduces)
    new = HumanMessage("short", id="a")
    got = first.reduce(msgs, [new])
    want = fresh(cfg).reduce(msgs, [new])
    assert [id(m) for m in got.surviving] == [id(m) for m in want.surviving]
    assert got.stats == want.stats


class _SameId:
    """``==`` by message id only, not by content."""

    id: Any

    def __eq__(self, other: object) -> bool:
        return getattr(other, "id", None) == self.id

    __hash__ = None  # type: ignore[assignment]


class _IdHuman(_SameId, HumanMessage):
    pass


class _IdSystem(_SameId, SystemMessage):
    pass


class _IdAI(_SameId, AIMessage):
    pass


def test_a_message_class_with_its_own_equality_is_compared_by_identity() -> None:
    """A message replaced by a system message with the same id, of classes whose ``==`` compares
    ids only: a warm reduction keeps the new system message, as a fresh reducer does."""
    msgs: list[Any] = [_IdSystem(content="sys", id="s0")]
    for t in range(30):
        msgs += [_IdHuman(content="hello " * 20, id=f"h{t}"), _IdAI(content="answer " * 20, id=f"a{t}")]
    cfg = ReducerConfig(max_tokens=600, target_tokens=400, token_counter=heuristic_counter())
    reducer = warm_reducer(cfg, msgs)
    replaced = list(msgs)
    replaced[3] = _IdSystem(content="pinned instructions", id=msgs[3].id)
    new = _IdHuman(content="next", id="new")
    got = reducer.reduce(replaced, [new])
    want = fresh(cfg).reduce(replaced, [new])
    assert any(m is replaced[3] for m in want.surviving)
    assert [id(m) for m in got.surviving] == [id(m) for m in want.surviving]
    assert got.stats == want.stats
