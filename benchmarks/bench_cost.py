"""What a conversation's model calls cost with prompt caching, per context policy, side by side.

Each policy's model calls (what each call was sent) are priced by ``agentstate_reducer.cost``
(heuristic token counter, ``EXAMPLE_PRICES``) for OpenAI and Anthropic.

Conversations:

* ``demo``: the ``agentstate-reducer demo`` agent (a LangGraph graph, 4 messages a turn), on an
  ``InMemorySaver``: ``none`` (no reduction), ``window`` (``trim_messages(max_tokens=40,
  token_counter=len, strategy="last", start_on="human")`` at every call) and ``ours``
  (``ReducingCheckpointSaver`` with ``MessageReducer(min_messages=20, max_messages=40)``).
  SummarizationMiddleware needs a ``create_agent`` agent, which the demo graph is not.
* ``agent``: the agent of ``bench_middleware`` (``create_agent``, the scripted model and tools of
  ``tests/agent_script.py``: every turn 3 tool steps, one with two parallel calls, then an answer;
  a system prompt): ``none``, ``window`` (the same ``trim_messages`` of each of ``none``'s calls:
  the scripted model answers the same whatever it is sent), ``ours-request`` and ``ours-state``
  (``ReducerMiddleware``, trigger 40 messages, keep 20, a summary model) and ``summarization``
  (``SummarizationMiddleware(trigger=("messages", 40), keep=("messages", 20))``, the same
  summary model).

The goals (issue "what a conversation costs"), reported as rows with a target, never asserted:
at 300 turns with Anthropic pricing, ours costs at most 0.5x the window and 0.2x no reduction,
with a cache-servable share of at least 85% of the input tokens. The sweep runs ``ours-request``
on the agent over (trigger, keep) pairs and without a summarizer: what moves the figures.

``python -m benchmarks.bench_cost [--quick] [--markdown]`` (quick: 60 turns).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the tests package, also when run as a file

TURNS = 300
QUICK_TURNS = 60
SYSTEM = "You are a terse assistant."
#: (trigger, keep) in messages for the sweep, and whether a summarizer runs
SWEEP = ((40, 20, True), (40, 30, True), (40, 10, True), (80, 40, True), (80, 20, True), (40, 20, False))


def _intern(calls: list[list[Any]]) -> list[list[Any]]:
    """One object per message id: a run reads its history back from the saver as new objects
    each turn, and these scripted agents never edit a message, so the cost model can compare by
    identity instead of field by field (the same figures, much faster)."""
    seen: dict[Any, Any] = {}
    return [[seen.setdefault((m.id, m.type), m) if m.id else m for m in call] for call in calls]


def _window(calls: list[list[Any]], size: int = 40) -> list[list[Any]]:
    from langchain_core.messages import trim_messages

    return [
        trim_messages(call, max_tokens=size, token_counter=len, strategy="last", start_on="human",
                      include_system=True)
        for call in calls
    ]  # fmt: skip


def demo_calls(turns: int) -> dict[str, list[list[Any]]]:
    """The demo conversation's model calls per policy."""
    from langgraph.checkpoint.memory import InMemorySaver

    from agentstate_reducer import MessageReducer
    from checkpointers.cli.demo_graph import build_demo_graph, turn_input
    from checkpointers.saver import ReducingCheckpointSaver

    def run(saver: Any) -> list[list[Any]]:
        calls: list[list[Any]] = []
        graph = build_demo_graph(saver, on_model_call=calls.append)
        config: Any = {"configurable": {"thread_id": "t"}}
        for turn in range(1, turns + 1):
            graph.invoke(turn_input(turn), config, durability="exit")
        return _intern(calls)

    none = run(InMemorySaver())
    ours = run(ReducingCheckpointSaver(InMemorySaver(), MessageReducer(min_messages=20, max_messages=40)))
    return {"none": none, "window": _window(none), "ours": ours}


def _agent_middleware(name: str, summary_model: Any, trigger: int, keep: int, summarize: bool) -> list[Any]:
    from langchain.agents.middleware import SummarizationMiddleware

    from agentstate_reducer import MessageReducer
    from agentstate_reducer.middleware import ReducerMiddleware

    at: Any = ("messages", trigger)
    kept: Any = ("messages", keep)
    summarizer = summary_model if summarize else None
    if name == "none":
        return []
    if name == "ours-request":
        return [
            ReducerMiddleware(MessageReducer(), mode="request", trigger=at, keep=kept, summarizer=summarizer)
        ]
    if name == "ours-state":
        return [ReducerMiddleware(MessageReducer(), trigger=at, keep=kept, summarizer=summarizer)]
    if name == "summarization":
        return [SummarizationMiddleware(summary_model, trigger=at, keep=kept)]
    raise ValueError(name)


def agent_calls(
    name: str, turns: int, trigger: int = 40, keep: int = 20, summarize: bool = True
) -> list[list[Any]]:
    """The model calls of the middleware benchmark's agent under one middleware."""
    from langchain.agents import create_agent
    from langgraph.checkpoint.memory import InMemorySaver

    from tests.agent_script import TOOLS, ScriptedModel
    from tests.agent_script import turns as user_turns

    model = ScriptedModel(steps=3)
    agent = create_agent(
        model,
        TOOLS,
        system_prompt=SYSTEM,
        checkpointer=InMemorySaver(),
        middleware=_agent_middleware(name, ScriptedModel(steps=0), trigger, keep, summarize),
    )
    config: Any = {"configurable": {"thread_id": name}}
    for t in user_turns(turns):
        agent.invoke(t, config, durability="exit")
    return _intern(model.calls)


