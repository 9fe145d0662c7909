"""The cost model (``agentstate_reducer.cost``) on hand-computed cases, through its public API."""

from __future__ import annotations

import copy
import threading
from typing import Any

import pytest

from agentstate_reducer import TokenCountError
from agentstate_reducer.cost import (
    EXAMPLE_PRICES,
    CacheTracker,
    Prices,
    estimate,
    openai_cached_tokens,
    shared_prefix,
)
from agentstate_reducer.tokens import heuristic_counter


def msg(name: str, tokens: int, role: str = "user") -> dict[str, Any]:
    """A message whose cost is ``tokens`` by ``by_n`` (the counter these cases use)."""
    return {"role": role, "content": name, "n": tokens}


def by_n(message: dict[str, Any]) -> int:
    return int(message["n"])


#: round prices, so each cost is easy to check by hand: USD per million tokens
FLAT = Prices(input=1.0, cache_read=0.1, cache_write=1.25)


@pytest.mark.parametrize(
    ("prefix", "cached"),
    [(0, 0), (1023, 0), (1024, 1024), (1151, 1024), (1152, 1152), (1279, 1152), (1280, 1280), (10_000, 9984)],
)
def test_openai_serves_1024_tokens_and_then_steps_of_128(prefix: int, cached: int) -> None:
    assert openai_cached_tokens(prefix) == cached


def test_openai_reads_the_prefix_shared_with_the_previous_call_rounded() -> None:
    a, b, c, d, x = msg("a", 1000), msg("b", 100), msg("c", 200), msg("d", 50), msg("x", 300)
    requests = [[a, b], [a, b, c], [a, b, c, d], [a, x]]
    report = estimate(requests, provider="openai", prices=FLAT, token_counter=by_n)
    per = report.per_request
    assert [r.input_tokens for r in per] == [1100, 1300, 1350, 1300]
    # shared: nothing; a+b = 1100 -> 1024; a+b+c = 1300 -> 1024 + 2*128; a = 1000 < 1024 -> 0
    assert [r.cache_read_tokens for r in per] == [0, 1024, 1280, 0]
    assert [r.shared_messages for r in per] == [0, 2, 3, 1]
    assert [r.cache_write_tokens for r in per] == [0, 0, 0, 0]  # OpenAI: no write premium
    expected = [1100e-6, (276 + 102.4) * 1e-6, (70 + 128) * 1e-6, 1300e-6]
    assert [r.cost for r in per] == pytest.approx(expected)
    assert report.input_tokens == 5050 and report.cache_read_tokens == 2304
    assert report.cost == pytest.approx(sum(expected))
    assert report.cache_share == pytest.approx(2304 / 5050)


def test_anthropic_reads_the_newest_entry_and_writes_the_rest() -> None:
    a, b, c, d, e, small = (msg("a", 1000), msg("b", 100), msg("c", 200), msg("d", 50), msg("e", 5),
                            msg("small", 10))
    requests = [
        [a, b],  # 1100 >= 1024: written whole
        [a, b, c],  # starts with the entry [a, b]: reads 1100, writes c
        [a, c, d],  # b was cut: the entry [a, b, c] is not its start: reads nothing, writes 1250
        [small],  # under the minimum: neither reads nor writes, and the entry stays [a, c, d]
        [a, c, d, e],  # starts with the entry [a, c, d]: reads 1250, writes e
    ]
    prices = Prices(input=3.0, cache_read=0.3, cache_write=3.75)
    report = estimate(requests, provider="anthropic", prices=prices, token_counter=by_n)
    per = report.per_request
    assert [(r.cache_read_tokens, r.cache_write_tokens, r.uncached_tokens) for r in per] == [
        (0, 1100, 0),
        (1100, 200, 0),
        (0, 1250, 0),
        (0, 0, 10),
        (1250, 5, 0),
    ]
    expected = [1100 * 3.75, 1100 * 0.3 + 200 * 3.75, 1250 * 3.75, 10 * 3.0, 1250 * 0.3 + 5 * 3.75]
    assert [r.cost for r in per] == pytest.approx([x / 1e6 for x in expected])
    assert (report.cache_read_tokens, report.cache_write_tokens) == (2350, 2555)


def test_anthropic_minimum_is_a_parameter() -> None:
    requests = [[msg("a", 1500)], [msg("a", 1500), msg("b", 10)]]
    default = estimate(requests, provider="anthropic", prices=FLAT, token_counter=by_n)
    higher = estimate(
        requests, provider="anthropic", prices=FLAT, token_counter=by_n, min_cacheable_tokens=2048
    )
    assert default.cache_read_tokens == 1500
    assert (higher.cache_read_tokens, higher.cache_write_tokens) == (0, 0)


def test_equal_copies_are_shared_and_the_input_is_not_mutated() -> None:
    first = [msg("a", 2000), msg("b", 10)]
    second = [*copy.deepcopy(first), msg("c", 10)]
    snapshot = copy.deepcopy([first, second])
    report = estimate([first, second], prices=FLAT, token_counter=by_n)
    assert shared_prefix(first, second) == 2
    assert report.per_request[1].cache_read_tokens == openai_cached_tokens(2010)
    assert [first, second] == snapshot


