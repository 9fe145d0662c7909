"""Reading smolagents' memory steps (``smolagents.memory``) without importing smolagents.

An agent's memory is ``agent.memory.system_prompt`` and the list ``agent.memory.steps``; each
step renders its own messages (``step.to_messages()``), which is what the model is sent:

* ``SystemPromptStep(system_prompt)``: the system prompt, a system message;
* ``TaskStep(task)``: one ``run()``'s task, a human turn;
* ``ActionStep``: one model output with its tool calls **and** their observations (or its
  error): an AI message that holds its results, so it makes no call a later message answers
  and a call is never apart from its observation;
* ``PlanningStep(plan)``: a plan, an AI message.

Steps carry no id. The ``content`` read for the token counter is the text the step renders:
the model output, the observations and the error (its calls, ``ActionStep.tool_calls``, are
counted by ``tool_call_payloads`` as any message's calls). The
message classes of ``smolagents.models`` (``ChatMessage`` with ``MessageRole``) are read by the
generic path by their role; their ``tool-call`` and ``tool-response`` roles (the rendered call
and observation texts, paired only by position) are left unknown: reduce the steps instead.
Duck-typed by class name and module, stdlib only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

#: ``MessageInfo``'s fields: ``(kind, role, id, content, call_ids, result_ids, name, leads)``
Reading = tuple[str, str, None, Any, tuple[str, ...], tuple[str, ...], None, int]

#: smolagents' step classes read here and their kind
STEP_KINDS: Final[Mapping[str, str]] = {
    "SystemPromptStep": "system",
    "TaskStep": "human",
    "ActionStep": "ai",
    "PlanningStep": "ai",
}


def _step_class(msg: Any) -> str | None:
    for cls in type(msg).__mro__:
        if cls.__name__ in STEP_KINDS and cls.__module__.startswith("smolagents"):
            return cls.__name__
    return None


def _text(value: Any) -> str:
    """A model output's text: a str, or the text parts of a content list."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        texts = (p.get("text", "") for p in value if isinstance(p, Mapping) and p.get("type") == "text")
        return "\n".join(str(t) for t in texts)
    return ""


def _action_text(step: Any) -> str:
    parts = [_text(getattr(step, "model_output", None))]
    observations = getattr(step, "observations", None)
    if isinstance(observations, str):
        parts.append(observations)
    error = getattr(step, "error", None)
    if error is not None:
        parts.append(str(error))
    return "\n".join(p for p in parts if p)


def read_step(msg: Any) -> Reading | None:
    """The ``MessageInfo`` fields of a smolagents memory step; None for anything else.

    Raises what a hostile field raises (``read_message`` catches it).
    """
    cls = _step_class(msg)
    if cls is None:
        return None
    kind = STEP_KINDS[cls]
    if cls == "SystemPromptStep":
        content: str = _text(getattr(msg, "system_prompt", None))
    elif cls == "TaskStep":
        content = _text(getattr(msg, "task", None))
    elif cls == "PlanningStep":
        content = _text(getattr(msg, "plan", None))
    else:
        content = _action_text(msg)
    return (kind, cls, None, content, (), (), None, 0)
