"""``agentstate-reducer demo`` beside storage: the tokens the model was sent, the share a prompt
cache can serve and the cost per policy, as text and as one JSON object (``--json``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import trim_messages
from langgraph.checkpoint.memory import InMemorySaver

import checkpointers.cli.main as cli
from agentstate_reducer.cost import EXAMPLE_PRICES, estimate
from agentstate_reducer.tokens import heuristic_counter
from checkpointers.cli.demo_graph import build_demo_graph, turn_input

TURNS = 14


def bare_calls(turns: int) -> list[list[Any]]:
    """What each model call of the unreduced demo agent is sent, run apart from the CLI."""
    calls: list[list[Any]] = []
    graph = build_demo_graph(InMemorySaver(), on_model_call=calls.append)
    config: Any = {"configurable": {"thread_id": "t"}}
    for turn in range(1, turns + 1):
        graph.invoke(turn_input(turn), config, durability="exit")
    return calls


@pytest.fixture(scope="module")
def figures(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("demo")
    return cli.execute(["demo", "--turns", str(TURNS), "--db-dir", str(out)]).as_json()


def test_demo_json_is_one_object_with_storage_and_cost_per_policy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["demo", "--turns", "6", "--db-dir", str(tmp_path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)  # nothing else on stdout
    assert {"turns", "reducer", "token_counter", "storage", "prices", "policies"} <= set(out)
    assert set(out["storage"]) == {"bare", "reduced"}
    assert out["storage"]["bare"]["messages"] == 24 and out["storage"]["bare"]["model_calls"] == 12
    assert set(out["policies"]) == {"none", "window", "ours"}
    for policy in out["policies"].values():
        assert policy["calls"] == 12
        for provider in ("openai", "anthropic"):
            p = policy[provider]
            assert {"cache_read_tokens", "cache_write_tokens", "cache_share", "cost_usd"} <= set(p)
            assert p["cache_read_tokens"] + p["cache_write_tokens"] <= policy["input_tokens"]
    for provider, prices in EXAMPLE_PRICES.items():
        assert out["prices"][provider]["input"] == prices.input
        assert out["prices"][provider]["taken"] == prices.taken


def test_no_reduction_is_the_cost_model_on_what_the_bare_agent_sent(figures: dict[str, Any]) -> None:
    calls = bare_calls(TURNS)
    none = figures["policies"]["none"]
    for provider in ("openai", "anthropic"):
        report = estimate(calls, provider=provider, token_counter=heuristic_counter())
        assert none["input_tokens"] == report.input_tokens
        assert none[provider]["cache_read_tokens"] == report.cache_read_tokens
        assert none[provider]["cost_usd"] == pytest.approx(report.cost, abs=1e-6)


def test_the_window_is_trim_messages_at_every_call(figures: dict[str, Any]) -> None:
    trimmed = [
        trim_messages(call, max_tokens=40, token_counter=len, strategy="last", start_on="human",
                      include_system=True)
        for call in bare_calls(TURNS)
    ]  # fmt: skip
    report = estimate(trimmed, provider="anthropic", token_counter=heuristic_counter())
    window = figures["policies"]["window"]
    assert window["input_tokens"] == report.input_tokens
    assert window["anthropic"]["cache_read_tokens"] == report.cache_read_tokens


def test_ours_sends_and_stores_less_than_no_reduction(figures: dict[str, Any]) -> None:
    policies = figures["policies"]
    assert policies["ours"]["input_tokens"] < policies["none"]["input_tokens"]
    assert policies["ours"]["stored_bytes"] < policies["none"]["stored_bytes"]
    assert policies["window"]["stored_bytes"] == policies["none"]["stored_bytes"]  # cut when sent only


def test_demo_prints_the_cost_table_after_the_storage_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cli.execute(["demo", "--turns", "3", "--db-dir", str(tmp_path)])
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].startswith("agentstate-reducer demo: 3 turns")
    storage = next(i for i, line in enumerate(lines) if line.startswith("bare/reduced"))
    sent = next(i for i, line in enumerate(lines) if line.startswith("what the model was sent"))
    assert storage < sent
    assert f"example prices of {EXAMPLE_PRICES['anthropic'].taken}" in lines[sent]
    rows = {line.split()[0] for line in lines[sent + 3 : sent + 6]}
    assert rows == {"none", "window", "ours"}