def test_defaults_are_the_example_prices_and_the_heuristic_counter() -> None:
    m = {"role": "user", "content": "hello there " * 50}
    for provider in ("openai", "anthropic"):
        report = estimate([[m]], provider=provider)
        assert report.prices == EXAMPLE_PRICES[provider]
        assert report.input_tokens == heuristic_counter()(m)
        assert report.prices.taken and report.prices.source and report.prices.model
    assert EXAMPLE_PRICES["anthropic"].cache_read == pytest.approx(0.1 * EXAMPLE_PRICES["anthropic"].input)
    assert EXAMPLE_PRICES["anthropic"].cache_write == pytest.approx(1.25 * EXAMPLE_PRICES["anthropic"].input)


def test_no_requests_cost_nothing() -> None:
    report = estimate([])
    assert (report.input_tokens, report.cost, report.per_request, report.cache_share) == (0, 0.0, (), 0.0)


@pytest.mark.parametrize(
    ("kwargs", "error", "text"),
    [
        ({"provider": "azure"}, ValueError, "provider must be one of ['openai', 'anthropic'], got 'azure'"),
        ({"prices": {"input": 1}},
         TypeError, "prices must be agentstate_reducer.cost.Prices or None, got dict"),
        ({"min_cacheable_tokens": -1}, ValueError, "min_cacheable_tokens (-1) must be >= 0"),
        ({"token_counter": 3}, TypeError, "token_counter must be a callable message -> int, got int"),
    ],
)
def test_bad_arguments_are_refused_early(kwargs: dict[str, Any], error: type[Exception], text: str) -> None:
    with pytest.raises(error) as info:
        estimate([[msg("a", 1)]], **kwargs)
    assert str(info.value) == text


NOT_A_LIST = "must be a list of messages (what one model call was sent), got"
NOT_REQUESTS = (
    "requests must be a sequence of requests, each the list of messages sent at one model call; got"
)


@pytest.mark.parametrize(
    ("requests", "text"),
    [
        ([[msg("a", 1)], (msg("b", 1),)], f"request 1 {NOT_A_LIST} tuple"),
        ([msg("a", 1)], f"request 0 {NOT_A_LIST} dict"),
        ("hello", f"{NOT_REQUESTS} str"),
        (None, f"{NOT_REQUESTS} NoneType"),
    ],
)
def test_a_request_that_is_not_a_list_is_refused(requests: Any, text: str) -> None:
    with pytest.raises(TypeError) as info:
        estimate(requests, token_counter=by_n)
    assert str(info.value) == text


@pytest.mark.parametrize(
    ("field", "value", "error", "text"),
    [
        ("input", -1, ValueError, "Prices.input (-1) must be a finite number >= 0 (USD per million tokens)"),
        ("cache_read", float("nan"), ValueError, "Prices.cache_read (nan) must be a finite number >= 0"),
        ("cache_write", "2", TypeError, "Prices.cache_write must be a number of USD per million tokens"),
        ("input", True, TypeError, "Prices.input must be a number of USD per million tokens, got True"),
    ],
)
def test_prices_are_checked(field: str, value: Any, error: type[Exception], text: str) -> None:
    fields: dict[str, Any] = {"input": 1, "cache_read": 0.1, "cache_write": 1.25, field: value}
    with pytest.raises(error) as info:
        Prices(**fields)
    assert str(info.value).startswith(text)


def test_a_counter_that_returns_a_bad_count_names_the_message() -> None:
    with pytest.raises(TokenCountError, match="message 1"):
        estimate([[msg("a", 1), msg("b", -1)]], token_counter=by_n)


def test_tracker_gives_the_shared_prefix_per_conversation() -> None:
    tracker = CacheTracker(max_conversations=2)
    a, b, c = msg("a", 10), msg("b", 20), msg("c", 5)
    assert tracker.observe("t1", [a, b], [10, 20]) == 0
    assert tracker.observe("t2", [a], [10]) == 0
    assert tracker.observe("t1", [a, b, c], [10, 20, 5]) == 30
    assert tracker.observe("t1", [a, c], [10, 5]) == 10
    assert tracker.observe("t3", [a], [10]) == 0  # t2 is the least recently observed: it goes
    assert tracker.observe("t2", [a, b], [10, 20]) == 0
    assert len(tracker) == 2
    with pytest.raises(ValueError, match="counts has 1 values for 2 messages"):
        tracker.observe("t1", [a, b], [10])
    with pytest.raises(ValueError, match="max_conversations must be an int >= 1, got 0"):
        CacheTracker(0)


def test_tracker_shared_by_threads_keeps_each_conversation_apart() -> None:
    tracker = CacheTracker()
    results: dict[int, list[int]] = {}

    def conversation(n: int) -> None:
        history: list[dict[str, Any]] = []
        out = []
        for turn in range(50):
            history = [*history, msg(f"{n}-{turn}", 1)]
            out.append(tracker.observe(n, history, [1] * len(history)))
        results[n] = out

    threads = [threading.Thread(target=conversation, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(results[n] == list(range(50)) for n in range(8))
