"""Running summaries: one marked summary message that rolls forward and never accumulates,
failure policies, timeouts, and one summarizer call per pruned message through real savers."""

from __future__ import annotations

import asyncio
import copy
import sqlite3
import threading
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Annotated, Any, TypedDict, cast

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import Checkpoint
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

from agentstate_reducer import MessageReducer, ReducerConfig, read_message
from agentstate_reducer.summary import (
    SUMMARY_ID,
    SUMMARY_MARKER,
    default_summary_message,
    insert_position,
    is_summary_message,
    summary_count,
)
from agentstate_reducer.summary import SummaryMemo as CoreSummaryMemo
from checkpointers.reduction import SummaryMemo, areduce_checkpoint, reduce_checkpoint
from checkpointers.saver import ReducingCheckpointSaver
from tests.convo import BUILDERS, Spec, ids

FORMATS = list(BUILDERS)


@pytest.fixture(params=FORMATS)
def fmt(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(params=["sync", "async"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def summarized_ids(msg: Any) -> list[str]:
    """The ids a FakeModel summary lists (its text is the last line of the summary's content)."""
    content = read_message(msg).content
    return str(content).rsplit("\n", 1)[-1].split()


class FakeModel:
    """A deterministic summarizer: the new summary lists the previous summary's ids, then the ids of
    the newly pruned messages. So the final summary must list every pruned id exactly once, in order."""

    def __init__(
        self, *, fail_on: frozenset[int] = frozenset(), empty_on: frozenset[int] = frozenset()
    ) -> None:
        self.calls: list[list[Any]] = []
        self.fail_on, self.empty_on = fail_on, empty_on
        self.lock = threading.Lock()

    def __call__(self, pruned: list[Any]) -> str:
        with self.lock:
            self.calls.append(list(pruned))
            n = len(self.calls)
        if n in self.fail_on:
            raise RuntimeError(f"model down (call {n})")
        if n in self.empty_on:
            return ""
        out: list[str] = []
        for m in pruned:
            out += summarized_ids(m) if is_summary_message(m) else [str(read_message(m).id)]
        return " ".join(out)

    async def acall(self, pruned: list[Any]) -> str:
        await asyncio.sleep(0)
        return self(pruned)

    def new_ids(self) -> list[str]:
        """Every non-summary id the model was given, in call order (duplicates kept)."""
        return [str(read_message(m).id) for c in self.calls for m in c if not is_summary_message(m)]


def values_only(messages: list[Any]) -> Checkpoint:
    """A checkpoint holding only its channel values, on purpose: the reduction reads nothing else
    (the other keys are optional to it), so the tests leave them out."""
    return cast("Checkpoint", {"channel_values": {"messages": messages}})


def turn(t: int) -> Spec:
    return [("human", f"h{t}"), ("call", f"c{t}", [f"k{t}"]), ("tool", f"t{t}", f"k{t}"), ("ai", f"a{t}")]


async def run_reduce(reducer: MessageReducer, mode: str, existing: Any, new: Any = None) -> Any:
    if mode == "sync":
        return reducer.reduce(existing, new)
    return await reducer.areduce(existing, new)


def _is_shape_of(msg: Any, fmt: str) -> bool:
    if fmt == "langchain_object":
        return isinstance(msg, HumanMessage)
    if fmt == "langchain_dict":
        return msg.get("type") == "human" and msg["additional_kwargs"][SUMMARY_MARKER]["count"] > 0
    return msg.get("role") == "user" and msg[SUMMARY_MARKER]["count"] > 0


# -- rolling -------------------------------------------------------------------------------------


async def test_rolling_summary_over_20_prunes_keeps_exactly_one(fmt: str, mode: str) -> None:
    model = FakeModel()
    cfg = ReducerConfig(min_messages=6, max_messages=12, summarize_fn=model, inject_summary=True)
    if mode == "async":
        cfg = ReducerConfig(min_messages=6, max_messages=12, asummarize_fn=model.acall, inject_summary=True)
    reducer = MessageReducer(config=cfg)
    history = BUILDERS[fmt]([("system", "s")])
    all_pruned: list[str | None] = []
    prunes = 0
    for t in range(45):
        new = BUILDERS[fmt](turn(t))
        before = copy.deepcopy(history + new) if fmt != "langchain_object" else None
        result = await run_reduce(reducer, mode, history, new)
        if before is not None:
            assert history + new == before, "inputs must not be mutated"
        summaries = [m for m in result.surviving if is_summary_message(m)]
        if result.pruned:
            prunes += 1
            # the model got [previous summary, *newly pruned], which is exactly what was pruned
            assert model.calls[-1] == result.pruned
            previous = [m for m in history if is_summary_message(m)]
            assert [m for m in result.pruned if is_summary_message(m)] == previous
            # partition of input + the new summary
            assert Counter(map(id, result.surviving + result.pruned)) == Counter(
                map(id, [*history, *new, summaries[0]])
            )
            all_pruned += [i for i in ids(result.pruned) if i != SUMMARY_ID]
        if all_pruned:
            assert len(summaries) == 1
            assert ids(result.surviving)[:2] == ["s", SUMMARY_ID]
            assert read_message(result.surviving[2]).kind == "human"  # the kept history starts a turn
            assert _is_shape_of(summaries[0], fmt)
            assert summary_count(summaries[0]) == len(all_pruned)
            assert summarized_ids(summaries[0]) == all_pruned  # a running summary: nothing lost, in order
        history = result.surviving
    assert prunes >= 20
    assert len(model.calls) == prunes
    # live history + summary cover the whole conversation exactly once
    live = [i for i in ids(history) if i not in ("s", SUMMARY_ID)]
    every = [i for t in range(45) for i in ids(BUILDERS[fmt](turn(t)))]
    assert all_pruned + live == every


@pytest.mark.parametrize("role", ["system", "ai", "human"])
def test_factory_role_never_accumulates(role: str) -> None:
    model = FakeModel()

    def factory(text: str, count: int) -> Any:
        return {"role": role, "content": text}

    reducer = MessageReducer(config=ReducerConfig(
        min_messages=4, max_messages=8, summarize_fn=model, inject_summary=True,
        summary_message_factory=factory,
    ))
    history = BUILDERS["openai_dict"]([("system", "s")])
    for t in range(30):
        history = reducer.reduce(history, BUILDERS["openai_dict"](turn(t))).surviving
        assert [m["role"] for m in history if is_summary_message(m)] == ([role] if model.calls else [])
    assert len(model.calls) >= 20
    summary = history[1]
    assert summary["id"] == SUMMARY_ID and summary[SUMMARY_MARKER] == {"count": summary_count(summary)}
    assert summarized_ids(summary) == [i for i in model.new_ids()]


def test_factory_object_is_stamped_in_a_copy() -> None:
    made: list[Any] = []

    def factory(text: str, count: int) -> Any:
        made.append(AIMessage(content=f"{count}: {text}", id="mine", additional_kwargs={"x": 1}))
        return made[-1]

    reducer = MessageReducer(config=ReducerConfig(
        min_messages=4, max_messages=8, summarize_fn=lambda p: "sum", inject_summary=True,
        summary_message_factory=factory,
    ))
    result = reducer.reduce(BUILDERS["langchain_object"]([("system", "s"), *turn(0), *turn(1), *turn(2)]))
    summary = result.surviving[1]
    assert isinstance(summary, AIMessage) and summary.id == SUMMARY_ID and summary.content == "8: sum"
    assert summary.additional_kwargs == {"x": 1, SUMMARY_MARKER: {"count": 8}}
    assert made[0].id == "mine" and made[0].additional_kwargs == {"x": 1}  # the factory's object is untouched


def test_factory_returning_a_list_is_a_summary_error_and_keeps_everything() -> None:
    reducer = MessageReducer(config=ReducerConfig(
        min_messages=4, max_messages=8, summarize_fn=lambda p: "sum", inject_summary=True,
        summary_message_factory=lambda text, n: [{"role": "user", "content": text}, {"role": "assistant"}],
    ))
    msgs = BUILDERS["openai_dict"]([("system", "s"), *turn(0), *turn(1), *turn(2)])
    result = reducer.reduce(msgs)
    assert result.surviving == msgs and result.pruned == [] and result.summary is None
    assert result.stats.summary_error is not None and "ONE message" in result.stats.summary_error


@pytest.mark.parametrize(
    ("like", "expected"),
    [
        ({"role": "user", "content": "x"}, {"role": "user"}),
        ({"role": "human", "content": "x"}, {"role": "human"}),
        ({"type": "human", "content": "x"}, {"type": "human"}),
        ({"type": "ai", "data": {"content": "x"}}, {"type": "human"}),
        ({"lc": 1, "type": "constructor", "id": ["x", "AIMessage"], "kwargs": {"content": "x"}}, {"lc": 1}),
        (None, {"role": "user"}),
    ],
)
def test_default_message_shape_follows_the_input(like: Any, expected: dict[str, Any]) -> None:
    msg = default_summary_message("the gist", 7, like=like)
    assert expected.items() <= msg.items()
    info = read_message(msg)
    assert (info.kind, info.id) == ("human", SUMMARY_ID)
    assert info.content == "Summary of the earlier conversation (7 messages):\nthe gist"
    assert is_summary_message(msg) and summary_count(msg) == 7


def test_langgraph_add_messages_keeps_the_marker() -> None:
    from langgraph.graph.message import add_messages

    msg = default_summary_message("g", 3, like={"role": "user", "content": "x"})
    (converted,) = add_messages([], [msg])  # type: ignore[misc, str-unpack]  # lists here, not str
    assert isinstance(converted, HumanMessage)
    assert is_summary_message(converted) and summary_count(converted) == 3


def test_summary_goes_after_a_pinned_first_tool_group() -> None:
    # index 0 pinned by preserve_first is a tool call: its result must stay right after it
    spec: Spec = [("call", "c0", ["k0"]), ("tool", "t0", "k0"), *turn(1), *turn(2), *turn(3)]
    msgs = BUILDERS["langchain_dict"](spec)
    assert insert_position(msgs, preserve_first=True) == 2
    reducer = MessageReducer(config=ReducerConfig(
        min_messages=4, max_messages=8, summarize_fn=lambda p: "sum", inject_summary=True
    ))
    assert ids(reducer.reduce(msgs).surviving)[:4] == ["c0", "t0", SUMMARY_ID, "h3"]
    no_pin = MessageReducer(config=ReducerConfig(
        min_messages=4, max_messages=8, summarize_fn=lambda p: "sum", inject_summary=True,
        preserve_first=False,
    ))
    assert ids(no_pin.reduce(msgs).surviving) == [SUMMARY_ID, "h3", "c3", "t3", "a3"]


def test_without_injection_the_summary_is_only_returned() -> None:
    model = FakeModel()
    reducer = MessageReducer(config=ReducerConfig(min_messages=4, max_messages=8, summarize_fn=model))
    msgs = BUILDERS["openai_dict"]([("system", "s"), *turn(0), *turn(1), *turn(2)])
    result = reducer.reduce(msgs)
    assert ids(result.surviving) == ["s", "h2", "c2", "t2", "a2"]
    assert result.summary == "h0 c0 t0 a0 h1 c1 t1 a1"


def test_empty_summary_is_not_injected_and_the_previous_one_stays() -> None:
    model = FakeModel(empty_on=frozenset({2}))
    reducer = MessageReducer(config=ReducerConfig(
        min_messages=4, max_messages=8, summarize_fn=model, inject_summary=True
    ))
    first = reducer.reduce(BUILDERS["openai_dict"]([("system", "s"), *turn(0), *turn(1), *turn(2)]))
    assert ids(first.surviving) == ["s", SUMMARY_ID, "h2", "c2", "t2", "a2"]
    second = reducer.reduce(first.surviving, BUILDERS["openai_dict"](turn(3)))
    assert second.summary == ""
    assert second.surviving[1] is first.surviving[1]  # the previous summary, untouched
    assert ids(second.surviving) == ["s", SUMMARY_ID, "h3", "c3", "t3", "a3"]
    assert ids(second.pruned) == ["h2", "c2", "t2", "a2"]  # the held summary is not pruned


# -- failures and timeouts -----------------------------------------------------------------------


async def test_failing_summarizer_keeps_every_message_then_catches_up(
    mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    model = FakeModel(fail_on=frozenset({2}))
    reducer = MessageReducer(config=ReducerConfig(
        min_messages=4, max_messages=8, summarize_fn=model, inject_summary=True
    ))
    start = BUILDERS["openai_dict"]([("system", "s"), *turn(0), *turn(1), *turn(2)])
    first = await run_reduce(reducer, mode, start)
    grown = [*first.surviving, *BUILDERS["openai_dict"](turn(3))]
    failed = await run_reduce(reducer, mode, grown)
    assert failed.surviving == grown and failed.pruned == [] and failed.summary is None
    assert failed.stats.summary_error == "RuntimeError('model down (call 2)')"
    assert failed.stats.messages_after == len(grown)
    assert "summarize_fn failed" in caplog.text and "Traceback" in caplog.text
    # next reduction: the model gets the held summary and every message it missed
    caught_up = await run_reduce(reducer, mode, failed.surviving, BUILDERS["openai_dict"](turn(4)))
    assert ids(model.calls[-1]) == [SUMMARY_ID, "h2", "c2", "t2", "a2", "h3", "c3", "t3", "a3"]
    assert summarized_ids(caught_up.surviving[1]) == [
        "h0", "c0", "t0", "a0", "h1", "c1", "t1", "a1", "h2", "c2", "t2", "a2", "h3", "c3", "t3", "a3"
    ]


def test_prune_policy_prunes_without_a_new_summary() -> None:
    model = FakeModel(fail_on=frozenset({2}))
    reducer = MessageReducer(config=ReducerConfig(
        min_messages=4, max_messages=8, summarize_fn=model, inject_summary=True, on_summary_error="prune"
    ))
    first = reducer.reduce(BUILDERS["openai_dict"]([("system", "s"), *turn(0), *turn(1), *turn(2)]))
    second = reducer.reduce(first.surviving, BUILDERS["openai_dict"](turn(3)))
    assert ids(second.surviving) == ["s", SUMMARY_ID, "h3", "c3", "t3", "a3"]
    assert second.surviving[1] is first.surviving[1] and ids(second.pruned) == ["h2", "c2", "t2", "a2"]
    assert second.stats.summary_error is not None


async def test_timeout_counts_as_failure(mode: str) -> None:
    # The summarizer returns only once the test has its result: the timeout fires first however
    # slow the machine is.
    release = threading.Event()

    def slow(pruned: list[Any]) -> str:
        release.wait()
        return "late"

    async def aslow(pruned: list[Any]) -> str:
        await asyncio.to_thread(release.wait)
        return "late"

    fn: dict[str, Any] = {"summarize_fn": slow} if mode == "sync" else {"asummarize_fn": aslow}
    reducer = MessageReducer(config=ReducerConfig(
        min_messages=4, max_messages=8, inject_summary=True, summary_timeout=0.05, **fn
    ))
    msgs = BUILDERS["openai_dict"]([("system", "s"), *turn(0), *turn(1), *turn(2)])
    try:
        result = await run_reduce(reducer, mode, msgs)
    finally:
        release.set()
    assert result.surviving == msgs and result.pruned == []
    assert result.stats.summary_error is not None and result.stats.summary_error.startswith("TimeoutError(")


async def test_async_only_summarizer_works_from_sync_reduce_inside_a_running_loop() -> None:
    model = FakeModel()
    reducer = MessageReducer(config=ReducerConfig(
        min_messages=4, max_messages=8, asummarize_fn=model.acall, inject_summary=True
    ))
    result = reducer.reduce(BUILDERS["openai_dict"]([("system", "s"), *turn(0), *turn(1), *turn(2)]))
    assert result.summary == "h0 c0 t0 a0 h1 c1 t1 a1" and ids(result.surviving)[1] == SUMMARY_ID


@pytest.mark.parametrize(
    ("kwargs", "error", "text"),
    [
        ({"inject_summary": True}, ValueError, "inject_summary=True needs summarize_fn"),
        ({"summarize_fn": len, "summary_timeout": 0}, ValueError, "summary_timeout must be"),
        ({"summarize_fn": len, "summary_timeout": True}, ValueError, "summary_timeout must be"),
        ({"asummarize_fn": "no"}, TypeError, "asummarize_fn must be callable"),
    ],
)
def test_config_errors(kwargs: dict[str, Any], error: type[Exception], text: str) -> None:
    with pytest.raises(error, match=text):
        ReducerConfig(**kwargs)


# -- token mode ----------------------------------------------------------------------------------


def test_summary_is_counted_in_the_token_budget() -> None:
    model = FakeModel()
    reducer = MessageReducer(config=ReducerConfig(
        max_tokens=100, target_tokens=60, token_counter=lambda m: 10, summarize_fn=model, inject_summary=True
    ))
    spec: Spec = [("system", "s")] + [(k, f"{k[0]}{t}") for t in range(5) for k in ("human", "ai")]
    first = reducer.reduce(BUILDERS["openai_dict"](spec))  # 110 tokens > 100
    # room = 60 - 10 (system) = 50 -> 4 messages (cut at a human turn); the new summary adds 10
    assert ids(first.surviving) == ["s", SUMMARY_ID, "h3", "a3", "h4", "a4"]
    assert (first.stats.tokens_before, first.stats.tokens_after, first.stats.over_target) == (110, 60, False)
    more = BUILDERS["openai_dict"]([(k, f"{k[0]}{t}") for t in range(5, 8) for k in ("human", "ai")])
    second = reducer.reduce(first.surviving, more)  # 120 tokens
    # the held summary's 10 tokens come off the target: room 40 -> 4 messages
    assert ids(second.surviving) == ["s", SUMMARY_ID, "h6", "a6", "h7", "a7"]
    assert (second.stats.tokens_before, second.stats.tokens_after) == (120, 60)
    assert second.stats.messages_after == 6 and second.stats.pruned_count == 7  # 6 + the old summary


# -- once per pruned message, through real savers and a compiled graph ---------------------------


class S(TypedDict):
    messages: Annotated[list[BaseMessage], add_messages]


def _graph(saver: Any) -> Any:
    """A tool loop: every turn makes three tool calls, so one invoke puts a growing list many times."""
    def agent(state: S) -> dict[str, Any]:
        msgs = state["messages"]
        t = next(m.id for m in reversed(msgs) if isinstance(m, HumanMessage))
        steps = sum(1 for m in msgs if isinstance(m, AIMessage) and str(m.id).startswith(f"{t}-"))
        if steps < 3:
            call = {"name": "lookup", "args": {}, "id": f"{t}-k{steps}"}
            return {"messages": [AIMessage("", id=f"{t}-c{steps}", tool_calls=[call])]}
        return {"messages": [AIMessage(f"answer {t}", id=f"{t}-a")]}

    def tools(state: S) -> dict[str, Any]:
        last = state["messages"][-1]
        assert isinstance(last, AIMessage)
        call = last.tool_calls[0]
        return {"messages": [ToolMessage("result", id=f"{call['id']}-r", tool_call_id=call["id"])]}

    def route(state: S) -> str:
        return "tools" if getattr(state["messages"][-1], "tool_calls", None) else END

    b = StateGraph(S)
    b.add_node("agent", agent)
    b.add_node("tools", tools)
    b.add_edge(START, "agent")
    b.add_conditional_edges("agent", route, ["tools", END])
    b.add_edge("tools", "agent")
    return b.compile(checkpointer=saver)


def _reducing(inner: Any, reducer: MessageReducer, memo: SummaryMemo | None) -> ReducingCheckpointSaver:
    """The wrapper with its default memo (``memo`` given) or with the memo turned off (None)."""
    if memo is None:
        return ReducingCheckpointSaver(inner, reducer, summary_memo=None)
    return ReducingCheckpointSaver(inner, reducer)


@contextmanager
def _sync_saver(kind: str, path: Path, reducer: MessageReducer, memo: SummaryMemo | None) -> Iterator[Any]:
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.checkpoint.sqlite import SqliteSaver

    if kind == "memory":
        yield _reducing(InMemorySaver(), reducer, memo)
        return
    conn = sqlite3.connect(path, check_same_thread=False)
    try:
        yield _reducing(SqliteSaver(conn), reducer, memo)
    finally:
        conn.close()


@asynccontextmanager
async def _async_saver(
    kind: str, path: Path, reducer: MessageReducer, memo: SummaryMemo | None
) -> AsyncIterator[Any]:
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    if kind == "memory":
        yield _reducing(InMemorySaver(), reducer, memo)
        return
    async with AsyncSqliteSaver.from_conn_string(str(path)) as inner:
        yield _reducing(inner, reducer, memo)


async def _run_turns(
    kind: str, mode: str, path: Path, model: FakeModel, memo: SummaryMemo | None, turns: int
) -> list[Any]:
    reducer = MessageReducer(config=ReducerConfig(
        min_messages=6, max_messages=12, summarize_fn=model, inject_summary=True
    ))
    cfg = {"configurable": {"thread_id": "t"}}
    first = [SystemMessage("sys", id="sys")]
    if mode == "sync":
        with _sync_saver(kind, path, reducer, memo) as saver:
            graph = _graph(saver)
            for t in range(turns):
                graph.invoke({"messages": [*first, HumanMessage(f"q{t}", id=f"h{t}")]}, cfg)
                first = []
            return list(graph.get_state(cfg).values["messages"])
    async with _async_saver(kind, path, reducer, memo) as saver:
        graph = _graph(saver)
        for t in range(turns):
            await graph.ainvoke({"messages": [*first, HumanMessage(f"q{t}", id=f"h{t}")]}, cfg)
            first = []
        return list((await graph.aget_state(cfg)).values["messages"])


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_summarizer_called_once_per_pruned_message_through_a_saver(
    kind: str, mode: str, tmp_path: Path
) -> None:
    turns = 8
    every = [f"h{t}{suffix}" for t in range(turns)
             for suffix in ("", "-c0", "-k0-r", "-c1", "-k1-r", "-c2", "-k2-r", "-a")]
    model = FakeModel()
    live = await _run_turns(kind, mode, tmp_path / "memo.sqlite", model, SummaryMemo(), turns)
    live_ids = [i for i in ids(live) if i not in ("sys", SUMMARY_ID)]
    summary = live[1]
    assert ids(live)[:2] == ["sys", SUMMARY_ID]
    # every message left the live history exactly once, into the summary, in order
    assert model.new_ids() == summarized_ids(summary)
    assert summarized_ids(summary) + live_ids == every
    assert len(model.new_ids()) == len(set(model.new_ids()))

    # the same run without the memo calls the model again for messages it already summarized
    again = FakeModel()
    await _run_turns(kind, mode, tmp_path / "nomemo.sqlite", again, None, turns)
    assert len(again.calls) > len(model.calls)
    assert len(again.new_ids()) > len(set(again.new_ids()))


async def test_retried_put_and_same_state_do_not_call_the_model_again(mode: str) -> None:
    model = FakeModel()
    reducer = MessageReducer(config=ReducerConfig(
        min_messages=4, max_messages=8, summarize_fn=model, inject_summary=True
    ))
    memo = SummaryMemo()
    full = BUILDERS["langchain_object"]([("system", "s"), *turn(0), *turn(1), *turn(2)])
    # only the keys the reduction reads, on purpose
    checkpoint = cast("Checkpoint", {
        "id": "c1", "channel_values": {"messages": full}, "channel_versions": {"messages": 1}
    })
    config: RunnableConfig = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}

    async def put(cp: Any) -> Any:
        if mode == "sync":
            return reduce_checkpoint(reducer, config, cp, {"messages": 1}, summary_memo=memo)[0]
        return (await areduce_checkpoint(reducer, config, cp, {"messages": 1}, summary_memo=memo))[0]

    stored = [await put(checkpoint) for _ in range(3)]  # a put retried twice
    # the same state again, as copies (read back from storage): found by ids, not by identity
    copies: Checkpoint = {**checkpoint, "channel_values": {"messages": copy.deepcopy(full)}}
    stored.append(await put(copies))
    assert len(model.calls) == 1
    for s in stored:
        assert ids(s["channel_values"]["messages"]) == ["s", SUMMARY_ID, "h2", "c2", "t2", "a2"]
    assert checkpoint["channel_values"]["messages"] is full and len(full) == 13  # never mutated
    # the run goes on with its full in-memory list: only the new messages are summarized
    grown: Checkpoint = {
        **checkpoint, "channel_values": {"messages": [*full, *BUILDERS["langchain_object"](turn(3))]}
    }
    out = await put(grown)
    assert ids(out["channel_values"]["messages"]) == ["s", SUMMARY_ID, "h3", "c3", "t3", "a3"]
    assert len(model.calls) == 2 and ids(model.calls[1]) == [SUMMARY_ID, "h2", "c2", "t2", "a2"]
    # another thread is another chain
    other: RunnableConfig = {"configurable": {"thread_id": "u", "checkpoint_ns": ""}}
    reduce_checkpoint(reducer, other, checkpoint, {"messages": 1}, summary_memo=memo)
    assert len(model.calls) == 3 and len(memo) == 2


def test_memo_ignores_a_list_it_did_not_record() -> None:
    model = FakeModel()
    reducer = MessageReducer(config=ReducerConfig(
        min_messages=4, max_messages=8, summarize_fn=model, inject_summary=True
    ))
    memo = SummaryMemo(max_threads=1)
    config: RunnableConfig = {"configurable": {"thread_id": "t"}}
    full = BUILDERS["openai_dict"]([("system", "s"), *turn(0), *turn(1), *turn(2)])
    reduce_checkpoint(reducer, config, values_only(full), {}, summary_memo=memo)
    # a fork from before turn 1 (covered ids missing): reduced from scratch, the memo is not applied
    fork = BUILDERS["openai_dict"]([("system", "s"), *turn(0), *turn(5), *turn(6)])
    out, _ = reduce_checkpoint(reducer, config, values_only(fork), {}, summary_memo=memo)
    assert ids(out["channel_values"]["messages"]) == ["s", SUMMARY_ID, "h6", "c6", "t6", "a6"]
    assert ids(model.calls[-1]) == ["h0", "c0", "t0", "a0", "h5", "c5", "t5", "a5"]
    with pytest.raises(ValueError, match="max_threads"):
        SummaryMemo(max_threads=0)


def test_memo_without_injection_summarizes_only_new_messages() -> None:
    model = FakeModel()
    reducer = MessageReducer(config=ReducerConfig(min_messages=4, max_messages=8, summarize_fn=model))
    memo = SummaryMemo()
    config: RunnableConfig = {"configurable": {"thread_id": "t"}}
    full = BUILDERS["openai_dict"]([("system", "s"), *turn(0), *turn(1), *turn(2)])
    def put(msgs: list[Any]) -> Any:
        return reduce_checkpoint(reducer, config, values_only(msgs), {}, summary_memo=memo)

    out, report = put(full)
    assert report.summary == "h0 c0 t0 a0 h1 c1 t1 a1"
    out, report = put([*full, *BUILDERS["openai_dict"]([*turn(3), *turn(4)])])
    assert ids(out["channel_values"]["messages"]) == ["s", "h4", "c4", "t4", "a4"]
    assert report.summary == "h2 c2 t2 a2 h3 c3 t3 a3"  # not h0..a1 again


@pytest.mark.parametrize("same_objects", [True, False], ids=["same objects", "copies"])
def test_memo_from_the_core_summarizes_a_list_reduced_again_on_every_call(same_objects: bool) -> None:
    """A caller that reduces the whole state on every model call (a middleware) uses the core's
    memo: one ``start`` before reducing, one ``record`` after; each message is summarized once."""
    model = FakeModel()
    reducer = MessageReducer(config=ReducerConfig(
        min_messages=4, max_messages=8, summarize_fn=model, inject_summary=True
    ))
    memo = CoreSummaryMemo()
    full = BUILDERS["openai_dict"]([("system", "s")])
    for t in range(6):
        full = [*full, *BUILDERS["openai_dict"](turn(t))]
        given = full if same_objects else copy.deepcopy(full)
        snapshot = copy.deepcopy(given)
        run = memo.start("thread", given, preserve_first=False)
        result = reducer.reduce(run.messages)
        run.record(result)
        assert given == snapshot  # the memo never changes the caller's list
        # nothing recorded before the first prune (t == 1); from then on the memo cuts what the
        # summary already covers, and the reducer gets the list as a stored checkpoint has it
        assert (run.messages is given) == (t <= 1)
        if t == 0:
            assert result.pruned == []  # under the trigger: nothing to do
        else:
            assert ids(result.surviving) == ["s", SUMMARY_ID, f"h{t}", f"c{t}", f"t{t}", f"a{t}"]
    # every message but the last turn's reached the model exactly once, in order
    assert model.new_ids() == [i for t in range(5) for i in (f"h{t}", f"c{t}", f"t{t}", f"a{t}")]
    assert summarized_ids(result.surviving[1]) == model.new_ids()
    assert len(memo) == 1


def test_memo_serves_a_retry_that_starts_from_a_summary_it_made_since() -> None:
    """A run prunes twice; the list with the first summary is stored, the reduction with the second
    is lost (its put failed). The retry starts from the stored list: the memo cuts what the second
    summary covers and puts it in, so no message reaches the summarizer twice."""
    model = FakeModel()
    reducer = MessageReducer(config=ReducerConfig(
        min_messages=4, max_messages=8, summarize_fn=model, inject_summary=True
    ))
    memo = CoreSummaryMemo()
    live = BUILDERS["openai_dict"]([("system", "s"), *turn(0), *turn(1)])
    stored: list[Any] = []
    for t in (2, 3):  # one run: the live list grows, each put reduces it
        live = [*live, *BUILDERS["openai_dict"](turn(t))]
        run = memo.start("thread", live, preserve_first=False)
        result = reducer.reduce(run.messages)
        run.record(result)
        if t == 2:
            stored = result.surviving  # this put succeeded; the next one fails
    assert ids(stored) == ["s", SUMMARY_ID, *[f"{k}2" for k in "hcta"]]
    retry = [*stored, *BUILDERS["openai_dict"](turn(3))]
    run = memo.start("thread", retry, preserve_first=False)
    assert ids(run.messages) == ["s", SUMMARY_ID, *[f"{k}3" for k in "hcta"]]
    run.record(reducer.reduce(run.messages))
    assert model.new_ids() == [i for t in range(3) for i in (f"h{t}", f"c{t}", f"t{t}", f"a{t}")]
    assert summarized_ids(run.messages[1]) == model.new_ids()


def test_memo_start_without_a_record_for_the_key_hands_back_the_list_itself() -> None:
    memo = CoreSummaryMemo()
    msgs = BUILDERS["openai_dict"]([("system", "s"), *turn(0)])
    run = memo.start(("t", ""), msgs, preserve_first=True)
    assert run.messages is msgs
    run.record(MessageReducer().reduce(msgs))  # nothing pruned: nothing remembered
    assert len(memo) == 0


def test_checkpointers_reexport_the_core_memo() -> None:
    import checkpointers
    import checkpointers.reduction

    assert checkpointers.SummaryMemo is checkpointers.reduction.SummaryMemo is CoreSummaryMemo
