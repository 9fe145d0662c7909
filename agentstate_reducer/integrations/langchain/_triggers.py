"""The ``trigger`` and ``keep`` forms of ``ReducerMiddleware``, in LangChain's shapes.

A size is ``(kind, value)`` with kind ``"messages"``, ``"tokens"`` or ``"fraction"`` (of the model
profile's ``max_input_tokens``). A trigger is a tuple of clauses: it fires when any clause holds,
and a clause holds when all of its ``(kind, threshold)`` pairs do (``>=``).

>>> parse_trigger([("messages", 40), {"tokens": 3000, "messages": 10}])
((('messages', 40),), (('tokens', 3000), ('messages', 10)))
>>> trigger_repr(parse_trigger({"tokens": 3000, "messages": 10}))
"{'tokens': 3000, 'messages': 10}"
>>> resolve("messages", 40, None)
('messages', 40)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = [
    "Clause",
    "Size",
    "check_keep_within_trigger",
    "no_profile",
    "parse_size",
    "parse_trigger",
    "profile_limit",
    "resolve",
    "trigger_repr",
]

#: a resolved size: ("messages", n) or ("tokens", n)
Size = tuple[str, int]
#: a trigger: any of the clauses; a clause: all of its (kind, threshold) pairs
Clause = tuple[tuple[str, float], ...]

_KINDS = ("messages", "tokens", "fraction")


def _check_value(kind: Any, value: Any, what: str) -> float:
    if kind not in _KINDS:
        raise ValueError(f"{what}: unknown kind {kind!r}; use 'messages', 'tokens' or 'fraction'")
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{what}: the {kind} value must be a number, got {value!r}")
    if kind == "fraction":
        if not 0 < value <= 1:
            raise ValueError(f"{what}: a fraction must be in (0, 1], got {value!r}")
        return float(value)
    if not isinstance(value, int):
        raise TypeError(f"{what}: the {kind} value must be an int, got {value!r}")
    if value <= 0:
        raise ValueError(f"{what}: the {kind} value must be > 0, got {value}")
    return value


def parse_size(value: Any, what: str) -> tuple[str, float]:
    """A checked ``(kind, value)``; ``what`` names the argument in the error."""
    if not isinstance(value, tuple) or len(value) != 2:
        raise TypeError(
            f"{what} must be a (kind, value) tuple such as ('messages', 40), ('tokens', 3000) or "
            f"('fraction', 0.8), got {value!r}"
        )
    return value[0], _check_value(value[0], value[1], what)


def parse_trigger(trigger: Any) -> tuple[Clause, ...]:
    """LangChain's trigger forms -> clauses (any clause; all pairs of a clause)."""

    def clause(item: Any) -> Clause:
        if isinstance(item, tuple):
            return (parse_size(item, "trigger"),)
        if isinstance(item, Mapping):
            if not item:
                raise ValueError("trigger: a dict needs at least one of 'messages', 'tokens', 'fraction'")
            return tuple((k, _check_value(k, v, "trigger")) for k, v in item.items())
        raise TypeError(
            "trigger must be a (kind, value) tuple, a dict {kind: value} (all of them) or a list of "
            f"those (any of them), got {type(item).__name__}: {item!r}"
        )

    if isinstance(trigger, list):
        if not trigger:
            raise ValueError("trigger: an empty list never fires; pass None to use the reducer's limits")
        return tuple(clause(item) for item in trigger)
    return (clause(trigger),)


def trigger_repr(trigger: tuple[Clause, ...]) -> str:
    """``trigger`` in the form it is given in: None, a tuple, a dict (all), a list (any)."""

    def clause(c: Clause) -> str:
        return repr(c[0]) if len(c) == 1 else repr(dict(c))

    if not trigger:
        return "None"
    return clause(trigger[0]) if len(trigger) == 1 else "[" + ", ".join(map(clause, trigger)) + "]"


def check_keep_within_trigger(
    keep: tuple[str, float],
    trigger: tuple[Clause, ...],
    model: Any,
    *,
    keep_given: bool,
    trigger_given: bool,
) -> None:
    """Raise ``ValueError`` when ``keep`` is more than a threshold of ``trigger`` in the same unit
    (a fraction is compared in tokens when ``model``'s profile gives its window): a reduction
    keeping more than what triggered it prunes nothing until the history is over ``keep``.
    ``keep_given``/``trigger_given``: given to the middleware, else the reducer's
    (``min_messages``/``target_tokens``; ``max_messages``/``max_tokens``, whose threshold is
    one more)."""
    limit = profile_limit(model) if model is not None else None

    def unit(kind: str, value: float) -> tuple[str, float]:
        return resolve(kind, value, model) if kind != "fraction" or limit is not None else (kind, value)

    kept = unit(*keep)
    what = f"keep {keep!r}"
    if not keep_given:
        what = f"the reducer's {'min_messages' if keep[0] == 'messages' else 'target_tokens'} ({keep[1]})"
    for clause in trigger:
        for kind, value in clause:
            threshold = unit(kind, value)
            if threshold[0] != kept[0]:
                continue
            if trigger_given and kept[1] > threshold[1]:
                raise ValueError(
                    f"{what} must be <= trigger {(kind, value)!r}: a reduction keeping more than "
                    "what triggered it prunes nothing until the history is over keep; lower keep "
                    "or raise the trigger"
                )
            most = int(value) - 1
            if not trigger_given and kept[1] > most:
                name = "max_messages" if kind == "messages" else "max_tokens"
                raise ValueError(
                    f"{what} must be <= the reducer's {name} ({most}): a reduction keeping more "
                    "than that prunes nothing until the history is over keep; pass a smaller keep "
                    "or a trigger"
                )


def profile_limit(model: Any) -> int | None:
    """``max_input_tokens`` from a chat model's profile, or None."""
    try:
        profile = getattr(model, "profile", None)
    except Exception:
        return None
    limit = profile.get("max_input_tokens") if isinstance(profile, Mapping) else None
    return limit if isinstance(limit, int) and not isinstance(limit, bool) and limit > 0 else None


def no_profile(model: Any) -> ValueError:
    """The error for a fraction that ``model`` cannot resolve (no ``max_input_tokens``)."""
    name = type(model).__name__ if model is not None else "None"
    return ValueError(
        f"a ('fraction', f) trigger or keep needs the model's max_input_tokens, but the model ({name}) "
        "has no profile with it: pass ('tokens', n) instead, or give the chat model "
        "profile={'max_input_tokens': ...}"
    )


def resolve(kind: str, value: float, model: Any) -> Size:
    """A size in messages or tokens: a fraction becomes tokens of ``model``'s window (at least 1).

    Raises:
        ValueError: a fraction and ``model`` has no profile with ``max_input_tokens``.
    """
    if kind != "fraction":
        return kind, int(value)
    limit = profile_limit(model)
    if limit is None:
        raise no_profile(model)
    return "tokens", max(1, int(limit * value))
