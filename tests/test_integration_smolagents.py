"""``ReduceMemory`` through smolagents' real agent loop, with a scripted ``Model``.

Every model call is recorded as the model received it, turned into OpenAI Chat dicts by
``tests.smolagents_script.openai_dicts`` (no reducer code) and judged by
``tests.provider_rules.request_errors``. Each turn is one ``agent.run(task, reset=False)``: a
``lookup`` call, then ``lookup`` and ``add`` in parallel, then ``final_answer``.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from smolagents.memory import ActionStep, PlanningStep, SystemPromptStep, TaskStep
from smolagents.models import ChatMessage, MessageRole
from smolagents.monitoring import Timing

from agentstate_reducer import MessageReducer, ReducerConfig, read_message
from agentstate_reducer.integrations._common import ReduceRecord
from agentstate_reducer.integrations.smolagents import ReduceMemory, SummaryStep
from agentstate_reducer.summary import SUMMARY_PREFIX
from tests.integration_checks import import_error_without
from tests.paths import column_path as columns
from tests.provider_rules import request_errors
from tests.smolagents_script import (
    ScriptedModel,
    Summarizer,
    code_agent,
    converse,
    openai_dicts,
    question,
    request_agent,
    role_of,
    text_of,
    tool_agent,
)

TURNS = 32
MAX, MIN = 20, 10


class Pruned:
    """An ``on_prune`` hook keeping what it got, by identity, with each call's namespace."""

    def __init__(self) -> None:
        self.steps: list[Any] = []
        self.namespaces: set[Any] = set()
        self.lock = threading.Lock()

    def __call__(self, pruned: list[Any], namespace: Any) -> None:
        with self.lock:
            self.steps.extend(pruned)
            self.namespaces.add(namespace)


class Steps:
    """A second step callback: every step the agent finished, in order."""

    def __init__(self) -> None:
        self.steps: list[Any] = []

    def __call__(self, memory_step: Any, agent: Any) -> None:
        self.steps.append(memory_step)


def _rendered(steps: list[Any]) -> int:
    """The messages ``steps`` render: what the model receives of them."""
    return sum(len(s.to_messages()) for s in steps)


def _places(turns: int, first: int = 0) -> list[tuple[int, int]]:
    return [(i, n) for i in range(first, first + turns) for n in range(3)]


def _check_requests(model: ScriptedModel, system: str, *, bound: int) -> None:
    """Every request valid, the system prompt first, the first task kept, bounded."""
    assert model.requests
    for k, request in enumerate(model.requests):
        payload = openai_dicts(request)
        assert request_errors(payload) == [], (k, payload)
        assert role_of(request[0]) == "system" and text_of(request[0]) == system
        assert text_of(request[1]) == "New task:\n" + question(0)
        assert len(payload) - 1 <= bound, (k, len(payload))


# -- the conversation ----------------------------------------------------------------------------


def test_thirty_turns_keep_memory_and_requests_bounded() -> None:
    model, summarizer, hook, finished = ScriptedModel(), Summarizer(), Pruned(), Steps()
    records: list[ReduceRecord] = []
    reduce = ReduceMemory(
        MessageReducer(config=ReducerConfig(min_messages=MIN, max_messages=MAX, on_prune=[hook])),
        summarizer=summarizer,
        on_reduce=records.append,
    )
    agent = tool_agent(model, step_callbacks=[reduce, finished], name="researcher")
    sizes: list[int] = []

    for i in range(TURNS):
        assert agent.run(question(i), reset=i == 0) == f"a{i}"
        sizes.append(len(agent.memory.steps))

    # the live turn was there at every call: each call answered its task's next round
    assert model.places == _places(TURNS)
    # a step renders at most two messages, a summary one: requests stay bounded, and so does memory
    _check_requests(model, agent.system_prompt, bound=2 * (MAX + 1))
    assert max(sizes) <= MAX + 1 and sizes[-1] < TURNS

    # the stored memory: the first task, the running summary, then whole recent steps
    steps = agent.memory.steps
    assert isinstance(steps[0], TaskStep) and steps[0].task == question(0)
    assert isinstance(steps[1], SummaryStep) and steps[1].content.startswith(SUMMARY_PREFIX)
    assert isinstance(steps[2], TaskStep)
    assert all(isinstance(s, TaskStep | ActionStep) for s in steps[2:])
    assert steps[1].to_messages() == steps[1].to_messages(summary_mode=True)
    last = model.requests[-1]
    assert text_of(last[2]) == steps[1].content
    assert {"content": steps[1].content} in agent.memory.get_full_steps()

    # the summarizer and the hook saw each step once; every step is kept or was pruned, not both
    assert summarizer.calls >= 3
    seen = [id(s) for s in summarizer.seen]
    assert len(seen) == len(set(seen))
    pruned = [id(s) for s in hook.steps]
    assert len(pruned) == len(set(pruned))
    made = [id(s) for s in finished.steps]
    kept = {id(s) for s in steps}
    assert {p for p in made if p not in kept} == {id(s) for s in hook.steps if isinstance(s, ActionStep)}
    assert {id(s) for s in summarizer.seen if not isinstance(s, SummaryStep)} == {
        id(s) for s in hook.steps if not isinstance(s, SummaryStep)
    }
    assert hook.namespaces == {("memories", "researcher")}

    assert any(r.summarized for r in records) and all(r.summary_error is None for r in records)
    assert all(isinstance(r, ReduceRecord) and r.mode == "state" for r in records)
    agent.replay()  # smolagents' replay walks the bounded memory (the summary step is no type it prints)


