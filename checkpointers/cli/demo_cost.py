"""What the demo's model calls cost under three policies, by ``agentstate_reducer.cost``.

* ``none``: no reduction: every call is sent the whole history (the bare run's calls);
* ``window``: a sliding window cut at every call, as ``trim_messages(strategy="last",
  start_on="human")`` does: the newest messages within the reducer's bound (``max_messages``, or
  ``max_tokens`` in token mode), starting at a human message, from the bare run's calls;
* ``ours``: the calls of the run through ``ReducingCheckpointSaver``.

Each is priced for both providers at ``EXAMPLE_PRICES`` (docs/cost.md says how to read them).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from agentstate_reducer import MessageReducer, read_message
from agentstate_reducer.cost import EXAMPLE_PRICES, PROVIDERS, CostReport, Provider, estimate

POLICIES = ("none", "window", "ours")


def sliding_window(
    messages: Sequence[Any], bound: int, cost: Callable[[Any], int] | None = None
) -> list[Any]:
    """The newest messages worth at most ``bound`` (messages, or tokens by ``cost``), cut to start
    at a human message, after a leading system message: what ``trim_messages(strategy="last",
    start_on="human", include_system=True)`` keeps. Reads only the messages it keeps."""
    system = list(messages[:1]) if messages and read_message(messages[0]).kind == "system" else []
    total, start = len(system) if cost is None else sum(map(cost, system)), len(messages)
    while start > len(system):
        total += 1 if cost is None else cost(messages[start - 1])
        if total > bound:
            break
        start -= 1
    kept = messages[start:]
    first = next((i for i, m in enumerate(kept) if read_message(m).kind == "human"), len(kept))
    return [*system, *kept[first:]]


@dataclass(frozen=True)
class PolicyCost:
    """One policy's model calls, priced for each provider."""

    name: str
    description: str
    calls: int
    input_tokens: int
    #: the policy's stored bytes (a window cuts what is sent, not what is stored)
    stored_bytes: int | None
    reports: dict[Provider, CostReport]

    def as_json(self) -> dict[str, Any]:
        return {
            "description": self.description,
            "calls": self.calls,
            "input_tokens": self.input_tokens,
            "stored_bytes": self.stored_bytes,
            **{
                provider: {
                    "cache_read_tokens": r.cache_read_tokens,
                    "cache_write_tokens": r.cache_write_tokens,
                    "cache_share": round(r.cache_share, 4),
                    "cost_usd": round(r.cost, 6),
                }
                for provider, r in self.reports.items()
            },
        }


def policy_costs(
    bare_calls: list[list[Any]],
    reduced_calls: list[list[Any]],
    reducer: MessageReducer,
    counter: Callable[[Any], int],
    *,
    bare_bytes: int | None,
    reduced_bytes: int | None,
) -> list[PolicyCost]:
    """The three policies (module docstring), counted with ``counter``. Each message object is
    counted once (the demo's messages are never edited, and the lists hold them alive)."""
    counts: dict[int, int] = {}

    def once(message: Any) -> int:
        n = counts.get(id(message))
        if n is None:
            n = counts[id(message)] = counter(message)
        return n

    c = reducer.config
    if c.max_tokens is not None:
        bound, cost, unit = c.max_tokens, once, "tokens"
    else:
        bound = c.max_messages if c.max_messages is not None else c.min_messages
        cost, unit = None, "messages"
    window = [sliding_window(call, bound, cost) for call in bare_calls]
    runs = [
        ("none", "no reduction: the whole history at every call", bare_calls, bare_bytes),
        ("window", f"sliding window: the newest {bound} {unit} at every call (trim_messages-style)", window,
         bare_bytes),
        ("ours", f"{reducer!r} behind the saver", reduced_calls, reduced_bytes),
    ]
    out = []
    for name, description, calls, stored in runs:
        reports = {p: estimate(calls, provider=p, token_counter=once) for p in PROVIDERS}
        tokens = reports["openai"].input_tokens
        out.append(PolicyCost(name, description, len(calls), tokens, stored, reports))
    return out


def prices_json() -> dict[str, Any]:
    return {
        provider: {
            "model": p.model,
            "input": p.input,
            "cache_read": p.cache_read,
            "cache_write": p.cache_write,
            "taken": p.taken,
            "source": p.source,
        }
        for provider, p in EXAMPLE_PRICES.items()
    }
