"""Generated histories (``tests.histories``) as Google ADK stores and sends them.

``contents(spec)`` gives the ``Content`` list ADK's request holds for a history, ``events(spec)``
the session events ADK's agent loop stores for it: a model turn is one ``model`` content (text,
then its ``function_call`` parts), the results of one call step that follow it are one ``user``
content of ``function_response`` parts (ADK stores a parallel step's results as one event), and
every other result (late, duplicate, orphan, replayed, after a text) is a content of its own.
``ids`` gives the history ids a content carries (a results content carries one per result).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Literal

from google.adk.events import Event
from google.genai import types

from tests.convo import Spec

#: how the calls carry ids: as the model gave them (ADK keeps them for models that pair by id),
#: ADK's own ``adk-`` ids (stripped in the request for Gemini; each call is of a tool of its own,
#: so a response is paired by its name), or none and one tool for every call (an older session:
#: a response is paired by name and order, so an orphan or a second result reads as a result of
#: the newest call of that name)
IdMode = Literal["ids", "adk", "none"]

AGENT = "assistant"

_MARK = re.compile(r"message (\S+) x{20}")


def _text(mid: str) -> str:
    return f"message {mid} " + "x" * 20


def _call_id(call: str, mode: IdMode, *, stored: bool) -> str | None:
    if mode == "ids":
        return call
    if mode == "adk":
        return f"adk-{call}" if stored else None  # ADK strips its own ids from the request
    return None


def _name(call: str, mode: IdMode) -> str:
    return f"lookup_{call}" if mode == "adk" else "lookup"


def _steps(spec: Spec) -> list[tuple[str, list[tuple[Any, ...]]]]:
    """The spec grouped as ADK stores it: (author, steps of one content)."""
    out: list[tuple[str, list[tuple[Any, ...]]]] = []
    open_calls: set[str] = set()  # calls of the step right before the current results content
    for step in spec:
        kind = step[0]
        if kind == "tool" and out and step[2] in open_calls:
            prev_kind = out[-1][1][-1][0]
            if prev_kind in ("call", "tool"):
                if prev_kind == "call":
                    out.append((AGENT, [step]))
                else:
                    out[-1][1].append(step)
                open_calls.discard(step[2])
                continue
        author = "user" if kind == "human" else AGENT
        out.append((author, [step]))
        open_calls = set(step[2]) if kind == "call" else set()
    return out


def _content(steps: Sequence[tuple[Any, ...]], mode: IdMode, *, stored: bool) -> types.Content:
    kind = steps[0][0]
    if kind == "human":
        return types.Content(role="user", parts=[types.Part(text=_text(steps[0][1]))])
    if kind == "ai":
        return types.Content(role="model", parts=[types.Part(text=_text(steps[0][1]))])
    if kind == "call":
        _, mid, calls = steps[0]
        parts = [types.Part(text=_text(mid))]
        parts += [
            types.Part(
                function_call=types.FunctionCall(
                    id=_call_id(c, mode, stored=stored), name=_name(c, mode), args={"q": c}
                )
            )
            for c in calls
        ]
        return types.Content(role="model", parts=parts)
    assert kind == "tool", steps
    responses = [
        types.Part(
            function_response=types.FunctionResponse(
                id=_call_id(call, mode, stored=stored),
                name=_name(call, mode),
                response={"result": _text(mid)},
            )
        )
        for _, mid, call in steps
    ]
    return types.Content(role="user", parts=responses)


def count(spec: Spec) -> int:
    """How many contents ADK holds for ``spec``."""
    return len(_steps(spec))


def contents(spec: Spec, mode: IdMode) -> list[types.Content]:
    """The request contents ADK builds for ``spec`` (new objects at every call, as ADK's copies)."""
    return [_content(steps, mode, stored=False) for _, steps in _steps(spec)]


def request_copy(content: types.Content) -> types.Content:
    """What ADK puts in a request for a stored content: a copy of it and of each part, equal,
    not the same objects (``_copy_content_for_request``)."""
    return content.model_copy(update={"parts": [p.model_copy() for p in content.parts or []]})


def events(spec: Spec, mode: IdMode) -> list[Event]:
    """The session events ADK's agent loop stores for ``spec``."""
    return [
        Event(author=author, content=_content(steps, mode, stored=True)) for author, steps in _steps(spec)
    ]


def ids(content: Any) -> list[str]:
    """The history ids a content carries, in part order (none for a summary or a live turn)."""
    out: list[str] = []
    for part in getattr(content, "parts", None) or []:
        if part.text:
            out += _MARK.findall(part.text)
        if part.function_response is not None:
            out += _MARK.findall(str((part.function_response.response or {}).get("result", "")))
    return out