def test_a_code_agent_is_bounded_too() -> None:
    model, summarizer = ScriptedModel(code=True), Summarizer()
    # a code step renders three messages (output, code, observation): a task renders ten
    reduce = ReduceMemory(min_messages=12, max_messages=24, summarizer=summarizer)
    agent = code_agent(model, step_callbacks=[reduce])

    assert converse(agent, 12) == [f"a{i}" for i in range(12)]

    assert model.places == _places(12)
    _check_requests(model, agent.system_prompt, bound=24 + 1)  # and a new task
    assert max(len(r) for r in model.requests) <= 1 + 24 + 1
    assert _rendered(agent.memory.steps) <= 24 + 3 and summarizer.calls > 0
    # a CodeAgent's step holds its code and the observation as text
    code_steps = [s for s in agent.memory.steps if isinstance(s, ActionStep)]
    assert code_steps and all(s.code_action and s.tool_calls for s in code_steps)


def test_without_it_memory_and_requests_grow() -> None:
    """What the callback changes: smolagents alone sends every step of every task."""
    model = ScriptedModel()
    agent = tool_agent(model, max_steps=5)
    converse(agent, 12)
    assert len(agent.memory.steps) == 12 * 4
    assert len(model.requests[-1]) == 1 + 12 + 2 * (12 * 3 - 1)


def test_request_mode_bounds_requests_and_keeps_the_memory() -> None:
    model, summarizer, hook = ScriptedModel(), Summarizer(), Pruned()
    config = ReducerConfig(min_messages=MIN, max_messages=MAX, on_prune=[hook])
    reduce = ReduceMemory(MessageReducer(config=config), summarizer=summarizer, mode="request")
    agent = request_agent(model, reduce, name="r")

    assert converse(agent, TURNS) == [f"a{i}" for i in range(TURNS)]

    assert model.places == _places(TURNS)
    _check_requests(model, agent.system_prompt, bound=2 * (MAX + 2))
    steps = agent.memory.steps
    assert len(steps) == TURNS * 4 and not any(isinstance(s, SummaryStep) for s in steps)
    assert text_of(model.requests[-1][2]).startswith(SUMMARY_PREFIX)
    seen = [id(s) for s in summarizer.seen if not isinstance(s, SummaryStep)]
    assert summarizer.calls >= 3 and len(seen) == len(set(seen))
    pruned = [id(s) for s in hook.steps if not isinstance(s, SummaryStep)]
    assert len(pruned) == len(set(pruned)) and set(pruned) == set(seen)
    assert set(pruned) <= {id(s) for s in steps}
    # between reductions a request is the previous one and the new messages
    grows = sum(1 for a, b in itertools.pairwise(model.requests) if b[: len(a)] == a)
    assert grows >= len(model.requests) * 0.8
    with pytest.raises(TypeError, match="is no step callback"):
        reduce(steps[-1], agent=agent)


def test_a_token_budget_and_an_async_summarizer() -> None:
    model, calls = ScriptedModel(), []

    async def summarize(steps: list[Any]) -> str:
        calls.append(len(steps))
        return f"{len(steps)} earlier steps"

    reduce = ReduceMemory(max_tokens=1500, target_tokens=800, summarizer=summarize)
    agent = tool_agent(model, step_callbacks=[reduce])
    assert converse(agent, 12) == [f"a{i}" for i in range(12)]

    assert calls and isinstance(agent.memory.steps[1], SummaryStep)
    counted = reduce.reducer.count_tokens(agent.memory.steps)
    assert sum(counted) <= 1500 + max(counted)  # the budget, and the step just appended
    assert model.places == _places(12)
    _check_requests(model, agent.system_prompt, bound=10**6)


