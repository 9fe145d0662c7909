"""Providers' compactions: read in every shape, kept and cut as the providers' guides say.

OpenAI Responses: items before the newest ``compaction`` item may be dropped, the item itself is
sent back. Anthropic: the API ignores what precedes an assistant message's ``compaction`` block,
which is sent back verbatim. Planner rule 5 (``agentstate_reducer.planner``).
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from agentstate_reducer import MessageReducer, ReducerConfig, _columns, read_message
from agentstate_reducer._columns.bulk import compaction_indices
from agentstate_reducer.messages import PINNED_KINDS
from agentstate_reducer.planner import first_unit
from agentstate_reducer.tokens import heuristic_counter
from tests.convo import (
    MULTI_RESULT_FORMATS,
    PROPERTY_BUILDERS,
    Spec,
    beta_compaction_message,
    compaction_block,
    ids,
)
from tests.test_properties import conversations, violations

# --- reading --------------------------------------------------------------------------------------


def _sdk_shapes() -> dict[str, Any]:
    from agents import Agent, CompactionItem
    from anthropic.types.beta import BetaCompactionBlockParam, BetaMessageParam, BetaTextBlockParam
    from openai.types.responses import ResponseCompactionItem, ResponseCompactionItemParam

    param = ResponseCompactionItemParam(type="compaction", id="cmp", encrypted_content="gAAAA")
    block: BetaCompactionBlockParam = {"type": "compaction", "content": "summary", "encrypted_content": None}
    text: BetaTextBlockParam = {"type": "text", "text": "and then"}
    message: BetaMessageParam = {"role": "assistant", "content": [block, text]}
    return {
        "responses dict": param,
        "responses object": ResponseCompactionItem(id="cmp", encrypted_content="gAAAA", type="compaction"),
        "agents run item": CompactionItem(agent=Agent(name="a"), raw_item=param),  # type: ignore[arg-type]
        "anthropic dict": message,
        "anthropic object": beta_compaction_message("cmp"),
        "langchain object": AIMessage(content=[compaction_block("cmp"), {"type": "text", "text": "ok"}]),
        "langchain non_standard block": AIMessage(
            content=[{"type": "non_standard", "value": compaction_block("cmp")}]
        ),
    }


SDK_SHAPES = _sdk_shapes()


@pytest.mark.parametrize("shape", sorted(SDK_SHAPES))
def test_a_compaction_is_read_in_every_shape(shape: str) -> None:
    info = read_message(SDK_SHAPES[shape])
    assert info.compaction is True
    assert info.kind == "ai" and info.call_ids == ()


def test_other_messages_hold_no_compaction() -> None:
    others = [
        {"role": "user", "content": [compaction_block("u")]},  # only an assistant message holds one
        {"role": "assistant", "content": [{"type": "text", "text": "compaction"}]},
        {"type": "reasoning", "id": "rs", "summary": []},
        AIMessage(content="compaction"),
        {"role": "model", "parts": [{"type": "compaction"}]},  # Gemini parts are no content blocks
    ]
    assert [read_message(m).compaction for m in others] == [False] * len(others)


def test_the_opaque_parts_are_not_counted() -> None:
    counter = heuristic_counter()
    short = {"role": "assistant", "content": [{"type": "compaction", "content": "summary"}]}
    sealed = {
        "role": "assistant",
        "content": [
            {
                "type": "compaction",
                "content": "summary",
                "encrypted_content": "E" * 4000,
                "signature": "S" * 4000,
            }
        ],
    }
    assert counter(sealed) == counter(short)
    item = {"type": "compaction", "id": "cmp", "encrypted_content": "E" * 4000}
    assert counter(item) == counter({"type": "compaction", "id": "cmp", "encrypted_content": ""})


# --- the rule, in every shape ---------------------------------------------------------------------


def _turn(n: int) -> Spec:
    return [("human", f"h{n}"), ("call", f"c{n}", [f"x{n}"]), ("tool", f"t{n}", f"x{n}"), ("ai", f"a{n}")]


SPEC: Spec = [
    *_turn(1), ("compaction", "k1"), *_turn(2), *_turn(3), ("compaction", "k2"), *_turn(4), *_turn(5)
]
SHAPE_NAMES = sorted(PROPERTY_BUILDERS)


def _recorder(into: list[list[Any]]) -> Any:
    """A summarizer that records what it is given."""

    def summarize(messages: list[Any]) -> str:
        into.append(messages)
        return "summary"

    return summarize


def _reduce(
    messages: list[Any], summarized: list[list[Any]] | None = None, **config: Any
) -> tuple[list[str | None], list[str | None], Any]:
    hooked: list[list[Any]] = []
    fields: dict[str, Any] = {"preserve_first": False, "on_prune": [lambda pruned, ns: hooked.append(pruned)]}
    if summarized is not None:
        fields["summarize_fn"] = _recorder(summarized)
    before = list(messages)
    out = MessageReducer(config=ReducerConfig(**{**fields, **config})).reduce(messages)
    assert messages == before  # the input is not changed
    assert violations([read_message(m) for m in out.surviving]) == []
    assert [ids(p) for p in hooked] == ([ids(out.pruned)] if out.pruned else [])  # the hooks see each once
    return ids(out.surviving), ids(out.pruned), out


@pytest.mark.parametrize("fmt", SHAPE_NAMES)
def test_what_the_newest_compaction_replaced_goes_first_and_is_never_summarized(fmt: str) -> None:
    messages = PROPERTY_BUILDERS[fmt](SPEC)
    summarized: list[list[Any]] = []
    # room for more than what follows k2: still, nothing before it is kept
    kept, pruned, out = _reduce(messages, summarized, min_messages=14, max_messages=20)
    assert kept == ["k2", *ids(PROPERTY_BUILDERS[fmt](_turn(4) + _turn(5)))]
    assert pruned == ids(PROPERTY_BUILDERS[fmt](SPEC[: SPEC.index(("compaction", "k2"))]))
    assert "k1" in pruned  # an older compaction is pruned like any message
    assert summarized == []  # everything pruned is in the compaction already
    assert out.summary is None


@pytest.mark.parametrize("fmt", SHAPE_NAMES)
def test_after_the_compaction_the_budget_cuts_as_usual_and_that_part_is_summarized(fmt: str) -> None:
    messages = PROPERTY_BUILDERS[fmt](SPEC)
    summarized: list[list[Any]] = []
    last_turn = len(PROPERTY_BUILDERS[fmt](_turn(5)))  # room for the last turn (and the compaction)
    kept, pruned, _ = _reduce(messages, summarized, min_messages=last_turn, max_messages=20)
    assert kept == ["k2", *ids(PROPERTY_BUILDERS[fmt](_turn(5)))]
    assert [ids(batch) for batch in summarized] == [ids(PROPERTY_BUILDERS[fmt](_turn(4)))]
    assert pruned[-4:] == ["h4", "c4", "t4", "a4"] and "k2" not in pruned


@pytest.mark.parametrize("fmt", SHAPE_NAMES)
def test_an_untriggered_history_keeps_its_compactions_and_what_they_replaced(fmt: str) -> None:
    messages = PROPERTY_BUILDERS[fmt](SPEC)
    kept, pruned, _ = _reduce(messages, min_messages=4, max_messages=100)
    assert kept == ids(messages) and pruned == []


def test_a_compaction_is_kept_with_the_tool_results_of_its_calls() -> None:
    compacting = {
        "role": "assistant",
        "id": "k",
        "content": [compaction_block("k"), {"type": "tool_use", "id": "x", "name": "f", "input": {}}],
    }
    answer = {"type": "tool_result", "tool_use_id": "x", "content": "1"}
    result = {"role": "user", "id": "r", "content": [answer]}
    messages = [
        {"role": "user", "id": "h1", "content": "q"},
        compacting,
        result,
        {"role": "assistant", "id": "a1", "content": "a"},
        {"role": "user", "id": "h2", "content": "q"},
        {"role": "assistant", "id": "a2", "content": "a"},
    ]
    kept, pruned, _ = _reduce(messages, min_messages=2, max_messages=4)
    assert kept == ["k", "r", "h2", "a2"] and pruned == ["h1", "a1"]


def test_the_compaction_stands_for_the_human_turn_it_came_in() -> None:
    # server-side compaction comes in the reply to the newest question: that question is in it
    def said(mid: str) -> dict[str, Any]:
        text = {"type": "output_text", "text": mid}
        return {"type": "message", "role": "assistant", "id": mid, "content": [text]}

    items = [
        {"type": "message", "role": "user", "id": "h1", "content": "q1"},
        said("a1"),
        {"type": "message", "role": "user", "id": "h2", "content": "q2"},
        {"type": "compaction", "id": "k", "encrypted_content": "gAAAA"},
        said("a2"),
    ]
    kept, pruned, _ = _reduce(items, min_messages=3, max_messages=4, start_on_human=True)
    assert kept == ["k", "a2"] and pruned == ["h1", "a1", "h2"]


def test_system_messages_and_the_first_one_stay_pinned() -> None:
    messages = [
        {"role": "system", "id": "s", "content": "rules"},
        {"role": "user", "id": "h1", "content": "q"},
        {"role": "assistant", "id": "a1", "content": "a"},
        {"role": "assistant", "id": "k", "content": [compaction_block("k")]},
        {"role": "user", "id": "h2", "content": "q"},
        {"role": "assistant", "id": "a2", "content": "a"},
    ]
    kept, pruned, _ = _reduce(messages, min_messages=4, max_messages=5, preserve_first=True)
    assert kept == ["s", "k", "h2", "a2"] and pruned == ["h1", "a1"]


def test_with_an_injected_summary_only_what_follows_the_compaction_is_summarized() -> None:
    messages = PROPERTY_BUILDERS["anthropic_dict"](SPEC)
    summarized: list[list[Any]] = []
    cfg = ReducerConfig(
        min_messages=4, max_messages=20, preserve_first=False, inject_summary=True,
        summarize_fn=_recorder(summarized),
    )
    reducer = MessageReducer(config=cfg)
    out = reducer.reduce(messages)
    assert [ids(batch) for batch in summarized] == [["h4", "c4", "t4", "a4"]]
    assert out.stats.pruned_count == len(out.pruned)
    assert "k2" in ids(out.surviving)


@pytest.mark.parametrize("fmt", ["anthropic_dict", "langchain_object", "responses_items"])
def test_the_injected_summary_goes_after_the_compaction_and_stays_the_one(fmt: str) -> None:
    """A provider ignores what precedes a compaction: the summary of what was cut after it goes
    right after it, and the next reduction finds it there as the running summary (one summary
    in the list, on both paths)."""
    from agentstate_reducer.summary import is_summary_message

    summarized: list[list[Any]] = []
    cfg = ReducerConfig(
        min_messages=4, max_messages=20, preserve_first=False, inject_summary=True,
        summarize_fn=_recorder(summarized),
    )
    results = []
    was = _columns.enabled
    try:
        for on in (True, False):
            _columns.use(on)
            summarized.clear()
            reducer = MessageReducer(config=cfg)
            out = reducer.reduce(PROPERTY_BUILDERS[fmt](SPEC))
            after = [i for i, m in enumerate(out.surviving) if read_message(m).compaction]
            assert after and is_summary_message(out.surviving[after[-1] + 1]), ids(out.surviving)
            more = [*out.surviving, *PROPERTY_BUILDERS[fmt]([s for n in range(90, 95) for s in _turn(n)])]
            again = reducer.reduce(more)
            summaries = [i for i, m in enumerate(again.surviving) if is_summary_message(m)]
            compactions = [i for i, m in enumerate(again.surviving) if read_message(m).compaction]
            assert len(summaries) == 1 and summaries[0] == compactions[-1] + 1, ids(again.surviving)
            results.append((ids(out.surviving), ids(again.surviving)))
    finally:
        _columns.use(was)
    assert results[0] == results[1]


@pytest.mark.parametrize("mode", ["messages", "tokens"])
def test_an_async_reduction_decides_the_same(mode: str) -> None:
    config: dict[str, Any] = {"min_messages": 4, "max_messages": 20}
    if mode == "tokens":
        config = {"max_tokens": 150, "target_tokens": 100}
    messages = PROPERTY_BUILDERS["langchain_object"](SPEC)
    batches: dict[str, list[list[str | None]]] = {"sync": [], "async": []}

    def summarize(ms: list[Any]) -> str:
        batches["sync"].append(ids(ms))
        return "summary"

    async def asummarize(ms: list[Any]) -> str:
        batches["async"].append(ids(ms))
        return "summary"

    base = ReducerConfig(preserve_first=False, **config)
    sync = MessageReducer(config=dataclasses.replace(base, summarize_fn=summarize)).reduce(messages)
    areducer = MessageReducer(config=dataclasses.replace(base, asummarize_fn=asummarize))
    out = asyncio.run(areducer.areduce(messages))
    assert out.stats.triggered and ids(out.surviving)[0] == "k2"
    assert ids(out.surviving) == ids(sync.surviving) and batches["async"] == batches["sync"]
    assert all(str(m)[-1] in "45" for batch in batches["async"] for m in batch)


# --- the column path and the reference decide the same --------------------------------------------


@st.composite
def compacted(draw: st.DrawFn) -> tuple[str, list[Any]]:
    fmt = draw(st.sampled_from(SHAPE_NAMES))
    parts = draw(st.lists(conversations(multi=fmt in MULTI_RESULT_FORMATS), min_size=1, max_size=4))
    spec: Spec = []
    for k, part in enumerate(parts):
        if k and draw(st.booleans()):
            spec.append(("compaction", f"k{k}"))
        spec += [(kind, f"{k}-{mid}", *[_renamed(r, k) for r in rest]) for kind, mid, *rest in part]
    return fmt, PROPERTY_BUILDERS[fmt](spec)


def _renamed(value: Any, k: int) -> Any:
    return [f"{k}-{v}" for v in value] if isinstance(value, list) else f"{k}-{value}"


POLICIES: list[dict[str, Any]] = [
    {"min_messages": 3, "max_messages": 8},
    {"min_messages": 0, "max_messages": 4, "start_on_human": True},
    {"min_messages": 6, "max_messages": 12, "preserve_first": False},
    {"max_tokens": 300, "target_tokens": 120},
    {"max_tokens": 200, "target_tokens": 200, "preserve_first": False, "start_on_human": True},
]


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(convo=compacted(), policy=st.sampled_from(range(len(POLICIES))), steps=st.integers(1, 3))
def test_the_column_path_equals_the_reference(convo: tuple[str, list[Any]], policy: int, steps: int) -> None:
    _, messages = convo
    assert compaction_indices(messages) == [i for i, m in enumerate(messages) if read_message(m).compaction]

    def run() -> list[tuple[list[int], list[int], Any]]:
        cfg = ReducerConfig(token_counter=heuristic_counter(), **POLICIES[policy])
        reducer = MessageReducer(config=cfg)  # warm: the same reducer over a growing history
        out = []
        for k in range(1, steps + 1):
            got = reducer.reduce(messages[: len(messages) * k // steps])
            out.append(([id(m) for m in got.surviving], [id(m) for m in got.pruned], got.stats))
        return out

    was = _columns.enabled
    try:
        _columns.use(True)
        fast = run()
        _columns.use(False)
        reference = run()
    finally:
        _columns.use(was)
    assert fast == reference


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(convo=compacted(), policy=st.sampled_from(range(len(POLICIES))))
def test_nothing_before_the_newest_compaction_survives_a_triggered_reduction(
    convo: tuple[str, list[Any]], policy: int
) -> None:
    _, messages = convo
    infos = [read_message(m) for m in messages]
    newest = max((i for i, info in enumerate(infos) if info.compaction), default=None)
    summarized: list[list[Any]] = []
    cfg = ReducerConfig(summarize_fn=_recorder(summarized), **POLICIES[policy])
    out = MessageReducer(config=cfg).reduce(messages)
    if newest is None or not out.stats.triggered:
        return
    kept = {id(m) for m in out.surviving}
    assert id(messages[newest]) in kept
    before = [i for i in range(newest) if id(messages[i]) in kept]
    first = set(first_unit(infos.__getitem__, len(infos))) if cfg.preserve_first else set()
    assert all(infos[i].kind in PINNED_KINDS or i in first for i in before), before
    covered = {id(m) for m in messages[:newest]}
    assert not any(id(m) in covered for batch in summarized for m in batch)


def test_a_langchain_history_with_a_compaction_reduces_the_same_on_both_paths() -> None:
    msgs: list[Any] = []
    for t in range(30):
        msgs += [
            HumanMessage(f"q{t}", id=f"h{t}"),
            AIMessage("", tool_calls=[{"id": f"c{t}", "name": "f", "args": {}}], id=f"a{t}"),
            ToolMessage("r", tool_call_id=f"c{t}", id=f"t{t}"),
        ]
        if t == 20:
            msgs.append(AIMessage([compaction_block("k")], id="k"))
    was = _columns.enabled
    try:
        results = []
        for on in (True, False):
            _columns.use(on)
            out = MessageReducer(min_messages=6, max_messages=40).reduce(msgs)
            results.append([m.id for m in out.surviving])
    finally:
        _columns.use(was)
    assert results[0] == results[1]
    assert results[0][:2] == ["h0", "k"]  # the first message (preserve_first) and the compaction



def test_a_pydantic_ai_compaction_arriving_in_a_request_is_seen_by_a_warm_reducer() -> None:
    """A reducer that reduced the history reads only what was appended; a ``ModelRequest``
    holding a ``CompactionPart`` is a compaction there too, on both paths."""
    from pydantic_ai.messages import CompactionPart, ModelRequest, ModelResponse, TextPart, UserPromptPart

    history: list[Any] = []
    for i in range(12):
        history += [ModelRequest(parts=[UserPromptPart(f"q{i}")]), ModelResponse(parts=[TextPart(f"a{i}")])]
    compaction = ModelRequest(parts=[CompactionPart(content="q0 to a11"), UserPromptPart("q12")])
    was = _columns.enabled
    try:
        results = []
        for on in (True, False):
            _columns.use(on)
            config = ReducerConfig(min_messages=4, max_messages=10, preserve_first=False)
            reducer = MessageReducer(config=config)
            reducer.reduce(history)
            results.append(reducer.reduce([*history, compaction]).surviving)
    finally:
        _columns.use(was)
    assert results[0] == results[1] == [compaction]  # what the compaction replaced is pruned


# --- integrations ---------------------------------------------------------------------------------


def test_a_request_chained_on_the_server_is_reduced_only_when_asked(caplog: pytest.LogCaptureFixture) -> None:
    from agentstate_reducer.integrations.openai_responses import reduce_request

    items = PROPERTY_BUILDERS["responses_items"](SPEC)
    reducer = MessageReducer(config=ReducerConfig(min_messages=4, max_messages=8, preserve_first=False))
    request = {"model": "gpt-5", "input": items, "previous_response_id": "resp_1"}
    with caplog.at_level("WARNING", logger="agentstate_reducer.responses"):
        first = reduce_request(request, reducer)
        again = reduce_request({**request, "previous_response_id": "resp_2"}, reducer)
    assert first["input"] is items and again["input"] is items  # unreduced
    warned = [r for r in caplog.records if r.name == "agentstate_reducer.responses"]
    assert len(warned) == 1 and "reduce_chained=True" in warned[0].getMessage()
    asked = reduce_request(request, reducer, reduce_chained=True)
    assert ids(asked["input"])[0] == "k2" and asked["previous_response_id"] == "resp_1"
    plain = reduce_request({"model": "gpt-5", "input": items}, reducer)
    assert ids(plain["input"]) == ids(asked["input"]) and request["input"] is items
    with pytest.raises(TypeError, match="request must be a mapping"):
        reduce_request(items, reducer)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"request\['input'\] must be a str or a list"):
        reduce_request({"input": 3}, reducer)


def test_a_conversation_warns_once_per_conversation(caplog: pytest.LogCaptureFixture) -> None:
    from agentstate_reducer.integrations.openai_responses import reduce_request

    reducer = MessageReducer(min_messages=1, max_messages=2)
    with caplog.at_level("WARNING", logger="agentstate_reducer.responses"):
        for conversation in ["conv_1", {"id": "conv_1"}, "conv_2"]:
            request = {"input": [{"role": "user", "content": "q"}], "conversation": conversation}
            reduce_request(request, reducer)
    assert [r.getMessage().split(":")[0] for r in caplog.records] == [
        "not reducing a request chained with conversation conv_1",
        "not reducing a request chained with conversation conv_2",
    ]


class _FakeCompact:
    """``client.responses.compact`` without a network: the newest user message and a compaction item."""

    def __init__(self) -> None:
        self.inputs: list[list[Any]] = []

    async def compact(self, **kwargs: Any) -> Any:
        from types import SimpleNamespace

        self.inputs.append(list(kwargs["input"]))
        users = [i for i in kwargs["input"] if isinstance(i, dict) and i.get("role") == "user"]
        item = {"type": "compaction", "id": f"cmp_{len(self.inputs)}", "encrypted_content": "gAAAA"}
        return SimpleNamespace(output=[*users[-1:], item], usage=None)


async def test_reducing_session_inside_the_compaction_session(tmp_path: Any) -> None:
    from types import SimpleNamespace

    from agents import Agent, OpenAIResponsesCompactionSession, Runner, SQLiteSession, function_tool
    from agents.testing import ScriptedModel, assistant_message, function_call

    from agentstate_reducer.integrations.openai_agents import ReducingSession

    @function_tool
    def lookup(q: str) -> str:
        """Look something up."""
        return "42"

    inner = SQLiteSession("user-1", str(tmp_path / "chats.db"))
    compact = _FakeCompact()
    session = OpenAIResponsesCompactionSession(
        "user-1",
        ReducingSession(inner, min_messages=6, max_messages=12),
        client=SimpleNamespace(responses=compact),  # type: ignore[arg-type]
        compaction_mode="input",
        should_trigger_compaction=lambda context: len(context["compaction_candidate_items"]) >= 8,
    )
    model = ScriptedModel()
    agent = Agent(name="assistant", instructions="Use the lookup tool.", model=model, tools=[lookup])
    history: list[list[Any]] = []
    for n in range(10):
        call = function_call("lookup", {"q": "x"}, call_id=f"call_{n}")
        model.extend([[call], [assistant_message(f"{n}")]])
        await Runner.run(agent, f"question {n}", session=session)
        history.append(await inner.get_items())
    inner.close()
    assert len(compact.inputs) == 1  # the compaction ran, through the reducing session
    assert all(len(stored) <= 12 for stored in history)
    assert all(violations([read_message(i) for i in stored]) == [] for stored in history)
    stored = history[-1]
    assert stored[0] == {"type": "compaction", "id": "cmp_1", "encrypted_content": "gAAAA"}
    assert [i.get("role") for i in stored].count("user") <= 2


def test_the_langchain_middleware_passes_a_compaction_through() -> None:
    from langchain.agents import create_agent
    from langchain_core.outputs import ChatResult
    from langgraph.checkpoint.memory import InMemorySaver

    from agentstate_reducer.middleware import ReducerMiddleware
    from tests.agent_script import TOOLS, ScriptedModel, turns

    block = {"type": "compaction", "content": "what q0 to q5 said", "encrypted_content": None}

    class Compacting(ScriptedModel):
        """Answers turn q5 as ChatAnthropic does when the API compacted: a compaction block first."""

        def _generate(self, messages: list[Any], *args: Any, **kwargs: Any) -> ChatResult:
            result = super()._generate(messages, *args, **kwargs)
            message = result.generations[0].message
            if not getattr(message, "tool_calls", None) and "answer to q5 " in str(message.content):
                message.content = [dict(block), *message.content]
            return result

    model = Compacting(steps=2, blocks=True)
    summarized: list[tuple[int, list[str]]] = []

    def summarize(messages: list[Any]) -> str:
        summarized.append((len(model.calls), [m.text for m in messages if m.type == "human"]))
        return "summary"

    reducer = MessageReducer(config=ReducerConfig(min_messages=10, max_messages=20, summarize_fn=summarize))
    agent = create_agent(model, TOOLS, checkpointer=InMemorySaver(), middleware=[ReducerMiddleware(reducer)])
    config: Any = {"configurable": {"thread_id": "t"}}
    for t in turns(9):
        agent.invoke(t, config)
    sent_after = [call for call in model.calls if any(read_message(m).compaction for m in call)]
    assert sent_after, "the compaction never reached the model again"
    for call in sent_after:
        (kept,) = [m for m in call if read_message(m).compaction]
        assert kept.content[0] == block  # untouched
    first_sent = model.calls.index(sent_after[0])
    later = [texts for n, texts in summarized if n >= first_sent]  # made before call n
    assert later and any(texts for texts in later)  # turns after the compaction were summarized
    assert not any(t.startswith(f"q{i} ") for texts in later for t in texts for i in range(6))


def test_a_pydantic_ai_compaction_part_is_a_compaction() -> None:
    from pydantic_ai.messages import CompactionPart, ModelRequest, ModelResponse, TextPart, UserPromptPart

    def turn(n: int) -> list[Any]:
        return [ModelRequest(parts=[UserPromptPart(f"q{n}")]), ModelResponse(parts=[TextPart(f"a{n}")])]

    native = CompactionPart(content="s", id="cmp", provider_name="anthropic")
    provider = ModelResponse(parts=[native, TextPart("a")])
    written = ModelRequest(parts=[CompactionPart(content="what came before")])  # the application's summary
    history = [*turn(1), written, *turn(2), provider, *turn(3), *turn(4)]
    assert [read_message(m).compaction for m in history].count(True) == 2
    assert compaction_indices(history) == [2, 5]
    assert (read_message(written).kind, read_message(provider).kind) == ("human", "ai")
    reducer = MessageReducer(config=ReducerConfig(min_messages=4, max_messages=8, preserve_first=False))
    out = reducer.reduce(history)
    assert out.surviving[0] is provider and out.pruned == history[:5]
