"""The token counter's cache holds no message and stays within its byte bound; one reducer is
shared safely by threads and asyncio tasks. Behaviour only: counts, collected messages, the
bound the cache reports (docs/tokens.md, "Cache")."""

from __future__ import annotations

import asyncio
import gc
import threading
import weakref
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from agentstate_reducer import MessageReducer, ReducerConfig
from agentstate_reducer.tokens import (
    DEFAULT_CACHE_BYTES,
    TokenCounter,
    heuristic_counter,
    heuristic_text_tokens,
)


def _thread(t: int, n: int = 60, dicts: bool = False) -> list[Any]:
    """A conversation of ``n`` messages, new objects and texts, ids of its own."""
    msgs: list[Any] = []
    for i in range(n):
        text = f"thread {t} message {i} " + "word " * (i % 40)
        if dicts:
            msgs.append({"role": "user" if i % 2 else "assistant", "content": text, "id": f"{t}:{i}"})
        else:
            msgs.append((HumanMessage if i % 2 else AIMessage)(text, id=f"{t}:{i}"))
    return msgs


@pytest.mark.parametrize("dicts", [False, True], ids=["langchain", "dicts"])
def test_a_dropped_message_is_collected_though_it_was_counted(dicts: bool) -> None:
    """The cache keeps a snapshot of what a count depends on, never the message: once the
    caller drops a message, it is collected (a LangChain message's weak reference dies), and
    a copy of it reloaded later is still recognised by its id."""
    calls: list[str] = []

    def measure(text: str) -> int:
        calls.append(text)
        return heuristic_text_tokens(text)

    counter = TokenCounter(measure, name="counted")
    reducer = MessageReducer(config=ReducerConfig(max_tokens=10_000, token_counter=counter))
    msgs = _thread(1, 20)
    if dicts:
        msgs = [{"role": "user", "content": m.content, "id": m.id} for m in msgs]
    expected = heuristic_counter(cache_size=0).count_messages(msgs)
    assert reducer.count_tokens(msgs) == expected
    probe = weakref.ref(msgs[5]) if not dicts else None
    reloaded = [dict(m) if dicts else m.model_copy() for m in msgs]
    del msgs
    gc.collect()
    if probe is not None:
        assert probe() is None
    calls.clear()
    assert reducer.count_tokens(reloaded) == expected
    assert calls == []  # found by message id, checked equal: nothing measured again


@pytest.mark.parametrize("dicts", [False, True], ids=["langchain", "dicts"])
def test_the_cache_stays_within_its_byte_bound_after_many_inserts(dicts: bool) -> None:
    bound = 200_000
    counter = heuristic_counter(cache_bytes=bound)
    exact = heuristic_counter(cache_size=0)
    for t in range(60):
        msgs = _thread(t, 50, dicts)
        for _ in range(3):  # the heuristic caches a message on its second sight
            assert counter.count_messages(msgs) == exact.count_messages(msgs)
            assert counter.cache_nbytes() <= bound
    assert 0 < counter.cache_len() < 60 * 50
    assert counter.cache_nbytes() > bound // 2  # full, not emptied


def test_a_message_larger_than_the_bound_is_counted_and_not_kept() -> None:
    counter = heuristic_counter(cache_bytes=50_000)
    huge = {"role": "tool", "content": "x" * 200_000, "tool_call_id": "c1", "id": "t1"}
    small = {"role": "user", "content": "hi", "id": "u1"}
    for _ in range(3):
        assert counter.count_messages([small, huge]) == heuristic_counter(cache_size=0).count_messages(
            [small, huge]
        )
        assert counter.cache_nbytes() <= 50_000


def test_an_image_counts_against_the_bound_by_its_size() -> None:
    """A base64 image costs a fixed number of tokens but its snapshot holds its payload: the
    cache weighs it by the payload's size."""
    payload = "A" * 300_000
    msg = {
        "role": "user",
        "id": "img",
        "content": [{"type": "image_url", "image_url": {"url": f"data:image/png;base64,{payload}"}}],
    }
    counter = heuristic_counter(cache_bytes=DEFAULT_CACHE_BYTES)
    counter.count_messages([msg])
    assert counter.cache_nbytes() >= len(payload)
    small = heuristic_counter(cache_bytes=100_000)
    small.count_messages([msg])
    assert small.cache_nbytes() <= 100_000


