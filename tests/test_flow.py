"""The generator-flow drivers (``checkpointers._flow``): sync and async alike, each test runs both."""

from __future__ import annotations

import asyncio
import doctest
from collections.abc import Iterator
from typing import Any

import pytest

from checkpointers import _flow
from checkpointers._flow import Emit, Flow, adrive, aiterate, drive, iterate, recovering


class Boom(Exception):
    """What the fake I/O raises for the operation ``"boom"``."""


class Recorder:
    """A saver's I/O callable: records each operation, answers with a result or raises ``Boom``."""

    def __init__(self, fail_on: str = "boom") -> None:
        self.performed: list[str] = []
        self.fail_on = fail_on

    def __call__(self, op: str) -> str:
        self.performed.append(op)
        if op == self.fail_on:
            raise Boom(op)
        return op.upper()

    async def aperform(self, op: str) -> str:
        await asyncio.sleep(0)  # a real suspension: the async driver must await
        return self(op)


def run(flow: Flow[str, str, Any], recorder: Recorder, mode: str) -> Any:
    if mode == "sync":
        return drive(flow, recorder)
    return asyncio.run(adrive(flow, recorder.aperform))


def run_listing(flow: Flow[str | Emit[str], str | None, Any], recorder: Recorder, mode: str) -> list[str]:
    if mode == "sync":
        return list(iterate(flow, recorder))

    async def collect() -> list[str]:
        return [value async for value in aiterate(flow, recorder.aperform)]

    return asyncio.run(collect())


MODES = pytest.mark.parametrize("mode", ["sync", "async"])


def recording(op: str, seen: list[BaseException]) -> Flow[str, str, None]:
    """Yields ``op``; records whatever is thrown in there (even a ``GeneratorExit``) and re-raises it."""
    try:
        yield op
    except BaseException as exc:
        seen.append(exc)
        raise


@MODES
def test_each_op_is_performed_once_in_order_and_its_result_sent_back(mode: str) -> None:
    got: list[str] = []

    def flow() -> Flow[str, str, tuple[str, ...]]:
        got.append((yield "a"))
        got.append((yield "b"))
        got.append((yield "a"))
        return tuple(got)

    recorder = Recorder()
    assert run(flow(), recorder, mode) == ("A", "B", "A")
    assert recorder.performed == ["a", "b", "a"]


@MODES
def test_a_flow_without_ops_returns_at_once(mode: str) -> None:
    def flow() -> Flow[str, str, int]:
        return 7
        yield "never"  # makes this a generator

    recorder = Recorder()
    assert run(flow(), recorder, mode) == 7
    assert recorder.performed == []


@MODES
def test_an_error_is_thrown_into_the_flow_which_may_handle_it_and_go_on(mode: str) -> None:
    """What the flow raises after handling a thrown-in error is not chained to that error: the
    driver throws it in outside its own except block."""
    seen: list[Any] = []

    def flow() -> Flow[str, str, None]:
        try:
            yield "boom"
        except Boom as exc:
            seen.append(exc)
        after = yield "after"  # went on after handling the error
        try:
            yield "boom"
        except Boom as exc:
            seen.append(exc)
        raise ValueError(after)  # right after handling the second one

    recorder = Recorder()
    with pytest.raises(ValueError, match="AFTER") as info:
        run(flow(), recorder, mode)
    assert recorder.performed == ["boom", "after", "boom"]
    assert len(seen) == 2 and all(isinstance(e, Boom) and e.args == ("boom",) for e in seen)
    assert info.value.__context__ is None


@MODES
def test_an_error_the_flow_does_not_handle_reaches_the_caller_and_ends_the_flow(mode: str) -> None:
    cleaned: list[str] = []

    def flow() -> Flow[str, str, None]:
        try:
            yield "a"
            yield "boom"
            yield "unreachable"
        finally:
            cleaned.append("finally")

    recorder = Recorder()
    with pytest.raises(Boom) as info:
        run(flow(), recorder, mode)
    assert recorder.performed == ["a", "boom"]
    assert cleaned == ["finally"]  # the flow ran its finally where the error was thrown in
    assert info.value.__context__ is None and info.value.__cause__ is None


@MODES
def test_an_error_raised_by_the_flow_itself_reaches_the_caller(mode: str) -> None:
    def flow() -> Flow[str, str, None]:
        result = yield "a"
        raise ValueError(f"bad {result}")

    with pytest.raises(ValueError, match="bad A"):
        run(flow(), Recorder(), mode)


@MODES
def test_a_flow_may_translate_an_error_into_its_own(mode: str) -> None:
    def flow() -> Flow[str, str, None]:
        try:
            yield "boom"
        except Boom as exc:
            raise LookupError("explained") from exc

    with pytest.raises(LookupError, match="explained") as info:
        run(flow(), Recorder(), mode)
    assert isinstance(info.value.__cause__, Boom)


@MODES
def test_iterate_hands_out_emits_lazily_and_sends_none_for_them(mode: str) -> None:
    sent: list[Any] = []

    def flow() -> Flow[str | Emit[str], str | None, None]:
        for op in ("a", "b", "boom", "c"):
            try:
                value = yield op
            except Boom:
                continue
            sent.append((yield Emit(f"{value}!")))

    recorder = Recorder()
    assert run_listing(flow(), recorder, mode) == ["A!", "B!", "C!"]
    assert recorder.performed == ["a", "b", "boom", "c"]
    assert sent == [None, None, None]


