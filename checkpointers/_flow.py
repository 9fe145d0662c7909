"""Drivers for generator flows: I/O written once for sync and async savers.

A *flow* is a generator that describes a multi-step operation without doing any I/O: it yields
operations, and a driver performs each one with the saver's I/O callable (sync or async) and sends
the result back into the flow, until the flow returns. The driver's invariants:

* every operation the flow yields is performed exactly once, in order, and its result is what the
  flow's ``yield`` evaluates to;
* an ``Exception`` raised while performing an operation is thrown into the flow at that ``yield``
  (outside any ``except`` block of the driver, so nothing is chained to it): the flow may handle it
  and go on, or let it propagate to the driver's caller;
* the flow's return value is the driver's return value (``drive``/``adrive``);
* a listing flow may also yield ``Emit(value)``: ``iterate``/``aiterate`` hand ``value`` to their
  caller (lazily: the flow resumes, with None, when the caller asks for the next one); ``drive`` and
  ``adrive`` reject ``Emit`` with ``TypeError``.

``translating(flow, perform)`` is itself a flow: ``flow``, with each operation it yields performed
by the flow ``perform(op)`` (operations of another kind, performed by the same driver), so a flow of
one layer's operations (retention's) runs on a saver that performs another's (SQL, Cosmos DB).
``recovering(flow, error_type, recover)`` is one such flow: an ``error_type`` thrown in at an
operation is answered by the flow ``recover(error)`` instead, so a recovery is written once for every
flow and both kinds of driver.

>>> def double_both() -> Flow[str, int, int]:
...     a = yield "x"
...     b = yield "y"
...     return 2 * (a + b)
>>> drive(double_both(), {"x": 1, "y": 2}.__getitem__)
6
>>> def cheers() -> Flow[str | Emit[str], str, None]:
...     for name in ("x", "y"):
...         yield Emit((yield name) + "!")
>>> list(iterate(cheers(), str.upper))
['X!', 'Y!']
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable, Generator
from dataclasses import dataclass
from typing import Any, Generic, TypeAlias, TypeVar

__all__ = ["Emit", "Flow", "adrive", "aiterate", "drive", "iterate", "recovering", "translating"]

Op = TypeVar("Op")
Inner = TypeVar("Inner")
Result = TypeVar("Result")
Return = TypeVar("Return")
T = TypeVar("T")
E = TypeVar("E", bound=Exception)

#: A flow: yields operations of type ``Op``, is sent a ``Result`` for each, returns ``Return``.
Flow: TypeAlias = Generator[Op, Result, Return]


@dataclass(frozen=True, slots=True)
class Emit(Generic[T]):
    """Yielded by a listing flow: hand ``value`` to the caller of ``iterate``/``aiterate``. The flow
    is sent None for it."""

    value: T


class _Driving:
    """One flow being driven: sends it the last result (or throws the last error), keeps what it
    returns."""

    __slots__ = ("error", "flow", "result", "returned")

    def __init__(self, flow: Generator[Any, Any, Any]) -> None:
        self.flow = flow
        self.result: Any = None
        self.error: Exception | None = None
        self.returned: Any = None

    def next(self) -> Any:
        """What the flow yields next, or ``_END`` once it has returned."""
        result, error = self.result, self.error
        self.result = self.error = None
        try:
            return self.flow.send(result) if error is None else self.flow.throw(error)
        except StopIteration as done:
            self.returned = done.value
            return _END


_END: Any = object()


def _steps(driving: _Driving, perform: Callable[[Any], Any]) -> Generator[Any, None, None]:
    while (step := driving.next()) is not _END:
        if isinstance(step, Emit):
            yield step.value
            continue
        try:
            driving.result = perform(step)
        except Exception as exc:
            driving.error = exc  # thrown in by next(), outside this except block


async def _asteps(driving: _Driving, perform: Callable[[Any], Awaitable[Any]]) -> AsyncGenerator[Any, None]:
    while (step := driving.next()) is not _END:
        if isinstance(step, Emit):
            yield step.value
            continue
        try:
            driving.result = await perform(step)
        except Exception as exc:
            driving.error = exc  # thrown in by next(), outside this except block


def _emitted(value: Any) -> TypeError:
    return TypeError(f"the flow emitted {value!r}: drive a listing flow with iterate() or aiterate()")


def drive(flow: Flow[Op, Result, Return], perform: Callable[[Op], Result]) -> Return:
    """Drive ``flow`` to its return value, performing each operation with ``perform``."""
    driving = _Driving(flow)
    for value in _steps(driving, perform):
        raise _emitted(value)
    return driving.returned


async def adrive(flow: Flow[Op, Result, Return], perform: Callable[[Op], Awaitable[Result]]) -> Return:
    """``drive`` with an async ``perform``."""
    driving = _Driving(flow)
    steps = _asteps(driving, perform)
    async for value in steps:
        await steps.aclose()
        raise _emitted(value)
    return driving.returned


def iterate(
    flow: Flow[Op | Emit[T], Result | None, Any], perform: Callable[[Op], Result]
) -> Generator[T, None, None]:
    """Drive ``flow``, performing each operation with ``perform``; yield what it emits."""
    return _steps(_Driving(flow), perform)


def aiterate(
    flow: Flow[Op | Emit[T], Result | None, Any], perform: Callable[[Op], Awaitable[Result]]
) -> AsyncGenerator[T, None]:
    """``iterate`` with an async ``perform`` (an async iterator: ``async for``)."""
    return _asteps(_Driving(flow), perform)


def translating(
    flow: Flow[Op, Result, Return], perform: Callable[[Op], Flow[Inner, Any, Result]]
) -> Flow[Inner, Any, Return]:
    """``flow``, with each operation it yields performed by the flow ``perform(op)``: what that flow
    returns is sent to ``flow`` as the operation's result, an ``Exception`` it raises (its own, or
    one thrown into it at one of its operations) is thrown into ``flow`` there.

    >>> def total() -> Flow[str, int, int]:
    ...     return (yield "ab") + (yield "c")
    >>> def letters(word: str) -> Flow[str, int, int]:
    ...     n = 0
    ...     for letter in word:
    ...         n += yield letter
    ...     return n
    >>> drive(translating(total(), letters), {"a": 1, "b": 2, "c": 3}.__getitem__)
    6
    """
    driving = _Driving(flow)
    while (op := driving.next()) is not _END:
        try:
            driving.result = yield from perform(op)
        except Exception as exc:
            driving.error = exc  # thrown in by next(), outside this except block
    return driving.returned


def recovering(
    flow: Flow[Op, Result, Return],
    error_type: type[E],
    recover: Callable[[E], Flow[Op, Result, Result]],
) -> Flow[Op, Result, Return]:
    """``flow``, where an ``error_type`` thrown in at an operation runs the flow ``recover(error)``:
    what it returns is sent to ``flow`` as that operation's result, what it raises is thrown into
    ``flow`` there. Other exceptions are thrown into ``flow`` as they are; what ``flow`` emits passes
    through."""

    def perform(op: Op) -> Flow[Op, Result, Result]:
        try:
            return (yield op)
        except error_type as caught:
            error = caught
        # outside the except block above: what recover raises is not chained to ``error``
        return (yield from recover(error))

    return translating(flow, perform)
