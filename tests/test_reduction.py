"""``reduce_checkpoint`` and ``areduce_checkpoint``: one prepared put, reduced sync or async, the
same checkpoint and report either way."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, cast

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import Checkpoint

from agentstate_reducer import MessageReducer, ReducerConfig
from agentstate_reducer.summary import SUMMARY_ID
from checkpointers.reduction import PutReduction, SummaryMemo, areduce_checkpoint, reduce_checkpoint
from tests.convo import BUILDERS, ids

CONFIG: RunnableConfig = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}


def values_only(messages: list[Any]) -> Checkpoint:
    """A checkpoint holding only its channel values, on purpose: the reduction reads nothing else
    (the other keys are optional to it), so the tests leave them out."""
    return cast("Checkpoint", {"channel_values": {"messages": messages}})


def _turns(n: int) -> list[Any]:
    spec: list[tuple[Any, ...]] = [("system", "s")]
    for t in range(n):
        spec += [("human", f"h{t}"), ("call", f"c{t}", [f"k{t}"]), ("tool", f"r{t}", f"k{t}")]
        spec.append(("ai", f"a{t}"))
    return BUILDERS["openai_dict"](spec)


async def _both(
    reducer: MessageReducer,
    checkpoint: Any,
    new_versions: dict[str, Any],
    memo: Callable[[], SummaryMemo | None] = lambda: None,
) -> list[tuple[Any, PutReduction, list[PutReduction]]]:
    """The put through ``reduce_checkpoint`` and through ``areduce_checkpoint`` (a memo from
    ``memo()`` each, so both start from the same memory), with what ``on_reduce`` received."""
    out = []
    for mode in ("sync", "async"):
        seen: list[PutReduction] = []
        kwargs: dict[str, Any] = {"on_reduce": seen.append, "summary_memo": memo()}
        if mode == "sync":
            stored, report = reduce_checkpoint(reducer, CONFIG, checkpoint, new_versions, **kwargs)
        else:
            stored, report = await areduce_checkpoint(reducer, CONFIG, checkpoint, new_versions, **kwargs)
        out.append((stored, report, seen))
    return out


async def test_a_skipped_put_hands_the_checkpoint_back_and_reports_why() -> None:
    checkpoint = {"id": "c1", "channel_values": {"other": 1}, "channel_versions": {"other": 1}}
    for stored, report, seen in await _both(MessageReducer(), checkpoint, {"other": 1}):
        assert stored is checkpoint
        assert report.skipped == "absent" and report.stats is None and seen == [report]


async def test_an_untouched_list_is_the_same_checkpoint_and_a_new_version_is_reported() -> None:
    checkpoint = {"id": "c1", "channel_values": {"messages": _turns(1)}, "channel_versions": {"messages": 1}}
    for stored, report, seen in await _both(MessageReducer(), checkpoint, {}):
        assert stored is checkpoint
        assert report.skipped is None and report.new_version is False and seen == [report]
        assert report.stats is not None and report.stats.messages_after == 5


async def test_a_tuple_channel_stays_a_tuple_sync_and_async_alike() -> None:
    reducer = MessageReducer(config=ReducerConfig(min_messages=4, max_messages=8))
    msgs = tuple(_turns(3))
    checkpoint: dict[str, Any] = {"id": "c1", "channel_values": {"messages": msgs, "n": 3},
                  "channel_versions": {"messages": 2}}
    results = await _both(reducer, checkpoint, {"messages": 2})
    for stored, report, seen in results:
        assert isinstance(stored["channel_values"]["messages"], tuple)
        assert ids(list(stored["channel_values"]["messages"])) == ["s", "h2", "c2", "r2", "a2"]
        assert stored["channel_values"]["n"] == 3 and stored["channel_versions"] == {"messages": 2}
        assert checkpoint["channel_values"]["messages"] is msgs  # never mutated
        assert report.new_version is True and seen == [report]
    assert results[0][0] == results[1][0] and results[0][1] == results[1][1]


@pytest.mark.parametrize("as_tuple", [False, True], ids=["list", "tuple"])
async def test_a_memo_cut_list_is_reduced_and_stored_in_the_channel_type(as_tuple: bool) -> None:
    calls: list[list[Any]] = []

    def summarize(pruned: list[Any]) -> str:
        calls.append(pruned)
        return "summary"

    reducer = MessageReducer(config=ReducerConfig(
        min_messages=4, max_messages=8, summarize_fn=summarize, inject_summary=True
    ))
    first = _turns(3)

    def primed() -> SummaryMemo:
        """A memo that saw the run's first put (turns 0 and 1 summarized)."""
        memo = SummaryMemo()
        reduce_checkpoint(reducer, CONFIG, values_only(first), {}, summary_memo=memo)
        return memo

    # the run goes on with its full list: the memo hands the reducer the stored form
    grown = first + _turns(4)[len(first):]
    value = tuple(grown) if as_tuple else grown
    results = await _both(reducer, {"channel_values": {"messages": value}}, {}, primed)
    for stored, _report, _seen in results:
        out = stored["channel_values"]["messages"]
        assert isinstance(out, tuple) is as_tuple
        assert ids(list(out)) == ["s", SUMMARY_ID, "h3", "c3", "r3", "a3"]
    # after each priming put, the reduction summarized only turn 2, which that put had kept
    first_put = ["h0", "c0", "r0", "a0", "h1", "c1", "r1", "a1"]
    assert [ids(c) for c in calls] == [first_put, [SUMMARY_ID, "h2", "c2", "r2", "a2"]] * 2


