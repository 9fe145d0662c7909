"""The planner's passes over a list never seen read each message's ``type`` and ``content`` once
(``bulk.object_columns``) and answer what each reads on its own: the pinned kinds, the
compactions and the table equal ``read_message`` of each message (hypothesis)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from agentstate_reducer._columns.bulk import compaction_indices, object_columns, pinned_indices
from agentstate_reducer._columns.structure import read_structure
from agentstate_reducer.messages import PINNED_KINDS, read_message
from tests.test_messages_bulk import histories, object_messages
from tests.test_structure import _expected

#: LangChain messages only: the lists ``object_columns`` reads
langchain_histories = st.lists(object_messages, max_size=12)


def _check(msgs: list[Any], lo: int) -> None:
    columns = object_columns(msgs)
    if columns is None:
        return
    infos = [read_message(m) for m in msgs]
    assert pinned_indices(msgs, columns) == [i for i, info in enumerate(infos) if info.kind in PINNED_KINDS]
    assert compaction_indices(msgs, columns) == [i for i, info in enumerate(infos) if info.compaction]
    lo = min(lo, len(msgs))
    assert read_structure(msgs, lo, columns=columns) == _expected(msgs, lo)


@settings(max_examples=200, deadline=None)
@given(langchain_histories, st.integers(0, 12))
def test_passes_sharing_the_columns_equal_read_message(msgs: list[Any], lo: int) -> None:
    """Content blocks (compaction blocks too), calls, chat and remove messages."""
    _check(msgs, lo)


@settings(max_examples=100, deadline=None)
@given(histories, st.integers(0, 12))
def test_columns_are_read_only_for_lists_they_decide(msgs: list[Any], lo: int) -> None:
    """Dicts and mixed lists get no columns (each pass reads them its own way); others agree."""
    if any(isinstance(m, dict) for m in msgs):
        assert object_columns(msgs) is None
    _check(msgs, lo)


def test_a_tool_using_conversation_shares_one_read() -> None:
    """Parallel calls, a repeated call id in two turns, a compaction block in an AI message."""
    msgs: list[Any] = [SystemMessage("s", id="s")]
    for t in range(3):
        msgs += [
            HumanMessage(f"q{t}", id=f"h{t}"),
            AIMessage(
                "",
                id=f"a{t}",
                tool_calls=[
                    {"name": "f", "args": {}, "id": f"c{t}"},
                    {"name": "g", "args": {}, "id": "call_0"},
                ],
            ),
            ToolMessage("r", tool_call_id=f"c{t}", id=f"t{t}"),
            ToolMessage("r", tool_call_id="call_0", id=f"u{t}"),
        ]
    msgs.append(AIMessage([{"type": "compaction", "content": "summary"}], id="k"))
    columns = object_columns(msgs)
    assert columns is not None
    assert pinned_indices(msgs, columns) == [0]
    assert compaction_indices(msgs, columns) == [len(msgs) - 1]
    table = read_structure(msgs, 1, columns=columns)
    assert table == _expected(msgs, 1)
    assert table.calls[2] == ("c0", "call_0")
    assert table.text == "hctt" * 3 + "a"