def test_cache_bytes_is_validated_and_zero_disables_the_cache() -> None:
    with pytest.raises(ValueError, match=r"cache_bytes must be an int >= 0 \(0 disables the cache\), got -1"):
        heuristic_counter(cache_bytes=-1)
    with pytest.raises(ValueError, match="cache_bytes must be an int >= 0"):
        heuristic_counter(cache_bytes=1.5)  # type: ignore[arg-type]
    counter = heuristic_counter(cache_bytes=0)
    msgs = _thread(0, 10, dicts=True)
    for _ in range(3):
        assert counter.count_messages(msgs) == heuristic_counter(cache_size=0).count_messages(msgs)
    assert counter.cache_len() == 0 and counter.cache_nbytes() == 0


def _history(n: int) -> list[Any]:
    msgs: list[Any] = [SystemMessage("You are terse.", id="sys")]
    for t in range(n):
        msgs.append(HumanMessage(f"question {t} " + "about trains " * (t % 7), id=f"h{t}"))
        call = {"name": "search", "args": {"q": f"q{t}"}, "id": f"c{t}"}
        msgs.append(AIMessage("", tool_calls=[call], id=f"a{t}"))
        msgs.append(ToolMessage(f"result {t} " + "data " * (t % 11), tool_call_id=f"c{t}", id=f"t{t}"))
        msgs.append(AIMessage(f"answer {t}", id=f"r{t}"))
    return msgs


def _ids(result: Any, history: list[Any]) -> list[str]:
    """The surviving ids, after checking that surviving and pruned hold each message once."""
    assert sorted(m.id for m in [*result.surviving, *result.pruned]) == sorted(m.id for m in history)
    return [m.id for m in result.surviving]


def _fresh(max_tokens: int, target_tokens: int) -> MessageReducer:
    return MessageReducer(
        config=ReducerConfig(
            max_tokens=max_tokens, target_tokens=target_tokens, token_counter=heuristic_counter()
        )
    )


def test_threads_sharing_one_reducer_get_what_a_fresh_reducer_returns() -> None:
    """Eight threads reduce overlapping and different histories through one token-mode reducer
    whose cache is small enough to evict all the time: every result equals a fresh reducer's."""
    histories = [_history(30 + 5 * k) for k in range(4)]
    config = ReducerConfig(
        max_tokens=400, target_tokens=300, token_counter=heuristic_counter(cache_bytes=40_000)
    )
    shared = MessageReducer(config=config)
    expected = [_ids(_fresh(400, 300).reduce(h), h) for h in histories]
    errors: list[BaseException] = []
    barrier = threading.Barrier(8)

    def work(w: int) -> None:
        try:
            barrier.wait()
            for r in range(25):
                k = (w + r) % len(histories)
                got = _ids(shared.reduce(histories[k]), histories[k])
                assert got == expected[k]
        except BaseException as exc:  # reported in the main thread
            errors.append(exc)

    workers = [threading.Thread(target=work, args=(w,)) for w in range(8)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert errors == []
    assert shared.token_counter.cache_nbytes() <= 40_000  # type: ignore[attr-defined]


def test_asyncio_tasks_sharing_one_reducer_get_what_a_fresh_reducer_returns() -> None:
    histories = [_history(20 + 3 * k) for k in range(5)]
    config = ReducerConfig(
        max_tokens=300, target_tokens=200, token_counter=heuristic_counter(cache_bytes=30_000)
    )
    shared = MessageReducer(config=config)
    expected = [_ids(_fresh(300, 200).reduce(h), h) for h in histories]

    async def task(w: int) -> list[bool]:
        out = []
        for r in range(10):
            k = (w * 3 + r) % len(histories)
            result = await shared.areduce(histories[k])
            out.append(_ids(result, histories[k]) == expected[k])
            await asyncio.sleep(0)
        return out

    async def main() -> list[list[bool]]:
        return await asyncio.gather(*(task(w) for w in range(6)))

    assert all(all(ok) for ok in asyncio.run(main()))


@pytest.mark.parametrize("dicts", [False, True], ids=["langchain", "dicts"])
def test_a_message_passed_twice_in_one_list_is_weighed_once(dicts: bool) -> None:
    msgs = _thread(3, 30, dicts)
    doubled = [m for m in msgs for _ in range(2)]
    # a measure of its own: cached the first time a message is counted
    once, twice = (TokenCounter(lambda text: len(text) // 3, name=name) for name in "ab")
    once.count_messages(msgs)
    assert twice.count_messages(doubled) == [n for n in once.count_messages(msgs) for _ in range(2)]
    assert twice.cache_len() == once.cache_len() == 30
    assert twice.cache_nbytes() == once.cache_nbytes()
