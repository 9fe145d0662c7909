"""Count-mode ``reduce`` vs ``trim_messages`` and a plain list copy, at 100, 1k and 10k messages.

Every time is the median of several runs in this process; the table reports ratios, so the
numbers compare like with like on whatever machine runs it. Targets (issue 2): at 10k messages
``reduce`` at least 2x faster than ``trim_messages(token_counter=len, strategy="last",
start_on="human", include_system=True)``, and time(10k) / time(1k) <= 12 (linear planning).
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable
from typing import Any

from agentstate_reducer import MessageReducer


def conversation(n: int) -> list[Any]:
    """A system prompt, then turns of human / AI tool call with two parallel results / AI answer."""
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

    msgs: list[Any] = [SystemMessage("You are a helpful agent.", id="sys")]
    t = 0
    while len(msgs) < n:
        calls = [
            {"name": "search", "args": {"q": f"q{t}"}, "id": f"c{t}a"},
            {"name": "calc", "args": {}, "id": f"c{t}b"},
        ]
        msgs += [
            HumanMessage(f"question {t} " * 8, id=f"h{t}"),
            AIMessage("", tool_calls=calls, id=f"a{t}"),
            ToolMessage(f"result {t}a " * 10, tool_call_id=f"c{t}a", id=f"t{t}a"),
            ToolMessage(f"result {t}b " * 10, tool_call_id=f"c{t}b", id=f"t{t}b"),
            AIMessage(f"answer {t} " * 12, id=f"f{t}"),
        ]
        t += 1
    return msgs[:n]


def median_seconds(fn: Callable[[], Any], repeat: int) -> float:
    """Median seconds per call, each after a full collection, so garbage left by the previous
    call is not collected on this one's clock."""
    times = []
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def run(quick: bool = False) -> list[dict[str, Any]]:
    """Two windows: a realistic one (keep 40 of 60, what a chat agent keeps) and half the history."""
    from langchain_core.messages import trim_messages

    rows: list[dict[str, Any]] = []
    for window in ("keep 40", "keep half"):
        per_size: dict[int, float] = {}
        for n in (100, 1_000, 10_000):
            msgs = conversation(n)
            keep = 40 if window == "keep 40" else n // 2
            reducer = MessageReducer(min_messages=keep, max_messages=keep + 20)
            repeat = 3 if quick else (9 if n == 10_000 else 21)

            def trim(msgs: list[Any] = msgs, keep: int = keep) -> Any:
                return trim_messages(
                    msgs,
                    max_tokens=keep,
                    token_counter=len,
                    strategy="last",
                    start_on="human",
                    include_system=True,
                )

            t_reduce = median_seconds(lambda: reducer.reduce(msgs), repeat)  # noqa: B023
            t_trim = median_seconds(trim, repeat)
            t_copy = median_seconds(lambda: list(msgs), repeat)  # noqa: B023
            per_size[n] = t_reduce
            rows.append(
                {
                    "benchmark": f"count mode, {window}, {n} msgs",
                    "reduce_ms": round(t_reduce * 1e3, 3),
                    "trim_messages_ms": round(t_trim * 1e3, 3),
                    "list_copy_ms": round(t_copy * 1e3, 4),
                    "ratio": f"trim/reduce = {t_trim / t_reduce:.2f}x",
                }
            )
        rows.append(
            {
                "benchmark": f"count mode, {window}, scaling",
                "ratio": f"time(10k)/time(1k) = {per_size[10_000] / per_size[1_000]:.2f} (target <= 12)",
            }
        )
    rows += untriggered(quick)
    return rows


def untriggered(quick: bool = False) -> list[dict[str, Any]]:
    """``reduce(existing, new)`` of a valid history plus one message, no trigger firing: the
    validity check every output passes. Warm: ``existing`` is the reducer's previous output (only
    the new message is read); cold: a fresh reducer reads the whole history."""
    from langchain_core.messages import HumanMessage

    rows: list[dict[str, Any]] = []
    for n in (1_000, 10_000):
        msgs = conversation(n)
        new = [HumanMessage("one more", id="new")]
        reducer = MessageReducer(min_messages=n, max_messages=2 * n)
        existing = reducer.reduce(msgs).surviving
        repeat = 5 if quick else 21
        batch = 200 if n == 1_000 else 20  # microsecond calls: time batches, not single calls

        def warm(existing: list[Any] = existing, new: list[Any] = new, r: MessageReducer = reducer) -> None:
            for _ in range(batch):  # noqa: B023
                r.reduce(existing, new)

        def copy(existing: list[Any] = existing, new: list[Any] = new) -> None:
            for _ in range(batch):  # noqa: B023
                out = [*existing, *new]
            del out

        t_warm = median_seconds(warm, repeat) / batch
        t_copy = median_seconds(copy, repeat) / batch
        t_cold = median_seconds(
            lambda: MessageReducer(min_messages=n, max_messages=2 * n).reduce(existing, new),  # noqa: B023
            3 if quick else 7,
        )
        ratio = t_warm / t_copy
        rows.append(
            {
                "benchmark": f"untriggered reduce(existing, new), {n} msgs",
                "metric": f"warm {t_warm * 1e6:.0f} us, cold {t_cold * 1e3:.2f} ms, "
                f"copy {t_copy * 1e6:.0f} us",
                "ratio": f"warm/copy = {ratio:.2f}x",
                "target": "warm <= 3x a list copy",
                "met": ratio <= 3,
            }
        )
    return rows


if __name__ == "__main__":
    for row in run():
        print(row)
