"""``compact_thread`` on a thread whose messages channel is a LangGraph ``DeltaChannel``: the
value a load rebuilds is reduced and stored as a snapshot on a new checkpoint, so the next load is
the reduced list, each message is kept or pruned exactly once, the other channels are untouched,
a dry run writes nothing, and the thread goes on."""

from __future__ import annotations

from typing import Any

import pytest

from agentstate_reducer import MessageReducer, ReducerConfig
from checkpointers.compact import compact_thread
from tests.scenario_graph import open_saver
from tests.test_delta_retention import ALIGNED, LARGE_K, build, config, expected, run, values

KINDS = ["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
CADENCES = [pytest.param(ALIGNED, id="snapshots-in-the-run"), pytest.param(LARGE_K, id="no-snapshot")]
TURNS = 10  # three messages a turn


def _checkpoints(graph: Any, thread_id: str) -> int:
    return len(list(graph.get_state_history(config(thread_id))))


@pytest.mark.parametrize("cadence", CADENCES)
@pytest.mark.parametrize("kind", KINDS)
def test_compact_thread_reduces_a_delta_messages_channel(
    kind: str, cadence: tuple[int, int, int], tmp_path: Any, request: pytest.FixtureRequest
) -> None:
    pg = request.getfixturevalue("postgres_server") if kind == "postgres" else None
    pg_url = None if pg is None else pg.new_database("dcompact")
    pruned: list[str] = []
    reducer = MessageReducer(
        config=ReducerConfig(
            min_messages=6, max_messages=12, on_prune=[lambda msgs, ns: pruned.extend(m.id for m in msgs)]
        )
    )
    with open_saver(kind, path=tmp_path / "c.db", pg_url=pg_url) as inner:
        graph = build(inner, cadence)
        run(graph, "t", range(TURNS))
        run(graph, "other", range(2))
        all_ids, notes, _ = expected(TURNS, cadence)
        assert values(graph.get_state(config("t")))[0] == all_ids
        stored = _checkpoints(graph, "t")

        planned = compact_thread(inner, "t", reducer, dry_run=True)
        assert (planned.action, planned.messages_before) == ("would compact", len(all_ids))
        assert _checkpoints(graph, "t") == stored and pruned == []

        done = compact_thread(inner, "t", reducer)
        assert done.action == "compacted" and done.messages_after == planned.messages_after
        kept, notes_after, files = values(graph.get_state(config("t")))
        assert done.messages_after is not None and len(kept) == done.messages_after <= 12
        # each message kept or pruned, exactly once; kept: the first question and the newest turns
        assert sorted([*kept, *pruned]) == sorted(all_ids) and not set(kept) & set(pruned)
        assert kept == (all_ids[0], *all_ids[len(all_ids) - len(kept) + 1:]) and kept[1] == "h8"
        assert (notes_after, files) == (notes, ())
        assert values(graph.get_state(config("other")))[0] == expected(2, cadence)[0]
        assert _checkpoints(graph, "t") == stored + 1

        # within bounds now: a second pass writes nothing
        assert compact_thread(inner, "t", reducer).action == "skipped"
        # the thread goes on from the reduced list
        run(graph, "t", range(TURNS, TURNS + 1))
        after = values(graph.get_state(config("t")))[0]
        assert after == (*kept, f"h{TURNS}", f"ai{TURNS}-think", f"ai{TURNS}-answer")


def test_a_dry_run_calls_no_hook_and_no_summarizer_on_a_list_channel() -> None:
    from langchain_core.messages import AIMessage, HumanMessage
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import START, MessagesState, StateGraph

    def answer(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage(f"answer {len(state['messages'])}")]}

    builder = StateGraph(MessagesState)
    builder.add_node("answer", answer)
    builder.add_edge(START, "answer")
    saver = InMemorySaver()
    graph = builder.compile(checkpointer=saver)
    for i in range(10):
        graph.invoke({"messages": [HumanMessage(f"question {i}")]}, config("t"))
    calls: list[str] = []

    def summarize(msgs: list[Any]) -> str:
        calls.append("summarize")
        return "summary"

    reducer = MessageReducer(
        config=ReducerConfig(
            min_messages=4, max_messages=8, on_prune=[lambda msgs, ns: calls.append("on_prune")],
            summarize_fn=summarize,
        )
    )
    planned = compact_thread(saver, "t", reducer, dry_run=True)
    assert planned.action == "would compact" and calls == []
    assert compact_thread(saver, "t", reducer).action == "compacted"
    assert calls.count("on_prune") == 1 and calls.count("summarize") == 1


@pytest.mark.parametrize("cadence", CADENCES)
@pytest.mark.parametrize("kind", KINDS)
def test_compact_store_dry_run_reports_what_compacting_and_trimming_a_delta_thread_does(
    kind: str, cadence: tuple[int, int, int], tmp_path: Any, request: pytest.FixtureRequest
) -> None:
    from datetime import timedelta

    from checkpointers.compact import compact_store

    pg = request.getfixturevalue("postgres_server") if kind == "postgres" else None
    pg_url = None if pg is None else pg.new_database("dcstore")
    reducer = MessageReducer(min_messages=6, max_messages=12)
    with open_saver(kind, path=tmp_path / "s.db", pg_url=pg_url) as inner:
        graph = build(inner, cadence)
        run(graph, "t", range(TURNS))
        args: dict[str, Any] = {"keep_last": 1, "branch_grace": timedelta(0)}
        planned = compact_store(inner, reducer, dry_run=True, **args)
        done = compact_store(inner, reducer, **args)
        numbers = ("checkpoints_written", "checkpoints_deleted", "writes_deleted")
        assert [getattr(planned, n) for n in numbers] == [getattr(done, n) for n in numbers]
        assert done.checkpoints_written == 1 and [t.action for t in done.threads] == ["compacted"]
        kept = values(graph.get_state(config("t")))[0]
        assert len(kept) <= 12 and kept[-1] == f"ai{TURNS - 1}-answer"
        run(graph, "t", range(TURNS, TURNS + 1))
        assert values(graph.get_state(config("t")))[0][-1] == f"ai{TURNS}-answer"