class _Items(list[Any]):
    """A list subclass: reduced like a list, stored as the reducer's plain list when pruned."""


#: (channel values, new_versions): a skipped put, one needing no reduction, one pruned (new and
#: unchanged version), a tuple channel and a list subclass
PUTS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "absent": ({"other": 1}, {"other": 1}),
    "not-a-list": ({"messages": "text"}, {"messages": 1}),
    "untouched": ({"messages": _turns(1)}, {"messages": 1}),
    "pruned": ({"messages": _turns(3), "n": 3}, {"messages": 1}),
    "pruned-unchanged-version": ({"messages": _turns(3)}, {"n": 2}),
    "tuple": ({"messages": tuple(_turns(3))}, {"messages": 1}),
    "list-subclass": ({"messages": _Items(_turns(3))}, {"messages": 1}),
}


@pytest.mark.parametrize("summarizing", [False, True], ids=["plain", "summary-memo"])
@pytest.mark.parametrize("with_callback", [True, False], ids=["on_reduce", "no-callback"])
@pytest.mark.parametrize("name", list(PUTS))
async def test_the_savers_put_path_stores_logs_and_reports_as_reduce_checkpoint(
    name: str, with_callback: bool, summarizing: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """``reduce_for_put`` (what ``put``/``aput`` call) builds a report only when it is used and
    takes a direct path for a list channel without a memo to consult; what is stored, logged and
    passed to ``on_reduce`` is ``reduce_checkpoint``'s, sync and async, with a summary memo too."""
    from checkpointers.reduction import areduce_for_put, reduce_for_put

    values, new_versions = PUTS[name]
    checkpoint = cast("Checkpoint", {"id": "c1", "channel_values": values,
                                     "channel_versions": dict.fromkeys(values, 1)})

    def reducer() -> MessageReducer:
        summarize = (lambda pruned: f"{len(pruned)} pruned") if summarizing else None
        return MessageReducer(config=ReducerConfig(min_messages=4, max_messages=8, summarize_fn=summarize))

    outcomes = []
    for path in ("reference", "sync", "async"):
        seen: list[PutReduction] = []
        on_reduce = seen.append if with_callback else None
        caplog.clear()
        with caplog.at_level(logging.DEBUG, logger="agentstate_reducer.checkpointers"):
            if path == "reference":
                stored, report = reduce_checkpoint(reducer(), CONFIG, checkpoint, new_versions,
                                                   on_reduce=on_reduce, summary_memo=SummaryMemo())
                assert seen == ([report] if with_callback else [])
            elif path == "sync":
                stored = reduce_for_put(
                    reducer(), CONFIG, checkpoint, new_versions, "messages", on_reduce, SummaryMemo()
                )
            else:
                stored = await areduce_for_put(
                    reducer(), CONFIG, checkpoint, new_versions, "messages", on_reduce, SummaryMemo()
                )
        logged = [(r.levelname, r.getMessage()) for r in caplog.records
                  if r.name == "agentstate_reducer.checkpointers"]
        outcomes.append((stored, stored is checkpoint, seen, logged))
    reference = outcomes[0]
    assert outcomes[1] == reference and outcomes[2] == reference
    stored, same, seen, logged = reference
    pruned = name.startswith("pruned") or name in ("tuple", "list-subclass")
    assert same is not pruned  # a put needing no reduction hands the very checkpoint on
    if pruned:
        level = "DEBUG" if name == "pruned-unchanged-version" else "INFO"
        message = "reduced 'messages' in thread 't' ns '': 13 -> 5 messages, tokens None -> None"
        assert logged == [(level, message)]
        assert ids(list(stored["channel_values"]["messages"])) == ["s", "h2", "c2", "r2", "a2"]
        assert type(stored["channel_values"]["messages"]) is (tuple if name == "tuple" else list)
        if with_callback:
            [report] = seen
            assert report.summary == ("8 pruned" if summarizing else None)
    else:
        assert logged == []
