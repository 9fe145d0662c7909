"""``ReduceMemory`` over generated histories with the defects real runs leave
(``tests.histories``), turned into smolagents memory steps the way its agent loop stores them.

A user message is a ``TaskStep``; an answer an ``ActionStep`` with its model output; a call
step an ``ActionStep`` holding its tool calls **and** the observations of the results that
follow it (smolagents executes a step's calls and stores their observations in the step). A
call nothing answered (a run that died before its tools) is a step with the calls and the
error in their place, as smolagents records a failed tool. A result that does not follow its
call (late, replayed, orphan, the second half of a split) has no place in a smolagents memory:
the converter leaves it out (they are all ``defect_ids``).

Driven through the step callback as smolagents calls it (the finished step, before it is
appended) and through the real agent loop with the scripted model: (a) each request passes
``tests.provider_rules`` on ``tests.smolagents_script.openai_dicts`` of it; (b) every message is
kept (state mode: the memory; request mode: the last request) or pruned to ``on_prune`` hooks,
exactly once, and summarized at most once; (c) the memory holds the caller's own steps,
never mutated.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import pytest
from smolagents.memory import ActionStep, MemoryStep, TaskStep, ToolCall
from smolagents.monitoring import AgentLogger, LogLevel, Timing
from smolagents.utils import AgentToolExecutionError

from agentstate_reducer.integrations._common import Mode
from agentstate_reducer.integrations.smolagents import ReduceMemory, SummaryStep
from tests.convo import Spec
from tests.histories import History, Ledger, histories
from tests.provider_rules import request_errors
from tests.smolagents_script import ScriptedModel, openai_dicts, question, request_agent, text_of, tool_agent

HISTORIES = histories(30, seed=300)
MAX, MIN = 12, 6
_LOGGER = AgentLogger(level=LogLevel.OFF)
_ID = re.compile(r"message (\S+) x")


def _text(mid: str) -> str:
    return f"message {mid} " + "x" * 20


class Converted:
    """A history as memory steps, each knowing the history ids it stands for."""

    def __init__(self, history: History) -> None:
        self.history = history
        self.steps: list[MemoryStep] = []
        self._ids: dict[int, list[str]] = {}
        spec: Spec = [*history.spec, ("human", "final")]
        left_out: list[str] = []
        i = 0
        while i < len(spec):
            kind, mid, *rest = spec[i]
            timing = Timing(start_time=0.0, end_time=0.0)
            if kind == "human":
                self._add(TaskStep(task=_text(mid)), [mid])
            elif kind == "ai":
                self._add(ActionStep(step_number=i, timing=timing, model_output=_text(mid)), [mid])
            elif kind == "call":
                calls = rest[0]
                results = []
                while i + 1 < len(spec) and spec[i + 1][0] == "tool" and spec[i + 1][2] in calls:
                    i += 1
                    results.append(spec[i][1])
                step = ActionStep(
                    step_number=i,
                    timing=timing,
                    model_output=_text(mid),
                    tool_calls=[ToolCall(name="lookup", arguments={"q": c}, id=c) for c in calls],
                    observations="\n".join(map(_text, results)) if results else None,
                )
                if not results:
                    step.error = AgentToolExecutionError("the run stopped before its tools answered", _LOGGER)
                self._add(step, [mid, *results])
            else:
                left_out.append(mid)
            i += 1
        assert set(left_out) <= history.defect_ids, left_out

    def _add(self, step: MemoryStep, ids: list[str]) -> None:
        self.steps.append(step)
        self._ids[id(step)] = ids

    def ids_of(self, steps: Sequence[Any]) -> list[str]:
        return [i for s in steps for i in self._ids.get(id(s), [])]

    def snapshot(self) -> list[Any]:
        """Each step's fields (by identity) and what it renders."""
        return [
            ({k: id(v) for k, v in vars(s).items()}, [text_of(m) for m in s.to_messages()])
            for s in self.steps
        ]


class StepLedger:
    """``Ledger`` over steps: a step counts for every history message it stands for."""

    def __init__(self, converted: Converted) -> None:
        self.converted = converted
        self.ledger = Ledger(converted.history, key=lambda m: None)

    def hook(self, pruned: list[Any], namespace: Any) -> None:
        self.ledger.pruned_ids(self.converted.ids_of(pruned))

    def summarizer(self, steps: list[Any]) -> str:
        self.ledger.summary_calls += 1
        ids = self.converted.ids_of(steps)
        self.ledger.summarized.update(ids)
        return "covers " + " ".join(ids)


def _reduce(ledger: StepLedger, mode: Mode, preserve_first: bool) -> ReduceMemory:
    return ReduceMemory(
        min_messages=MIN,
        max_messages=MAX,
        summarizer=ledger.summarizer,
        on_prune=[ledger.hook],
        mode=mode,
        preserve_first=preserve_first,
    )


def _check_request(request: list[Any], where: str) -> None:
    payload = openai_dicts(request)
    assert request_errors(payload) == [], f"{where}: {payload[1:]}"  # the system prompt aside


@pytest.mark.parametrize("preserve_first", [True, False])
@pytest.mark.parametrize("mode", ["state", "request"])
def test_generated_histories_through_the_step_callback(mode: Mode, preserve_first: bool) -> None:
    for history in HISTORIES:
        converted = Converted(history)
        before = converted.snapshot()
        ledger = StepLedger(converted)
        reduce = _reduce(ledger, mode, preserve_first)
        agent = tool_agent(ScriptedModel()) if mode == "state" else request_agent(ScriptedModel(), reduce)
        where = f"seed {history.seed} ({sorted(history.defects)})"
        request: list[Any] = []
        for n, step in enumerate(converted.steps):
            if isinstance(step, ActionStep) and mode == "state":
                reduce(step, agent=agent)  # smolagents calls its step callbacks, then appends
            agent.memory.steps.append(step)
            request = agent.write_memory_to_messages()
            # the model is called after a task and after a tool step, never after an answer
            if isinstance(step, TaskStep) or getattr(step, "tool_calls", None):
                _check_request(request, f"{where}, step {n}")

        memory = agent.memory.steps
        if mode == "state":
            kept = converted.ids_of(memory)
            own = {id(s) for s in converted.steps}
            assert all(id(s) in own or isinstance(s, SummaryStep) for s in memory), where
        else:
            assert memory == converted.steps and all(
                a is b for a, b in zip(memory, converted.steps, strict=True)
            )
            kept = [i for m in request for i in _ID.findall(text_of(m))]
        assert ledger.ledger.errors(kept) == [], where
        assert converted.snapshot() == before, f"{where}: a step was mutated"
        if preserve_first:
            assert memory[0] is converted.steps[0]


def test_generated_histories_through_the_agent_loop() -> None:
    """A memory with the defects, then two tasks of the real agent loop."""
    for history in HISTORIES[:10]:
        converted = Converted(history)
        ledger = StepLedger(converted)
        model = ScriptedModel()
        agent = tool_agent(model, step_callbacks=[_reduce(ledger, "state", True)])
        agent.memory.steps.extend(converted.steps)
        assert agent.run(question(0), reset=False) == "a0"
        assert agent.run(question(1), reset=False) == "a1"

        where = f"seed {history.seed} ({sorted(history.defects)})"
        for n, request in enumerate(model.requests):
            _check_request(request, f"{where}, call {n}")
        # every call after the first callback sends at most the bound, the new task aside
        assert all(len(r) <= 1 + MAX + 1 for r in model.requests[1:]), where
        assert ledger.ledger.errors(converted.ids_of(agent.memory.steps)) == [], where
