"""Context middleware for ``create_agent``, side by side on the same scripted agents.

Each agent is ``langchain.agents.create_agent`` with the scripted model and tools of
``tests/agent_script.py`` (every turn: 3 tool steps, the second with two parallel calls, then an
answer), a system prompt, a policy ``SystemMessage`` held in state, an ``InMemorySaver``, and one
context middleware:

* ``none``: no middleware (unbounded, the reference);
* ``ours-state`` / ``ours-request``: ``ReducerMiddleware`` (trigger 40 messages, keep 20, a
  summary model) in each mode; ``ours-request+clear``: request mode with ``ClearToolUsesEdit``;
* ``summarization``: ``SummarizationMiddleware(trigger=("messages", 40), keep=("messages", 20))``
  with the same summary model;
* ``context-editing``: ``ContextEditingMiddleware([ClearToolUsesEdit(trigger=1000, keep=3)])``.

Scenarios: ``langchain`` (LangChain messages), ``anthropic-blocks`` (the model answers with
Anthropic content blocks, text and ``tool_use``, as ChatAnthropic does), ``imported-anthropic``
(the thread starts from a 12-turn history imported in Anthropic's format: ``tool_use`` blocks in
assistant messages, ``tool_result`` blocks in user messages, then the agent goes on).

Per run: model calls; invalid calls (what OpenAI or Anthropic would reject, judged by
``tests.agent_script.provider_errors`` on the langchain-openai and langchain-anthropic payloads);
messages and tokens (``count_tokens_approximately``) per call, mean and max; prefix reuse (the
share of calls whose messages start with the previous call's: what a prompt cache can serve);
whether the last call still carries the policy; messages stored at the end.

The sweep runs ``ours-state``, ``ours-request`` and ``summarization`` over ten (trigger, keep)
message counts (``SWEEP``) for 10 turns each and counts invalid calls and runs that lost the
policy or the live question (calls that did not carry the question of the turn in progress). No
timings: these are counts. ``python -m benchmarks.bench_middleware [--quick] [--markdown]``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Literal

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the tests package, also when run as a file

POLICY = "Policy: never delete files."
SYSTEM = "You are a terse assistant."
MIDDLEWARES = ("none", "ours-state", "ours-request", "ours-request+clear", "summarization", "context-editing")
SCENARIOS = ("langchain", "anthropic-blocks", "imported-anthropic")


def _middleware(name: str, summary_model: Any, trigger: int = 40, keep: int = 20) -> list[Any]:
    from langchain.agents.middleware import (
        ClearToolUsesEdit,
        ContextEditingMiddleware,
        SummarizationMiddleware,
    )

    from agentstate_reducer import MessageReducer
    from agentstate_reducer.middleware import ReducerMiddleware

    reducer = MessageReducer()  # its limits are replaced by trigger and keep
    at: tuple[Literal["messages"], int] = ("messages", trigger)
    kept: tuple[Literal["messages"], int] = ("messages", keep)
    if name == "none":
        return []
    if name == "ours-state":
        return [ReducerMiddleware(reducer, trigger=at, keep=kept, summarizer=summary_model)]
    if name == "ours-request":
        return [ReducerMiddleware(reducer, mode="request", trigger=at, keep=kept, summarizer=summary_model)]
    if name == "ours-request+clear":
        return [
            ReducerMiddleware(
                reducer,
                mode="request",
                trigger=at,
                keep=kept,
                summarizer=summary_model,
                clear_tool_results=ClearToolUsesEdit(trigger=1000, keep=3),
            )
        ]
    if name == "summarization":
        return [SummarizationMiddleware(summary_model, trigger=at, keep=kept)]
    if name == "context-editing":
        return [ContextEditingMiddleware(edits=[ClearToolUsesEdit(trigger=1000, keep=3)])]
    raise ValueError(name)


def imported_history(turns: int) -> list[dict[str, Any]]:
    """A history exported from the Anthropic Messages API: tool_use / tool_result blocks."""
    out: list[dict[str, Any]] = []
    for t in range(turns):
        uses = [
            {"type": "tool_use", "id": f"toolu_{t}_{j}", "name": "lookup", "input": {"q": f"old{t}"}}
            for j in range(2)
        ]
        out += [
            {"role": "user", "content": f"old question {t} " * 4},
            {"role": "assistant", "content": [{"type": "text", "text": "Looking it up."}, *uses]},
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": u["id"], "content": f"old result {t} " * 20}
                    for u in uses
                ],
            },
            {"role": "assistant", "content": f"old answer {t} " * 6},
        ]
    return out


def run_one(scenario: str, middleware: str, turns: int, trigger: int = 40, keep: int = 20) -> dict[str, Any]:
    from langchain.agents import create_agent
    from langchain_core.messages import SystemMessage
    from langchain_core.messages.utils import count_tokens_approximately
    from langgraph.checkpoint.memory import InMemorySaver

    from tests.agent_script import TOOLS, ScriptedModel, prefix_reuse, provider_errors
    from tests.agent_script import turns as user_turns

    model = ScriptedModel(steps=3, blocks=scenario == "anthropic-blocks")
    summary_model = ScriptedModel(steps=0)
    agent = create_agent(
        model,
        TOOLS,
        system_prompt=SYSTEM,
        checkpointer=InMemorySaver(),
        middleware=_middleware(middleware, summary_model, trigger, keep),
    )
    config: Any = {"configurable": {"thread_id": f"{scenario}-{middleware}"}}
    first: list[Any] = [SystemMessage(POLICY)]
    if scenario == "imported-anthropic":
        first += imported_history(12)
    for n, t in enumerate(user_turns(turns)):
        agent.invoke({"messages": [*first, *t["messages"]]} if n == 0 else t, config)
    calls = model.calls
    invalid = [c for c in calls if provider_errors(c)]
    sizes = [len(c) for c in calls]
    tokens = [count_tokens_approximately(c) for c in calls]
    stored = agent.get_state(config).values["messages"]
    return {
        "scenario": scenario,
        "middleware": middleware,
        "calls": len(calls),
        "invalid": len(invalid),
        "first_error": provider_errors(invalid[0])[0] if invalid else "",
        "msgs_mean": sum(sizes) / len(sizes),
        "msgs_max": max(sizes),
        "tokens_mean": sum(tokens) / len(tokens),
        "tokens_max": max(tokens),
        "prefix_reuse": prefix_reuse(calls),
        "policy_kept": any(POLICY in str(m.content) for m in calls[-1]),
        "stored": len(stored),
        "summary_calls": len(summary_model.calls),
        "lost_turns": model.lost_turns,
    }


def measure(quick: bool = False) -> list[dict[str, Any]]:
    turns = 12 if quick else 40
    return [run_one(s, m, turns) for s in SCENARIOS for m in MIDDLEWARES]


#: (trigger, keep) in messages: the sweep over which invalid calls are counted
SWEEP = ((16, 5), (16, 7), (16, 12), (24, 7), (24, 12), (30, 7), (30, 15), (40, 7), (40, 15), (40, 20))
SWEPT = ("ours-state", "ours-request", "summarization")


def sweep(quick: bool = False) -> list[dict[str, Any]]:
    """Per scenario and middleware: invalid calls and calls over every ``SWEEP`` configuration."""
    turns = 6 if quick else 10
    out = []
    for s in SCENARIOS:
        for m in SWEPT:
            runs = [run_one(s, m, turns, t, k) for t, k in SWEEP]
            out.append(
                {
                    "scenario": s,
                    "middleware": m,
                    "configs": len(runs),
                    "broken_configs": sum(r["invalid"] > 0 for r in runs),
                    "invalid": sum(r["invalid"] for r in runs),
                    "calls": sum(r["calls"] for r in runs),
                    "policy_lost": sum(not r["policy_kept"] for r in runs),
                    "lost_turns": sum(r["lost_turns"] for r in runs),
                }
            )
    return out


def run(quick: bool = False) -> list[dict[str, Any]]:
    """Rows for ``python -m benchmarks``: invalid calls (target 0 for ours), the rest as details."""
    rows = []
    for r in sweep(quick):
        ours = r["middleware"].startswith("ours")
        rows.append(
            {
                "benchmark": f"sweep {r['scenario']}/{r['middleware']}",
                "metric": "invalid model calls",
                "ratio": r["invalid"],
                "target": "0" if ours else "",
                "met": r["invalid"] == 0 if ours else None,
                "calls": r["calls"],
                "broken_configs": f"{r['broken_configs']}/{r['configs']}",
                "policy_lost": r["policy_lost"],
                "lost_turns": r["lost_turns"],
            }
        )
    for r in measure(quick):
        ours = r["middleware"].startswith("ours")
        rows.append(
            {
                "benchmark": f"{r['scenario']}/{r['middleware']}",
                "metric": "invalid model calls",
                "ratio": r["invalid"],
                "target": "0" if ours else "",
                "met": r["invalid"] == 0 if ours else None,
                "calls": r["calls"],
                "msgs_mean": round(r["msgs_mean"], 1),
                "msgs_max": r["msgs_max"],
                "tokens_mean": round(r["tokens_mean"]),
                "tokens_max": r["tokens_max"],
                "prefix_reuse": round(r["prefix_reuse"], 2),
                "policy_kept": r["policy_kept"],
                "stored": r["stored"],
            }
        )
    return rows


def markdown_sweep(results: list[dict[str, Any]]) -> str:
    lines = [
        "| scenario | middleware | configurations with an invalid call | invalid calls | "
        "configurations that lost the policy | calls without the live question |",
        "|---|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(
            f"| {r['scenario']} | {r['middleware']} | {r['broken_configs']} of {r['configs']} | "
            f"{r['invalid']} of {r['calls']} | {r['policy_lost']} of {r['configs']} | {r['lost_turns']} |"
        )
    return "\n".join(lines)


def markdown(results: list[dict[str, Any]]) -> str:
    head = (
        "| scenario | middleware | calls | invalid | msgs/call mean (max) | tokens/call mean (max) "
        "| prefix reuse | policy kept | stored | summary calls |"
    )
    lines = [head, "|" + "---|" * 10]
    for r in results:
        lines.append(
            f"| {r['scenario']} | {r['middleware']} | {r['calls']} | {r['invalid']} | "
            f"{r['msgs_mean']:.1f} ({r['msgs_max']}) | {r['tokens_mean']:,.0f} ({r['tokens_max']:,}) | "
            f"{r['prefix_reuse']:.0%} | {'yes' if r['policy_kept'] else 'no'} | {r['stored']} | "
            f"{r['summary_calls']} |"
        )
    errors = [f"* {r['scenario']}/{r['middleware']}: {r['first_error']}" for r in results if r["first_error"]]
    return "\n".join(lines + (["", "First error per invalid run:", *errors] if errors else []))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="12 turns instead of 40")
    parser.add_argument("--markdown", action="store_true", help="print the docs table")
    args = parser.parse_args(argv)
    results = measure(args.quick)
    swept = sweep(args.quick)
    if args.markdown:
        print(markdown(results))
        print()
        print(markdown_sweep(swept))
    else:
        for r in [*results, *swept]:
            print(r)
    return 0


if __name__ == "__main__":
    sys.exit(main())
