"""Agent frameworks' own history handling against ours, on the same scripted conversation.

Per framework (``benchmarks/frameworks/<name>.py``), the framework's real agent loop with a
scripted model: ``TURNS`` turns (``QUICK_TURNS`` with ``--quick``), each a question, a tool call,
two parallel tool calls, then an answer; one row per policy: no handling, each built-in handling,
and ours (the integration with ``max_messages=40, min_messages=20`` and a summarizer). Figures,
from what the model received at every call (``benchmarks/frameworks/_score.py``): invalid
requests (OpenAI's or Anthropic's rules), conversation messages and tokens per request (mean,
max), the share of requests that extend the previous one (prompt-cache prefix), summarizer calls.

``--hooks``: the CPU of our hook per model call (``CallFlow.bound``/``abound``, every integration
but the LangChain middleware) beside the CPU of one ``reduce`` of the same messages (the history
the hook was handed, reduced by a twin reducer with the same config that gets every call's
history, a constant summarizer in place of the real one, every other call before the hook and
else after it), with the target hook <= 1.5x reduce; and the CPU of each policy's whole agent
run per model call (the framework's own trimming among them).
CPU is ``time.process_time``; per call the median of a run, then the median over ``--runs`` runs.

``--memory``: what a request-mode flow holds after serving many conversations whose callers then
dropped them (``tracemalloc``, after ``gc.collect``): ``THREADS`` conversations of ``MESSAGES``
messages (a question, a tool call, its result, an answer, repeated), each bounded at two model
calls (at 60% of its messages and at all of them), with ``max_messages=40, min_messages=20`` and
a summarizer, in each framework's message class (OpenAI dicts, google-genai ``Content`` as ADK
sends copies, LlamaIndex ``ChatMessage``, Agno ``Message``); target <= 24 MB and no growth from
1,000 to 10,000 conversations (``--quick``: 100 and 1,000).

CrewAI cannot share an environment with google-adk 2.x: when ``crewai`` is not importable here,
its module runs in the interpreter named by ``AGENTSTATE_CREWAI_PYTHON`` (default
``.venv-crewai/bin/python``, the environment ``scripts/test.sh`` makes).
``python -m benchmarks.bench_frameworks [--quick] [--markdown]``.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the tests package, also when run as a file

#: framework module -> the package it needs
FRAMEWORKS: dict[str, str] = {
    "crewai": "crewai",
    "pydantic_ai": "pydantic_ai",
    "google_adk": "google.adk",
    "autogen": "autogen_agentchat",
    "agent_framework": "agent_framework",
    "smolagents": "smolagents",
    "agno": "agno",
    "llama_index": "llama_index.core",
}


def _installed(package: str) -> bool:
    try:
        return importlib.util.find_spec(package) is not None
    except ModuleNotFoundError:  # a dotted name whose parent is missing
        return False


def _elsewhere(name: str, quick: bool) -> list[dict[str, Any]]:
    default = ROOT / f".venv-{name}" / "bin" / "python"
    python = os.environ.get(f"AGENTSTATE_{name.upper()}_PYTHON", str(default))
    if not Path(python).exists():
        raise RuntimeError(
            f"{name} is not installed here and {python} does not exist: run scripts/test.sh once, or set "
            f"AGENTSTATE_{name.upper()}_PYTHON to an interpreter that has it"
        )
    args = [python, "-m", f"benchmarks.frameworks.{name}", *(["--quick"] if quick else [])]
    out = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=1800)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed:\n{out.stderr[-2000:]}")
    rows: list[dict[str, Any]] = json.loads(out.stdout.strip().splitlines()[-1])
    return rows


def measure(quick: bool = False, only: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = []
    for name, package in FRAMEWORKS.items():
        if only and name not in only:
            continue
        if _installed(package):
            module = importlib.import_module(f"benchmarks.frameworks.{name}")
            results += module.measure(quick)
        else:
            results += _elsewhere(name, quick)
    return results


#: the hook's CPU per call may be at most this many times one reduce of the same messages
HOOK_TARGET = 1.5


@dataclasses.dataclass
class _HookTimes:
    """CPU seconds of each hook call and of one twin reduce of the same messages."""

    hook: list[float] = dataclasses.field(default_factory=list)
    reduce: list[float] = dataclasses.field(default_factory=list)


def _constant_summary(messages: list[Any]) -> str:
    return "summary of the earlier messages"


@contextlib.contextmanager
def _timing_hooks() -> Iterator[_HookTimes]:
    """Time every ``CallFlow.bound``/``abound`` while the block runs, and a twin reducer (the
    flow reducer's config, constant summarizer, no hooks) reducing the history the hook was
    handed, as the core reads it (native summaries as the core's), every other call before the
    hook and else after it: the cost of bounding that list with the core directly, in request
    mode too, where the flow's own reducer gets only what the running summary does not cover.
    The twin of a flow lives as long as the block and gets every call's history, so it is warm
    the same way."""
    from agentstate_reducer.integrations import _common
    from agentstate_reducer.reducer import MessageReducer

    times = _HookTimes()
    twins: dict[int, tuple[Any, MessageReducer]] = {}
    flow_cls = _common.CallFlow
    bound, abound = flow_cls.bound, flow_cls.abound

    def twin_of(flow: Any) -> MessageReducer:
        entry = twins.get(id(flow))
        if entry is None or entry[0] is not flow:
            config = flow.reducer.config
            has = config.summarize_fn is not None or config.asummarize_fn is not None
            fields = {
                "summarize_fn": _constant_summary if has else None,
                "asummarize_fn": None,
                "on_prune": (),
            }
            entry = twins[id(flow)] = (flow, MessageReducer(config=dataclasses.replace(config, **fields)))
        return entry[1]

    def twin_reduce(flow: Any, history: list[Any]) -> None:
        messages = flow.native.inward(history) if flow.native is not None else history
        twin = twin_of(flow)
        start = time.process_time()
        twin.reduce(messages)
        times.reduce.append(time.process_time() - start)

    # whichever of the two runs second finds the messages in the CPU's caches (measured: about
    # 0.07 ms of 0.2 on AutoGen's), so every other call the twin goes first
    def timed(self: Any, key: Any, history: Any, **kw: Any) -> Any:
        items, twin_first = list(history), len(times.hook) % 2 == 1
        if twin_first:
            twin_reduce(self, items)
        start = time.process_time()
        out = bound(self, key, history, **kw)
        times.hook.append(time.process_time() - start)
        if not twin_first:
            twin_reduce(self, items)
        return out

    async def atimed(self: Any, key: Any, history: Any, **kw: Any) -> Any:
        items, twin_first = list(history), len(times.hook) % 2 == 1
        if twin_first:
            twin_reduce(self, items)
        start = time.process_time()
        out = await abound(self, key, history, **kw)
        times.hook.append(time.process_time() - start)
        if not twin_first:
            twin_reduce(self, items)
        return out

    flow_cls.bound, flow_cls.abound = timed, atimed  # type: ignore[method-assign]
    try:
        yield times
    finally:
        flow_cls.bound, flow_cls.abound = bound, abound  # type: ignore[method-assign]


def hooks(quick: bool = False, only: tuple[str, ...] = (), runs: int = 3) -> list[dict[str, Any]]:
    """Per framework installed here: our hook's CPU per call beside one reduce of the same
    messages, and each policy's whole run per model call (median of ``runs`` runs)."""
    rows = []
    for name, package in FRAMEWORKS.items():
        if (only and name not in only) or not _installed(package):
            continue
        module = importlib.import_module(f"benchmarks.frameworks.{name}")
        hook_ms: list[float] = []
        reduce_ms: list[float] = []
        runs_ms: dict[str, list[float]] = {}
        for _ in range(runs):
            with _timing_hooks() as times, _timing_runs() as policies:
                module.measure(quick)
            hook_ms.append(1000 * statistics.median(times.hook))
            reduce_ms.append(1000 * statistics.median(times.reduce))
            for policy, ms in policies.items():
                runs_ms.setdefault(policy, []).append(ms)
        hook, once = statistics.median(hook_ms), statistics.median(reduce_ms)
        ratio = hook / once if once else float("inf")
        rows.append(
            {
                "benchmark": f"{name}/hook",
                "metric": "hook CPU / one reduce of the same messages",
                "ratio": round(ratio, 2),
                "target": f"<= {HOOK_TARGET}",
                "met": ratio <= HOOK_TARGET,
                "hook_ms_per_call": round(hook, 3),
                "reduce_ms_per_call": round(once, 3),
                "calls_per_run": len(times.hook),
                "run_ms_per_model_call": {p: round(statistics.median(v), 3) for p, v in runs_ms.items()},
            }
        )
    return rows


@contextlib.contextmanager
def _timing_runs() -> Iterator[dict[str, float]]:
    """CPU per model call of each policy's run: the time from the previous row (or the start)
    to its ``score`` call, over its ``calls``; the scoring of a row is not counted."""
    from benchmarks.frameworks import _score

    per_call: dict[str, float] = {}
    score = _score.score
    mark = [time.process_time()]

    def timed_score(framework: str, policy: str, requests: Any, **kw: Any) -> dict[str, Any]:
        spent = time.process_time() - mark[0]
        row = score(framework, policy, requests, **kw)
        per_call[policy] = 1000 * spent / max(1, len(requests))
        mark[0] = time.process_time()
        return row

    modules = [m for n, m in sys.modules.items() if n.startswith("benchmarks.frameworks.")]
    patched = [m for m in modules if getattr(m, "score", None) is score]
    for m in patched:
        m.score = timed_score  # type: ignore[attr-defined]
    try:
        yield per_call
    finally:
        for m in patched:
            m.score = score  # type: ignore[attr-defined]


#: the request-mode memory benchmark: conversations and messages per conversation
THREADS = (1_000, 10_000)
QUICK_THREADS = (100, 1_000)
MESSAGES = 200
MEMORY_TARGET_MB = 24.0


def _dict_history(thread: int, n: int) -> list[Any]:
    out: list[Any] = []
    for i in range(0, n, 4):
        call = f"call-{thread}-{i}"
        out += [
            {"role": "user", "content": f"thread {thread} question {i}: what is item {i}?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": call,
                        "type": "function",
                        "function": {"name": "lookup", "arguments": f'{{"item": {i}}}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": call, "content": f"item {i} of thread {thread} is {i * 7}"},
            {"role": "assistant", "content": f"Item {i} is {i * 7}, thread {thread}."},
        ]
    return out[:n]


def _message_kinds() -> dict[str, tuple[Any, Any]]:
    """Framework -> (make a history, the integration's NativeSummaries or None), for those installed."""
    from agentstate_reducer.integrations._common import NativeSummaries

    kinds: dict[str, tuple[Any, Any]] = {"openai-dicts": (_dict_history, None)}
    if _installed("google.genai") and _installed("google.adk"):
        from google.genai import types

        from agentstate_reducer.integrations.google_adk import _text_of, summary_content

        def contents(thread: int, n: int) -> list[Any]:
            out = []
            for m in _dict_history(thread, n):
                if m["role"] == "user":
                    out.append(types.Content(role="user", parts=[types.Part(text=m["content"])]))
                elif m["role"] == "tool":
                    response = types.FunctionResponse(name="lookup", response={"result": m["content"]})
                    out.append(types.Content(role="user", parts=[types.Part(function_response=response)]))
                elif m.get("tool_calls"):
                    fn = m["tool_calls"][0]["function"]
                    call = types.FunctionCall(name=fn["name"], args=json.loads(fn["arguments"]))
                    out.append(types.Content(role="model", parts=[types.Part(function_call=call)]))
                else:
                    out.append(types.Content(role="model", parts=[types.Part(text=m["content"])]))
            return out

        kinds["google-adk"] = (contents, NativeSummaries(summary_content, _text_of))
    if _installed("llama_index.core"):
        from llama_index.core.llms import ChatMessage

        from agentstate_reducer.integrations.llama_index import _summary_message, _summary_text

        def chat(thread: int, n: int) -> list[Any]:
            out = []
            for m in _dict_history(thread, n):
                kwargs = {"tool_calls": m["tool_calls"]} if m.get("tool_calls") else {}
                if m["role"] == "tool":
                    kwargs = {"tool_call_id": m["tool_call_id"]}
                out.append(ChatMessage(role=m["role"], content=m["content"], additional_kwargs=kwargs))
            return out

        kinds["llama-index"] = (chat, NativeSummaries(_summary_message, _summary_text))
    if _installed("agno"):
        from agno.models.message import Message

        from agentstate_reducer.integrations.agno import _text_of as agno_text_of
        from agentstate_reducer.integrations.agno import summary_message

        def agno_history(thread: int, n: int) -> list[Any]:
            return [Message(**m) for m in _dict_history(thread, n)]

        kinds["agno"] = (agno_history, NativeSummaries(summary_message, agno_text_of))
    return kinds


def _held_mb(name: str, make: Any, native: Any, threads: int) -> float:
    """MB a request-mode flow holds after ``threads`` conversations, each dropped by its caller."""
    import gc
    import logging
    import tracemalloc

    from agentstate_reducer import MessageReducer, ReducerConfig
    from agentstate_reducer.integrations._common import CallFlow

    def summarize(messages: list[Any]) -> str:
        return f"The user asked about {len(messages)} items; each was looked up and answered."

    reducer = MessageReducer(config=ReducerConfig(max_messages=40, min_messages=20, summarize_fn=summarize))
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        flow = CallFlow(reducer, mode="request", native=native, logger=logging.getLogger("bench"))
        for t in range(threads):
            history = make(t, MESSAGES)
            flow.bound(t, history[: MESSAGES * 3 // 5], thread=str(t))
            if name == "google-adk":  # ADK sends equal copies of its stored contents at every call
                history = make(t, MESSAGES)
            flow.bound(t, history, thread=str(t))
            del history
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    del flow
    return held / 1e6


def memory(quick: bool = False) -> list[dict[str, Any]]:
    """Per message class: MB held after the fewer and after the more conversations."""
    few, many = QUICK_THREADS if quick else THREADS
    rows = []
    for name, (make, native) in _message_kinds().items():
        held_few, held_many = _held_mb(name, make, native, few), _held_mb(name, make, native, many)
        rows.append(
            {
                "benchmark": f"{name}/request-memory",
                "metric": f"MB held after {many:,} conversations of {MESSAGES} messages",
                "ratio": round(held_many, 1),
                "target": f"<= {MEMORY_TARGET_MB}",
                "met": held_many <= MEMORY_TARGET_MB and held_many <= held_few * 1.1 + 1,
                f"mb_after_{few}": round(held_few, 1),
                f"mb_after_{many}": round(held_many, 1),
            }
        )
    return rows


def run(quick: bool = False) -> list[dict[str, Any]]:
    """Rows for ``python -m benchmarks``: invalid requests (target 0 for ours), the rest as details."""
    rows = []
    for r in measure(quick):
        rows.append(
            {
                "benchmark": f"{r['framework']}/{r['policy']}",
                "metric": "invalid requests",
                "ratio": r["invalid"],
                "target": "0" if r["ours"] else "",
                "met": r["invalid"] == 0 if r["ours"] else None,
                **{k: v for k, v in r.items() if k not in ("framework", "policy", "ours", "invalid")},
            }
        )
    return rows


def markdown(results: list[dict[str, Any]]) -> str:
    head = (
        "| framework | policy | calls | invalid | msgs mean / max | tokens mean / max | prefix share "
        "| summarizer calls | lost turns |\n|---|---|---|---|---|---|---|---|---|"
    )
    lines = [
        f"| {r['framework']} | {r['policy']} | {r['calls']} | {r['invalid']} "
        f"| {r['msgs_mean']} / {r['msgs_max']} "
        f"| {r['tokens_mean']} / {r['tokens_max']} | {r['prefix_share']} | {r['summarizer_calls']} "
        f"| {r['lost_turns']} |"
        for r in results
    ]
    return "\n".join([head, *lines])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--only", action="append", default=[], choices=sorted(FRAMEWORKS))
    parser.add_argument("--hooks", action="store_true", help="the hooks' CPU per call (see the module)")
    parser.add_argument("--runs", type=int, default=3, help="--hooks: runs per framework (median)")
    parser.add_argument("--memory", action="store_true", help="request mode's memory (see the module)")
    args = parser.parse_args(argv)
    if args.memory:
        for row in memory(args.quick):
            print(json.dumps(row))
        return 0
    if args.hooks:
        for row in hooks(args.quick, tuple(args.only), args.runs):
            print(json.dumps(row))
        return 0
    results = measure(args.quick, tuple(args.only))
    if args.markdown:
        print(markdown(results))
    else:
        for r in results:
            print(json.dumps(r))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
