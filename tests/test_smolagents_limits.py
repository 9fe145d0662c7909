"""``ReduceMemory``'s limits count what the model receives, and its repair makes a memory start
with a task; through smolagents' real agent loop with the scripted model of
``tests.smolagents_script``."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from smolagents.memory import ActionStep, TaskStep
from smolagents.monitoring import Timing

from agentstate_reducer.integrations._common import ReduceRecord
from agentstate_reducer.integrations.smolagents import ReduceMemory, SummaryStep, rendered_messages
from tests.provider_rules import request_errors
from tests.smolagents_script import ScriptedModel, Summarizer, converse, openai_dicts, question, tool_agent

MAX, MIN = 20, 10


def _rendered(steps: list[Any]) -> int:
    return sum(len(s.to_messages()) for s in steps)


class MemoryAfter:
    """A step callback after ``ReduceMemory``: the messages the memory renders once the finished
    step is in it (smolagents appends it after the callbacks)."""

    def __init__(self) -> None:
        self.sizes: list[int] = []

    def __call__(self, memory_step: Any, agent: Any) -> None:
        self.sizes.append(_rendered(agent.memory.steps) + len(memory_step.to_messages()))


def test_max_messages_bounds_the_messages_the_model_receives() -> None:
    model, after = ScriptedModel(), MemoryAfter()
    reduce = ReduceMemory(max_messages=MAX, min_messages=MIN, summarizer=Summarizer())
    agent = tool_agent(model, step_callbacks=[reduce, after])

    assert converse(agent, 30) == [f"a{i}" for i in range(30)]

    # a task renders 7 messages (the task, 3 steps of a call and its observation): counted in
    # steps, max_messages=20 let requests of 35 messages through
    assert max(after.sizes) <= MAX
    for request, place in zip(model.requests, model.places, strict=True):
        assert request_errors(openai_dicts(request)) == []
        # the system prompt, the memory; at a run's first call also the task run() just added
        first_call = place is not None and place[1] == 0
        assert len(request) <= 1 + MAX + (1 if first_call else 0), len(request)
    assert max(len(r) for r in model.requests) > MIN  # the bound is reached, not undercut
    assert isinstance(agent.memory.steps[1], SummaryStep)


def test_min_messages_is_what_a_reduction_keeps() -> None:
    model, after = ScriptedModel(), MemoryAfter()
    agent = tool_agent(model, step_callbacks=[ReduceMemory(max_messages=MAX, min_messages=MIN), after])
    converse(agent, 12)
    # the size after each reduction: the first task, then whole recent tasks, the live one whole
    cut = [b for a, b in zip(after.sizes, after.sizes[1:], strict=False) if b < a]
    assert cut and all(size <= MIN for size in cut)


def test_the_record_counts_rendered_messages_and_tokens() -> None:
    model = ScriptedModel()
    records: list[ReduceRecord] = []
    reduce = ReduceMemory(max_messages=MAX, min_messages=MIN, token_counter=lambda step: 7,
                          on_reduce=records.append)  # fmt: skip
    seen: list[tuple[int, int]] = []

    def memory(memory_step: Any, agent: Any) -> None:  # after reduce: the memory it wrote
        steps = [*agent.memory.steps, memory_step]
        seen.append((_rendered(steps), len(steps)))

    agent = tool_agent(model, step_callbacks=[reduce, memory])
    converse(agent, 8)

    assert len(records) == len(seen) and all(isinstance(r, ReduceRecord) for r in records)
    for record, (messages, steps) in zip(records, seen, strict=True):
        assert record.messages_after == messages
        assert record.tokens_after == 7 * steps  # the given counter, one count per step
    assert any(r.triggered and r.messages_before > MAX >= r.messages_after for r in records)


def test_rendered_messages_counts_what_write_memory_to_messages_makes() -> None:
    model = ScriptedModel()
    agent = tool_agent(model)
    converse(agent, 3)
    rendered = agent.write_memory_to_messages()
    assert sum(map(rendered_messages, agent.memory.steps)) == len(rendered) - 1  # no system prompt
    assert rendered_messages({"role": "user", "content": "a summary"}) == 1


def _left_over() -> ActionStep:
    """A step left at the front of a memory (a memory edited or restored by hand)."""
    return ActionStep(step_number=9, timing=Timing(start_time=0.0), model_output="left over")


@pytest.mark.parametrize("summarizer", [None, Summarizer()], ids=["plain", "summarizer"])
def test_preserve_first_false_makes_the_memory_start_with_a_task(
    summarizer: Summarizer | None, caplog: pytest.LogCaptureFixture
) -> None:
    model = ScriptedModel()
    reduce = ReduceMemory(max_messages=MAX, min_messages=MIN, preserve_first=False, summarizer=summarizer)
    agent = tool_agent(model, step_callbacks=[reduce])
    agent.run(question(0))
    left = _left_over()
    agent.memory.steps.insert(0, left)  # the memory no longer starts with a task
    assert not isinstance(agent.memory.steps[0], TaskStep)

    with caplog.at_level(logging.WARNING, logger="agentstate_reducer.integrations.smolagents"):
        agent.run(question(1), reset=False)  # small: nothing triggers

    steps = agent.memory.steps
    assert isinstance(steps[0], TaskStep) and steps[0].task == question(0)
    assert all(s is not left for s in steps)
    assert "removed 1 message(s)" in caplog.text  # not dropped silently
    # from the first callback of the run on, every request starts with a task
    first = model.places.index((1, 1))
    for request in model.requests[first:]:
        assert request_errors(openai_dicts(request)) == []
