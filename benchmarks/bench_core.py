"""Count-mode ``reduce`` vs ``trim_messages`` and a plain list copy, at 100, 1k and 10k messages.

Every time is the median of several runs in this process; the table reports ratios, so the
numbers compare like with like on whatever machine runs it. ``trim_messages`` is
``trim_messages(token_counter=len, strategy="last", start_on="human", include_system=True)`` with
the same number of messages kept. Each row carries its ratio as a number (``ratio``), what it
divides (``metric``) and a ``target`` the runner judges the median of several runs against.

Targets, on LangChain messages:

* keep half of 10k messages: ``reduce`` at least as fast as ``trim_messages``
  (trim_messages / reduce >= 1), and time(10k) / time(1k) <= 12;
* keep 40 of 10k messages: ``reduce`` at least 3x faster than ``trim_messages``, and
  time(10k) / time(1k) <= 12;
* ``reduce(existing, new)`` of a valid history plus one message, no trigger firing, warm (see
  ``untriggered``): at most 3x a list copy;
* a fresh reducer on 10k messages it never saw, keep half and keep 40: at most 2x the floor, one
  Python pass reading each message's type and tool-call / result ids plus a list copy (see
  ``against_floor``);
* a reducer handed a list related to the one it reduced last (see ``reloaded``), keep half: that
  list plus one new turn at least as fast as ``trim_messages`` at 1k and 10k (>= 1); an equal
  deep copy of it (what a checkpoint read back is) at most 1.1x a fresh reducer on the same copy
  at 100, 1k and 10k, and at 10k at least as fast as ``trim_messages`` (>= 1, the aim). A fresh
  reducer on a fresh list, and token mode (heuristic) on the list plus one turn against
  ``trim_messages(token_counter=count_tokens_approximately)``, are reported at 10k.

The same count-mode ratios on OpenAI-format dicts (``convert_to_openai_messages`` of the same
conversation, each with an ``"id"``) follow for information.
"""

from __future__ import annotations

import copy
import gc
import statistics
import time
from collections.abc import Callable
from typing import Any

from agentstate_reducer import MessageReducer, ReducerConfig
from agentstate_reducer.tokens import heuristic_counter


def conversation(n: int) -> list[Any]:
    """A system prompt, then turns of human / AI tool call with two parallel results / AI answer."""
    from langchain_core.messages import SystemMessage

    msgs: list[Any] = [SystemMessage("You are a helpful agent.", id="sys")]
    t = 0
    while len(msgs) < n:
        msgs += turn(t)
        t += 1
    return msgs[:n]


def turn(t: int, prefix: str = "") -> list[Any]:
    """Turn ``t`` of ``conversation``: human / AI tool call / two results / AI answer; ids and
    call ids start with ``prefix``."""
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    p = prefix
    calls = [
        {"name": "search", "args": {"q": f"q{t}"}, "id": f"{p}c{t}a"},
        {"name": "calc", "args": {}, "id": f"{p}c{t}b"},
    ]
    return [
        HumanMessage(f"question {t} " * 8, id=f"{p}h{t}"),
        AIMessage("", tool_calls=calls, id=f"{p}a{t}"),
        ToolMessage(f"result {t}a " * 10, tool_call_id=f"{p}c{t}a", id=f"{p}t{t}a"),
        ToolMessage(f"result {t}b " * 10, tool_call_id=f"{p}c{t}b", id=f"{p}t{t}b"),
        AIMessage(f"answer {t} " * 12, id=f"{p}f{t}"),
    ]


def median_seconds(fn: Callable[[], Any], repeat: int) -> float:
    """Median seconds per call, each after a full collection, so garbage left by the previous
    call is not collected on this one's clock."""
    return statistics.median(seconds(fn) for _ in range(repeat))


def seconds(fn: Callable[[], Any]) -> float:
    """Seconds of one call, after a full collection."""
    gc.collect()
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def openai_dicts(msgs: list[Any]) -> list[dict[str, Any]]:
    """``msgs`` as OpenAI-format dicts, each with an ``"id"``."""
    from langchain_core.messages import convert_to_openai_messages

    return [{**m, "id": f"m{i}"} for i, m in enumerate(convert_to_openai_messages(msgs))]


# (window, n) -> target on trim_messages / reduce; windows without one are for information.
SPEED_TARGETS = {("keep half", 10_000): 1.0, ("keep 40", 10_000): 3.0}
SCALING_TARGET = 12.0


