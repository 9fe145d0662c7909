"""Run hooks bounding each model request of a ``ReducingSession``'s runs in the provider's tokens
(``pip install ".[openai-agents]"``).

The Agents SDK reports each model call's usage on its ``ModelResponse``, never on the items a
session stores, and a session sees no model call. A run's tool loop also adds items on top of
the stored history, so a request can outgrow the bound the session keeps. ``UsageHooks(session)``
covers both, for the runs of that session:

* as the run's ``hooks``: before each call it keeps the input items the model is sent, after it
  gives them and ``response.usage`` to ``session.calibration``, so the session's ``max_tokens``
  budget is in the provider's tokens (docs/tokens.md, "Calibrated budgets"). A response without
  usable input tokens (missing, zero) leaves the last calibration.
* as the run's ``RunConfig(call_model_input_filter=hooks.call_model_input_filter)``: each request
  is bounded by the session's reducer with that calibration (``ReducingSession.bound_input``), so
  no request of the tool loop goes over the budget. Nothing stored changes there: the session
  prunes, summarizes and archives when it stores.

One ``UsageHooks`` per session: a ``RunHooks`` serves one run at a time, and the session one
conversation. To keep your own hooks too, subclass it and call ``super()`` in ``on_llm_start``
and ``on_llm_end``; to keep your own input filter, call it and then this one on its result.

Importing this module imports the SDK; ``openai_agents`` does not.
"""

from __future__ import annotations

from typing import Any

from agentstate_reducer.integrations._common import missing_extra
from agentstate_reducer.integrations.openai_agents import ReducingSession

try:
    from agents import Agent, ModelResponse, RunContextWrapper, RunHooks
    from agents.run_config import CallModelData, ModelInputData
except ImportError as exc:  # pragma: no cover - exercised in a subprocess without the package
    raise ImportError(
        missing_extra("UsageHooks", "openai-agents", "openai-agents")
    ) from exc

__all__ = ["UsageHooks"]


class UsageHooks(RunHooks[Any]):
    """Feeds ``session.calibration`` with each model call's input items and reported usage, and
    bounds each request with it (``call_model_input_filter``).

    >>> hooks = UsageHooks(session)  # doctest: +SKIP
    >>> await Runner.run(agent, text, session=session, hooks=hooks,  # doctest: +SKIP
    ...     run_config=RunConfig(call_model_input_filter=hooks.call_model_input_filter))

    Raises:
        TypeError: ``session`` is no ``ReducingSession``.
    """

    def __init__(self, session: ReducingSession) -> None:
        if not isinstance(session, ReducingSession):
            raise TypeError(
                f"UsageHooks feeds a ReducingSession's calibration, got {type(session).__name__}: "
                "pass the ReducingSession given to Runner.run(session=...)"
            )
        self.session = session
        self._sent: tuple[Any, ...] = ()

    async def on_llm_start(
        self,
        context: RunContextWrapper[Any],
        agent: Agent[Any],
        system_prompt: str | None,
        input_items: list[Any],
    ) -> None:
        self._sent = tuple(input_items)

    async def on_llm_end(
        self, context: RunContextWrapper[Any], agent: Agent[Any], response: ModelResponse
    ) -> None:
        sent, self._sent = self._sent, ()
        if sent:
            self.session.calibration.observe(sent, response.usage)

    def call_model_input_filter(self, data: CallModelData[Any]) -> ModelInputData:
        """``RunConfig.call_model_input_filter``: the request's input items bounded by the
        session's reducer, calibrated (``ReducingSession.bound_input``); the instructions as
        they are."""
        model_data = data.model_data
        return ModelInputData(
            input=self.session.bound_input(model_data.input), instructions=model_data.instructions
        )