def test_a_failing_summarizer_loses_nothing() -> None:
    model, summarizer = ScriptedModel(), Summarizer(fail=True)
    records: list[ReduceRecord] = []
    reduce = ReduceMemory(min_messages=4, max_messages=8, summarizer=summarizer, on_reduce=records.append)
    agent = tool_agent(model, step_callbacks=[reduce])

    assert converse(agent, 6) == [f"a{i}" for i in range(6)]

    assert len(agent.memory.steps) == 6 * 4  # nothing pruned
    assert not any(isinstance(s, SummaryStep) for s in agent.memory.steps)
    assert summarizer.calls > 0 and any(r.summary_error for r in records)
    assert all(not r.pruned for r in records)
    assert model.places == _places(6)
    _check_requests(model, agent.system_prompt, bound=10**6)


def test_without_a_summarizer_whole_tasks_go() -> None:
    model = ScriptedModel()
    agent = tool_agent(model, step_callbacks=[ReduceMemory(min_messages=4, max_messages=8)])
    converse(agent, 10)
    steps = agent.memory.steps
    assert not any(isinstance(s, SummaryStep) for s in steps)
    assert steps[0].task == question(0) and isinstance(steps[1], TaskStep)
    assert len(steps) <= 9
    _check_requests(model, agent.system_prompt, bound=2 * 9)


def test_preserve_first_false_lets_the_first_task_go() -> None:
    model = ScriptedModel()
    reduce = ReduceMemory(min_messages=4, max_messages=8, preserve_first=False)
    agent = tool_agent(model, step_callbacks=[reduce])
    converse(agent, 10)
    steps = agent.memory.steps
    assert isinstance(steps[0], TaskStep) and steps[0].task != question(0)
    assert model.places == _places(10)
    for request in model.requests:
        assert request_errors(openai_dicts(request)) == []


def test_the_dict_form_bounds_at_planning_steps_too() -> None:
    model, summarizer = ScriptedModel(), Summarizer()
    reduce = ReduceMemory(min_messages=10, max_messages=20, summarizer=summarizer)
    agent = tool_agent(model, step_callbacks={ActionStep: reduce, PlanningStep: reduce}, planning_interval=2)

    assert converse(agent, 8) == [f"a{i}" for i in range(8)]

    steps = agent.memory.steps
    assert _rendered(steps) <= 20 + 2 and any(isinstance(s, PlanningStep) for s in steps)
    assert isinstance(steps[1], SummaryStep)
    for request in model.requests:
        assert request_errors(openai_dicts(request)) == []


def test_agents_in_threads_share_one_callback() -> None:
    hook = Pruned()
    config = ReducerConfig(min_messages=10, max_messages=20, on_prune=[hook])
    reduce = ReduceMemory(MessageReducer(config=config), summarizer=Summarizer())
    models = [ScriptedModel() for _ in range(4)]
    agents = [tool_agent(m, step_callbacks=[reduce], name=f"agent{k}") for k, m in enumerate(models)]
    answers: dict[int, list[Any]] = {}

    def work(k: int) -> None:
        answers[k] = converse(agents[k], 10)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    assert answers == {k: [f"a{i}" for i in range(10)] for k in range(4)}
    for model, agent in zip(models, agents, strict=True):
        assert model.places == _places(10)
        # the payload has a tool message per parallel call: the rendered request is bounded below
        _check_requests(model, agent.system_prompt, bound=2 * (20 + 1))
        assert max(len(r) for r in model.requests) <= 1 + 20 + 1  # system, memory, a new task
        assert isinstance(agent.memory.steps[1], SummaryStep) and _rendered(agent.memory.steps) <= 20 + 2
    assert hook.namespaces == {("memories", f"agent{k}") for k in range(4)}
    # each agent's steps pruned once (equal summaries of two agents may be one SummaryStep)
    steps = [id(s) for s in hook.steps if not isinstance(s, SummaryStep)]
    assert len(set(steps)) == len(steps) > 0


def test_a_new_run_with_reset_starts_over() -> None:
    model = ScriptedModel()
    reduce = ReduceMemory(min_messages=4, max_messages=8, summarizer=Summarizer())
    agent = tool_agent(model, step_callbacks=[reduce])
    converse(agent, 6)
    converse(agent, 1, first=6)  # reset=True at its first task: smolagents clears the memory
    assert agent.memory.steps[0].task == question(6)
    assert not any(isinstance(s, SummaryStep) for s in agent.memory.steps)


# -- reading smolagents' classes -----------------------------------------------------------------


def _steps(tasks: int) -> list[Any]:
    out: list[Any] = []
    for i in range(tasks):
        out.append(TaskStep(task=question(i)))
        for n in range(2):
            step = ActionStep(step_number=n, timing=Timing(start_time=0.0), observations=f"o{i}-{n}")
            step.tool_calls = []
            out.append(step)
    return out