def run(quick: bool = False) -> list[dict[str, Any]]:
    """Two windows: a realistic one (keep 40 of 60, what a chat agent keeps) and half the history;
    on LangChain messages (judged), then on OpenAI-format dicts (information)."""
    from langchain_core.messages import trim_messages

    rows: list[dict[str, Any]] = []
    for shape, sizes in (("", (100, 1_000, 10_000)), ("OpenAI dicts, ", (1_000, 10_000))):
        for window in ("keep 40", "keep half"):
            per_size: dict[int, float] = {}
            for n in sizes:
                msgs: list[Any] = conversation(n)
                if shape:
                    msgs = openai_dicts(msgs)
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
                ratio = t_trim / t_reduce
                target = None if shape else SPEED_TARGETS.get((window, n))
                rows.append(
                    {
                        "benchmark": f"count mode, {shape}{window}, {n} msgs",
                        "metric": "trim_messages / reduce (x faster)",
                        "ratio": ratio,
                        "target": _target(">=", target, shape),
                        "met": None if target is None else ratio >= target,
                        "reduce_ms": round(t_reduce * 1e3, 3),
                        "trim_messages_ms": round(t_trim * 1e3, 3),
                        "list_copy_ms": round(t_copy * 1e3, 4),
                    }
                )
            scaling = per_size[10_000] / per_size[1_000]
            target = None if shape else SCALING_TARGET
            rows.append(
                {
                    "benchmark": f"count mode, {shape}{window}, scaling",
                    "metric": "reduce time(10k) / time(1k)",
                    "ratio": scaling,
                    "target": _target("<=", target, shape),
                    "met": None if target is None else scaling <= target,
                }
            )
    rows += untriggered(quick)
    rows += against_floor(quick)
    for n in (100, 1_000, 10_000):
        rows += reloaded(quick, n)
    return rows


def read_floor(msgs: list[Any]) -> list[Any]:
    """The floor of a correct reduction of a list never seen: one Python pass reading each
    message's type and its tool-call or result ids, then a list copy."""
    for m in msgs:
        if m.type == "ai":
            [c["id"] for c in m.tool_calls]
        elif m.type == "tool":
            m.tool_call_id  # noqa: B018
    return list(msgs)


def against_floor(quick: bool = False) -> list[dict[str, Any]]:
    """A fresh reducer on a list it never saw, against ``read_floor`` of that list (reduce /
    floor, at most 2 at 10k): ``trim_messages`` reads almost nothing (it slices), so on a list
    never seen a correct reducer's measure is what reading the messages costs."""
    rows: list[dict[str, Any]] = []
    for n in (1_000, 10_000):
        msgs = conversation(n)
        repeat = 3 if quick else (9 if n == 10_000 else 21)
        for window, keep in (("keep 40", 40), ("keep half", n // 2)):
            times: dict[str, list[float]] = {}
            for _ in range(repeat):  # interleaved: load on the machine shifts both alike
                times.setdefault("floor", []).append(seconds(lambda: read_floor(msgs)))  # noqa: B023
                fresh = MessageReducer(min_messages=keep, max_messages=keep + 20)
                times.setdefault("fresh", []).append(seconds(lambda: fresh.reduce(msgs)))  # noqa: B023
            t_floor, t_fresh = (statistics.median(times[k]) for k in ("floor", "fresh"))
            ratio = t_fresh / t_floor
            target = 2.0 if n == 10_000 else None
            rows.append(
                {
                    "benchmark": f"count mode, {window}, {n} msgs: fresh reducer vs the floor",
                    "metric": "reduce / floor (one read of each message and a list copy)",
                    "ratio": ratio,
                    "target": _target("<=", target, ""),
                    "met": None if target is None else ratio <= target,
                    "reduce_ms": round(t_fresh * 1e3, 3),
                    "floor_ms": round(t_floor * 1e3, 3),
                }
            )
    return rows


def _target(op: str, value: float | None, shape: str) -> str:
    """The target as the runner reads it (``">= 3"``); "information" on dicts, else empty."""
    if value is not None:
        return f"{op} {value:g}"
    return "information" if shape else ""


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
                "metric": "warm / list copy",
                "ratio": ratio,
                "target": "<= 3",
                "met": ratio <= 3,
                "warm_us": round(t_warm * 1e6, 1),
                "cold_ms": round(t_cold * 1e3, 2),
                "list_copy_us": round(t_copy * 1e6, 1),
            }
        )
    return rows


if __name__ == "__main__":
    for row in run():
        print(row)