def price(calls: list[list[Any]], counter: Callable[[Any], int]) -> dict[str, Any]:
    """Tokens sent, cache share and cost for both providers."""
    from agentstate_reducer.cost import PROVIDERS, estimate

    out: dict[str, Any] = {"calls": len(calls)}
    for provider in PROVIDERS:
        report = estimate(calls, provider=provider, token_counter=counter)
        out["input_tokens"] = report.input_tokens
        out[f"{provider}_cache_share"] = report.cache_share
        out[f"{provider}_cost"] = report.cost
        out[f"{provider}_writes"] = report.cache_write_tokens
    return out


def _counter() -> Callable[[Any], int]:
    """The heuristic counter, each message object counted once (interned calls share them)."""
    from agentstate_reducer.tokens import heuristic_counter

    base = heuristic_counter()
    counts: dict[int, int] = {}
    keep: list[Any] = []  # holds each counted message, so its id is not reused

    def count(message: Any) -> int:
        n = counts.get(id(message))
        if n is None:
            n = counts[id(message)] = base(message)
            keep.append(message)
        return n

    return count


def measure(quick: bool = False) -> list[dict[str, Any]]:
    """One result per (conversation, policy)."""
    turns = QUICK_TURNS if quick else TURNS
    counter = _counter()
    results = []
    for policy, calls in demo_calls(turns).items():
        results.append({"conversation": "demo", "policy": policy, "turns": turns, **price(calls, counter)})
    none = agent_calls("none", turns)
    policies = {"none": none, "window": _window(none)}
    for name in ("ours-request", "ours-state", "summarization"):
        policies[name] = agent_calls(name, turns)
    for policy, calls in policies.items():
        results.append({"conversation": "agent", "policy": policy, "turns": turns, **price(calls, counter)})
    return results


def sweep(quick: bool = False) -> list[dict[str, Any]]:
    """``ours-request`` on the agent over ``SWEEP``."""
    turns = QUICK_TURNS if quick else TURNS
    counter = _counter()
    out = []
    for trigger, keep, summarize in SWEEP:
        calls = agent_calls("ours-request", turns, trigger, keep, summarize)
        label = f"trigger {trigger}, keep {keep}" + ("" if summarize else ", no summary")
        out.append({"conversation": "agent", "policy": f"ours-request ({label})", "turns": turns,
                    **price(calls, counter)})  # fmt: skip
    return out


def _goals(results: list[dict[str, Any]], conversation: str, ours: str) -> list[dict[str, Any]]:
    by = {r["policy"]: r for r in results if r["conversation"] == conversation}
    o, w, n = by[ours], by["window"], by["none"]
    name = f"{conversation}/{ours}, {o['turns']} turns, Anthropic pricing"
    to_window = o["anthropic_cost"] / w["anthropic_cost"]
    to_none = o["anthropic_cost"] / n["anthropic_cost"]
    share = o["anthropic_cache_share"]
    return [
        {"benchmark": name, "metric": "cost ours / window", "ratio": round(to_window, 3), "target": "<= 0.5",
         "met": to_window <= 0.5},
        {"benchmark": name, "metric": "cost ours / no reduction", "ratio": round(to_none, 3),
         "target": "<= 0.2", "met": to_none <= 0.2},
        {"benchmark": name, "metric": "cache-servable share of input tokens", "ratio": round(share, 3),
         "target": ">= 0.85", "met": share >= 0.85},
    ]  # fmt: skip


def _row(r: dict[str, Any]) -> dict[str, Any]:
    return {
        "benchmark": f"{r['conversation']}/{r['policy']}, {r['turns']} turns",
        "metric": "Anthropic input cost (USD)",
        "ratio": round(r["anthropic_cost"], 4),
        "target": "",
        "calls": r["calls"],
        "tokens_sent": r["input_tokens"],
        "cached_anthropic": f"{r['anthropic_cache_share']:.0%}",
        "cached_openai": f"{r['openai_cache_share']:.0%}",
        "openai_usd": round(r["openai_cost"], 4),
    }


def run(quick: bool = False) -> list[dict[str, Any]]:
    """Rows for ``python -m benchmarks``: the goals with their targets, then every policy."""
    results = measure(quick)
    swept = sweep(quick)
    rows = _goals(results, "demo", "ours") + _goals(results, "agent", "ours-request")
    rows += _goals(results, "agent", "ours-state")
    return rows + [_row(r) for r in [*results, *swept]]


def markdown(results: list[dict[str, Any]]) -> str:
    lines = [
        "| conversation | policy | calls | tokens sent | cached: Anthropic / OpenAI | Anthropic | OpenAI |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        lines.append(
            f"| {r['conversation']} | {r['policy']} | {r['calls']} | {r['input_tokens']:,} | "
            f"{r['anthropic_cache_share']:.0%} / {r['openai_cache_share']:.0%} | "
            f"${r['anthropic_cost']:.2f} | ${r['openai_cost']:.2f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_TURNS} turns instead of {TURNS}")
    parser.add_argument("--markdown", action="store_true", help="print the docs table")
    args = parser.parse_args(argv)
    results = [*measure(args.quick), *sweep(args.quick)]
    if args.markdown:
        print(markdown(results))
    else:
        for r in results:
            print(r)
    return 0


if __name__ == "__main__":
    sys.exit(main())
