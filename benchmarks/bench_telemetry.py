"""What the OpenTelemetry spans cost a reduction when nobody records them.

With ``opentelemetry-api`` installed and no tracer or meter provider set (the API's proxies), a
pruning reduction looks the providers up and skips the span; the target is an overhead below 2%
against the same reduction with the API absent (``telemetry`` resolved to "not installed"), both
measured in this process in alternating batches, CPU time of this process (other processes on a
loaded machine count less), the ratio taken batch pair by batch pair and its median reported.
The reduction: 200 messages of a tool-using conversation, count mode, a fresh
``MessageReducer(min_messages=20, max_messages=40)`` each call (no memo), so every call prunes and
would emit a span.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from agentstate_reducer import MessageReducer, telemetry


def conversation(turns: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"role": "system", "content": "You help.", "id": "sys"}]
    for n in range(turns):
        call = {"id": f"c{n}", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        out += [
            {"role": "user", "content": f"question {n}", "id": f"u{n}"},
            {"role": "assistant", "content": None, "tool_calls": [call], "id": f"a{n}"},
            {"role": "tool", "tool_call_id": f"c{n}", "content": "result", "id": f"t{n}"},
            {"role": "assistant", "content": f"answer {n}", "id": f"f{n}"},
        ]
    return out


def _per_call(messages: list[Any], calls: int) -> float:
    start = time.process_time()
    for _ in range(calls):
        MessageReducer(min_messages=20, max_messages=40).reduce(messages)
    return (time.process_time() - start) / calls


def run(quick: bool = False) -> list[dict[str, Any]]:
    messages = conversation(50)
    calls, rounds = (10, 11) if quick else (20, 41)
    api = telemetry._otel()  # resolves the API once, as a first pruning reduction does
    if api is None or api.tracer() is not None:
        why = "opentelemetry-api is not installed" if api is None else "a tracer provider is set"
        return [{"benchmark": "otel, no provider", "metric": "skipped", "target": f"information: {why}"}]
    absent, proxied = [], []
    for _ in range(rounds):
        telemetry._resolved[:] = [None]  # as if the API were not installed
        absent.append(_per_call(messages, calls))
        telemetry._resolved[:] = [api]
        proxied.append(_per_call(messages, calls))
    base, with_api = statistics.median(absent), statistics.median(proxied)
    ratio = statistics.median(b / a for a, b in zip(absent, proxied, strict=True))
    return [{
        "benchmark": "otel API installed, no provider: pruning reduce of 200 messages",
        "metric": "time with the API / time without",
        "ratio": round(ratio, 4),
        "target": "<= 1.02",
        "met": ratio <= 1.02,
        "us_without": round(base * 1e6, 1),
        "us_with": round(with_api * 1e6, 1),
    }]


if __name__ == "__main__":
    for row in run():
        print(row)