def reloaded(quick: bool = False, n: int = 10_000) -> list[dict[str, Any]]:
    """``n`` LangChain messages, keep half: a reducer that has reduced ``seen`` is handed a list
    related to it, as an agent's next turn or a checkpoint read back hands it one. Before each
    timed call the reducer reduces ``seen`` again (untimed), so every call starts from the same
    memory; ``trim_messages`` and a fresh reducer are timed on the same list in the same repeat,
    the order of the reducers alternating.

    * grown: ``[*seen, *one new turn]`` (five new messages): at least as fast as ``trim_messages``
      at 1k and 10k;
    * equal deep copy: ``copy.deepcopy(seen)``, new objects equal to the old, a new copy each
      repeat (the reducer's memo holds the previous one, as a server's does): at most 1.1x a
      fresh reducer on the same copy, at every size; at 10k, against ``trim_messages`` (>= 1, the
      aim);
    * fresh: a new reducer on that copy (a list it never saw);
    * token mode (10k): a heuristic ``max_tokens`` reducer keeping about half the tokens, on the
      list grown by one turn, against ``trim_messages(token_counter=count_tokens_approximately)``.
    """
    from langchain_core.messages import trim_messages
    from langchain_core.messages.utils import count_tokens_approximately

    keep = n // 2
    repeat = 3 if quick else (9 if n == 10_000 else 21)
    seen = conversation(n)
    budget = sum(heuristic_counter(cache_size=0).count_messages(seen)) // 2

    def count_reducer() -> MessageReducer:
        return MessageReducer(min_messages=keep, max_messages=keep + 20)

    def token_reducer() -> MessageReducer:
        return MessageReducer(config=ReducerConfig(max_tokens=budget, token_counter=heuristic_counter()))

    def trim(msgs: list[Any], tokens: bool = False) -> Any:
        return trim_messages(
            msgs,
            max_tokens=budget if tokens else keep,
            token_counter=count_tokens_approximately if tokens else len,
            strategy="last",
            start_on="human",
            include_system=True,
        )

    warm, warm_tokens = count_reducer(), token_reducer()
    for r in (warm, warm, warm_tokens, warm_tokens):  # the heuristic caches in bulk on a second sight
        r.reduce(seen)
    times: dict[str, list[float]] = {}

    def timed(name: str, fn: Callable[[], Any]) -> None:
        times.setdefault(name, []).append(seconds(fn))

    for rep in range(repeat):
        grown = [*seen, *turn(rep, prefix="new")]
        warm.reduce(seen)
        timed("grown", lambda: warm.reduce(grown))  # noqa: B023
        timed("grown trim", lambda: trim(grown))  # noqa: B023
        if n == 10_000:
            warm_tokens.reduce(seen)
            timed("tokens", lambda: warm_tokens.reduce(grown))  # noqa: B023
            timed("tokens trim", lambda: trim(grown, tokens=True))  # noqa: B023
        copied = copy.deepcopy(seen)
        for name in ("copy", "fresh") if rep % 2 else ("fresh", "copy"):
            if name == "copy":
                warm.reduce(seen)
                timed("copy", lambda: warm.reduce(copied))  # noqa: B023
            else:
                timed("fresh", lambda: count_reducer().reduce(copied))  # noqa: B023
        timed("copy trim", lambda: trim(copied))  # noqa: B023
    med = {k: statistics.median(v) for k, v in times.items()}
    saw = f"count mode, keep half, {n} msgs, reducer that saw the list"
    trim_x = "trim_messages / reduce (x faster)"
    # (benchmark, metric, baseline, reduce, target): each ratio is baseline / reduce
    big = n == 10_000
    cases: list[tuple[str, str, str, str, str, float | None]] = [
        (f"{saw}: grown by one turn", trim_x, "grown trim", "grown", ">=", 1.0 if n >= 1_000 else None),
        (f"{saw}: equal deep copy", "this reducer / fresh reducer", "fresh", "copy", "<=", 1.1),
    ]
    if big:
        cases += [
            (f"{saw}: equal deep copy", trim_x, "copy trim", "copy", ">=", 1.0),
            (
                f"count mode, keep half, {n} msgs: fresh reducer, fresh list",
                trim_x,
                "copy trim",
                "fresh",
                "",
                None,
            ),
            (
                f"token mode, heuristic, keep half the tokens, {n} msgs: grown by one turn",
                "trim_messages(count_tokens_approximately) / reduce (x faster)",
                "tokens trim",
                "tokens",
                "",
                None,
            ),
        ]
    rows = []
    for benchmark, metric, base, measured, op, target in cases:
        # ">=": how many times faster than the baseline; "<=": this reducer's time over the baseline's
        ratio = med[measured] / med[base] if op == "<=" else med[base] / med[measured]
        met = None if target is None else (ratio <= target if op == "<=" else ratio >= target)
        rows.append(
            {
                "benchmark": benchmark,
                "metric": metric,
                "ratio": ratio,
                "target": _target(op or ">=", target, ""),
                "met": met,
                "reduce_ms": round(med[measured] * 1e3, 3),
                "baseline_ms": round(med[base] * 1e3, 3),
            }
        )
    return rows