def test_iterate_is_lazy_a_caller_that_stops_stops_the_io() -> None:
    def flow() -> Flow[str | Emit[str], str | None, None]:
        for op in ("a", "b", "c"):
            yield Emit((yield op) or "")

    recorder = Recorder()
    values = iterate(flow(), recorder)
    assert next(values) == "A" and recorder.performed == ["a"]
    assert next(values) == "B" and recorder.performed == ["a", "b"]
    values.close()
    assert recorder.performed == ["a", "b"]


def test_aiterate_is_lazy_a_caller_that_stops_stops_the_io() -> None:
    def flow() -> Flow[str | Emit[str], str | None, None]:
        for op in ("a", "b", "c"):
            yield Emit((yield op) or "")

    recorder = Recorder()

    async def take_one() -> str:
        values = aiterate(flow(), recorder.aperform)
        return await values.__anext__()

    assert asyncio.run(take_one()) == "A"
    assert recorder.performed == ["a"]


@MODES
def test_iterate_lets_an_unhandled_error_through(mode: str) -> None:
    def flow() -> Flow[str | Emit[str], str | None, None]:
        yield Emit("first")
        yield "boom"

    with pytest.raises(Boom):
        run_listing(flow(), Recorder(), mode)


@MODES
def test_drive_rejects_a_flow_that_emits(mode: str) -> None:
    def flow() -> Iterator[Any]:
        yield "a"
        yield Emit("value")
        yield "b"

    recorder = Recorder()
    with pytest.raises(TypeError, match=r"the flow emitted 'value': drive a listing flow with iterate"):
        run(flow(), recorder, mode)  # type: ignore[arg-type]
    assert recorder.performed == ["a"]


@MODES
def test_a_nested_flow_runs_inside_its_parent(mode: str) -> None:
    def child(op: str) -> Flow[str, str, str]:
        return (yield op) + "?"

    def parent() -> Flow[str, str, list[str]]:
        out = [(yield from child("a"))]
        try:
            out.append((yield from child("boom")))
        except Boom:
            out.append("caught in parent")
        return out

    assert run(parent(), Recorder(), mode) == ["A?", "caught in parent"]


def test_only_exceptions_are_thrown_in_base_exceptions_are_not() -> None:
    """KeyboardInterrupt and the like stop the driver at once; the flow is not asked to handle them."""
    handled: list[BaseException] = []

    def interrupt(op: str) -> str:
        raise KeyboardInterrupt

    gen = recording("a", handled)
    with pytest.raises(KeyboardInterrupt):
        drive(gen, interrupt)
    assert handled == []
    gen.close()
    assert len(handled) == 1 and isinstance(handled[0], GeneratorExit)


def explain(error: Boom) -> Flow[str, Any, str]:
    """A recovery flow: one more operation, whose result answers the failed one."""
    return "recovered " + (yield f"explain-{error.args[0]}")


@MODES
def test_recovering_answers_a_failed_op_with_the_recovery_flow(mode: str) -> None:
    def flow() -> Flow[str, str, list[str]]:
        return [(yield "a"), (yield "boom"), (yield "c")]

    recorder = Recorder()
    assert run(recovering(flow(), Boom, explain), recorder, mode) == ["A", "recovered EXPLAIN-BOOM", "C"]
    assert recorder.performed == ["a", "boom", "explain-boom", "c"]


@MODES
def test_recovering_throws_what_the_recovery_raises_into_the_flow(mode: str) -> None:
    def fail(error: Boom) -> Flow[str, str, str]:
        yield "look"
        raise LookupError("gone") from error

    seen: list[BaseException] = []
    recorder = Recorder()
    with pytest.raises(LookupError, match="gone") as info:
        run(recovering(recording("boom", seen), Boom, fail), recorder, mode)
    assert seen == [info.value] and isinstance(info.value.__cause__, Boom)
    assert info.value.__suppress_context__ and recorder.performed == ["boom", "look"]


@MODES
def test_recovering_does_not_chain_a_re_raised_error_to_the_recovered_one(mode: str) -> None:
    original = ValueError("the I/O layer's own error")

    def reraise(error: Boom) -> Flow[str, str, str]:
        yield "look"
        raise original

    def flow() -> Flow[str, str, None]:
        yield "boom"

    with pytest.raises(ValueError) as info:
        run(recovering(flow(), Boom, reraise), Recorder(), mode)
    assert info.value is original and info.value.__context__ is None


@MODES
def test_recovering_throws_other_errors_into_the_flow_and_passes_emits_through(mode: str) -> None:
    def flow() -> Flow[str | Emit[str], str | None, None]:
        yield Emit((yield "a") or "")
        try:
            yield "other"
        except KeyError:
            yield Emit("the flow saw KeyError")
        yield Emit((yield "boom") or "")

    class Other(Recorder):
        def __call__(self, op: str) -> str:
            if op == "other":
                self.performed.append(op)
                raise KeyError(op)
            return super().__call__(op)

    recorder = Other()
    listing = recovering(flow(), Boom, explain)
    assert run_listing(listing, recorder, mode) == ["A", "the flow saw KeyError", "recovered EXPLAIN-BOOM"]
    assert recorder.performed == ["a", "other", "boom", "explain-boom"]


def test_docstring_examples() -> None:
    result = doctest.testmod(_flow)
    assert result.failed == 0 and result.attempted >= 4