def test_the_core_reads_memory_steps() -> None:
    action = ActionStep(step_number=1, timing=Timing(start_time=0.0), model_output="thinking",
                        observations="seen", error=None)  # fmt: skip
    plan = PlanningStep(model_input_messages=[], model_output_message=ChatMessage(role=MessageRole.ASSISTANT),
                        plan="the plan", timing=Timing(start_time=0.0))  # fmt: skip
    user = ChatMessage(role=MessageRole.USER, content="u")
    infos = [read_message(m) for m in (SystemPromptStep("sys"), TaskStep(task="t"), action, plan,
                                        SummaryStep("s"), user)]  # fmt: skip
    assert [(i.kind, i.content) for i in infos] == [
        ("system", "sys"), ("human", "t"), ("ai", "thinking\nseen"), ("ai", "the plan"), ("human", "s"),
        ("human", "u"),
    ]  # fmt: skip
    assert all(i.call_ids == () and i.result_ids == () for i in infos)
    # the rendered call and observation texts pair only by position: reduce the steps instead
    rendered = [
        ChatMessage(role=MessageRole.TOOL_CALL, content=[{"type": "text", "text": "Calling tools:\n[]"}]),
        ChatMessage(role=MessageRole.TOOL_RESPONSE, content=[{"type": "text", "text": "Observation:\n"}]),
    ]
    assert [read_message(m).kind for m in rendered] == ["unknown", "unknown"]



@pytest.mark.parametrize("limits", [(3, 6), (0, 5), (6, 12)])
def test_the_fast_path_reduces_steps_as_the_reference(limits: tuple[int, int]) -> None:
    history = _steps(6)
    runs = []
    for on in (True, False):
        with columns(on):
            config = ReducerConfig(min_messages=limits[0], max_messages=limits[1], preserve_first=True)
            reducer = MessageReducer(config=config)
            runs.append(reducer.reduce(history))
    fast, reference = runs
    assert [id(m) for m in fast.surviving] == [id(m) for m in reference.surviving]
    assert fast.pruned and fast.stats == reference.stats
    assert isinstance(fast.surviving[1], TaskStep)  # whole turns go


# -- construction and imports --------------------------------------------------------------------

BAD: list[tuple[Callable[[], Any], type[Exception], str]] = [
    (lambda: ReduceMemory("reducer"), TypeError, "must be an agentstate_reducer.MessageReducer"),  # type: ignore[arg-type]
    (lambda: ReduceMemory(MessageReducer, max_messages=9), TypeError, "pass an instance"),  # type: ignore[arg-type]
    (lambda: ReduceMemory(MessageReducer(), max_messages=9), TypeError, "not both"),
    (lambda: ReduceMemory(summarizer="text"), TypeError, "summarizer must be a callable"),  # type: ignore[arg-type]
    (lambda: ReduceMemory(on_reduce=3), TypeError, "on_reduce must be callable"),  # type: ignore[arg-type]
    (lambda: ReduceMemory(validate="yes"), TypeError, "validate must be a bool"),  # type: ignore[arg-type]
    (lambda: ReduceMemory(mode="memory"), ValueError, "mode must be 'state' or 'request'"),  # type: ignore[arg-type]
    (lambda: ReduceMemory(preserve_first=1), TypeError, "preserve_first must be a bool"),  # type: ignore[arg-type]
    (lambda: ReduceMemory(min_messages=30, max_messages=20), ValueError, "min_messages"),
    (lambda: ReduceMemory(max_mesages=20), TypeError, "max_mesages"),
]


@pytest.mark.parametrize(("make", "error", "text"), BAD, ids=[b[2] for b in BAD])
def test_bad_arguments_fail_at_construction(
    make: Callable[[], Any], error: type[Exception], text: str
) -> None:
    with pytest.raises(error, match=text):
        make()


def test_called_without_an_agent_it_says_how_to_register() -> None:
    with pytest.raises(TypeError, match=r"step_callbacks=\[\.\.\.\]"):
        ReduceMemory()(TaskStep(task="t"))


def _root() -> str:
    return str(Path(__file__).resolve().parent.parent)


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": _root()}


def test_importing_the_core_does_not_import_smolagents() -> None:
    code = (
        "import sys, agentstate_reducer, agentstate_reducer.messages, agentstate_reducer.integrations;"
        "agentstate_reducer.read_message(object());"
        "assert not [m for m in sys.modules if m.split('.')[0] == 'smolagents'], 'smolagents imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, env=_env(), cwd=_root())


def test_without_smolagents_the_import_error_names_the_extra() -> None:
    text = import_error_without(("smolagents",), "agentstate_reducer.integrations.smolagents")
    assert 'pip install ".[smolagents]"' in text and "'smolagents' package" in text
