"""``ReducerHook``: the pruning contract in CrewAI's pre-model-call hook (``pip install ".[crewai]"``).

>>> from agentstate_reducer import MessageReducer
>>> hook = ReducerHook(MessageReducer(min_messages=20, max_messages=40))
>>> hook.reducer.config.preserve_first
True

Three ways to attach it, all before the model calls they should bound:

* ``hook.register()``: every agent (``crewai.hooks.register_before_llm_call_hook``);
* ``hook.register(agents=[...])``: only those agents. A string matches an agent's ``role`` (as
  ``@on(InterceptionPoint.PRE_MODEL_CALL, agents=[...])`` does); an ``Agent`` object matches that
  agent only, by identity, so two agents sharing a role stay apart;
* ``with hook.scoped(): crew.kickoff()``: for the model calls made inside the block
  (``crewai.hooks.dispatch.scoped_hooks`` / ``register_scoped``), optionally per agent as well.

``register`` returns the hook; ``unregister()`` removes what ``register`` added.

How it runs. CrewAI calls the hook before every model call of an agent's loop with
``LLMCallHookContext.messages``, the executor's own list of OpenAI-format dicts: that list is the
history the executor sends and keeps (state mode). The hook reduces it and writes the result back
in place (``messages[:] = ...``; rebinding ``context.messages`` would be ignored), so the history
stays bounded for the rest of the task, the running summary is injected once and rolls forward,
and the summarizer and ``on_prune`` hooks see each pruned message once.

* The leading system message(s) are split off and never reduced. The rest is reduced with
  ``preserve_first=True``: its first message is the task prompt (CrewAI's "Current Task" user
  message), which stays pinned; the running summary goes right after it. ``preserve_first`` is
  set to True on the reducer whatever it was.
* The summary is a plain ``{"role": "user", "content": ...}`` dict: CrewAI's native providers copy
  every key of a message but ``cache_breakpoint`` into the request, and its litellm path passes the
  dicts as they are, so the core's summary id and marker must not be in what is sent. Other keys
  on CrewAI's messages (``cache_breakpoint``, ``files``) stay: the executor's dicts come back as
  they are, the same objects.
* With ``validate=True`` every request is one OpenAI and Anthropic accept (results right after
  their calls, no call left unanswered, a user turn first); a repair is logged with what it
  removed, which leaves the list too and so is pruned through the summarizer and ``on_prune``
  hooks like any pruned message.
* A failing summarizer prunes nothing that call (``on_summary_error="keep"``); the run goes on.
* Direct ``llm.call(...)`` calls outside an agent's loop (CrewAI's own summarization prompts
  included) are left as they are: they have no history to keep.
* ``on_prune`` hooks get the namespace ``("memories", <task id>)``, or the agent's id for a
  standalone ``Agent.kickoff``.
* CrewAI hooks are synchronous: the summarizer must be a plain callable; an async one is a
  ``TypeError`` at construction.

Timing. CrewAI copies the global hooks into an agent's executor when it builds it, at the agent's
first ``kickoff``, and keeps that executor for the agent's later tasks and kickoffs: a hook
registered after an agent's first kickoff never runs for that agent. ``register(agents=[agent])``
warns (``RuntimeWarning``) when that agent's executor already exists. ``scoped()`` has no such
limit: the executor reads the scoped hooks at every call.

CrewAI's own ``respect_context_window=True`` (the default) replaces the whole history, task prompt
included, with one summary when a request passes 85% of the model's window. It runs after the
hooks, on the list the hook has reduced: with limits well below the window it never fires, and it
stays the safety net for a single message too large for the window.
"""

from __future__ import annotations

import contextlib
import logging
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from agentstate_reducer.reducer import MessageReducer

from ._bounded import BoundedMap
from ._common import Calibrations, CallFlow, NativeSummaries, ReduceRecord, build_reducer, missing_extra

try:
    from crewai.agents.agent_builder.base_agent import BaseAgent
    from crewai.hooks import register_before_llm_call_hook, unregister_before_llm_call_hook
    from crewai.hooks.dispatch import InterceptionPoint, get_scoped_hooks, register_scoped, scoped_hooks
except ImportError:  # one error naming the extra, not a chain (tests: a subprocess without crewai)
    raise ImportError(missing_extra("ReducerHook", "crewai", "crewai")) from None

__all__ = ["ReduceRecord", "ReducerHook"]

logger = logging.getLogger("agentstate_reducer.integrations.crewai")

_WHAT = "ReducerHook"


def _summary_message(content: str) -> dict[str, Any]:
    return {"role": "user", "content": content}


def _user_text(message: Any) -> str | None:
    if isinstance(message, Mapping) and message.get("role") == "user" and not message.get("tool_calls"):
        content = message.get("content")
        return content if isinstance(content, str) else None
    return None


def _leading_system(messages: Sequence[Any]) -> int:
    n = 0
    for m in messages:
        if not (isinstance(m, Mapping) and m.get("role") == "system"):
            break
        n += 1
    return n


class _AgentFilter:
    """Which agents a registration runs for: roles (strings) and agent objects (identity)."""

    __slots__ = ("objects", "roles")

    def __init__(self, agents: Sequence[Any]) -> None:
        if isinstance(agents, (str, bytes)) or not isinstance(agents, Sequence):
            raise TypeError(
                f"{_WHAT}: agents must be a list of agent roles (str) or Agent objects, or None "
                f"for every agent; got {type(agents).__name__}"
            )
        if not agents:
            raise ValueError(f"{_WHAT}: agents is empty; pass None to run for every agent")
        roles: set[str] = set()
        objects: list[Any] = []
        for i, agent in enumerate(agents):
            if isinstance(agent, str):
                if not agent:
                    raise ValueError(f"{_WHAT}: agents[{i}] is an empty role")
                roles.add(agent)
            elif isinstance(agent, BaseAgent):
                objects.append(agent)
            else:
                raise TypeError(
                    f"{_WHAT}: agents[{i}] must be an agent role (str) or a crewai Agent, "
                    f"got {type(agent).__name__}"
                )
        self.roles = frozenset(roles)
        self.objects = tuple(objects)

    def __call__(self, agent: Any) -> bool:
        if agent is None:
            return False
        return any(agent is a for a in self.objects) or getattr(agent, "role", None) in self.roles


class _Registered:
    """The callable CrewAI holds for one registration: the hook, for the agents it names."""

    __slots__ = ("hook", "only")

    def __init__(self, hook: ReducerHook, only: _AgentFilter | None) -> None:
        self.hook = hook
        self.only = only

    def __call__(self, context: Any) -> None:
        if self.only is None or self.only(getattr(context, "agent", None)):
            self.hook(context)


class ReducerHook:
    """A CrewAI pre-model-call hook that keeps each agent's history bounded (see the module).

    Args:
        reducer: the ``MessageReducer`` to run (``preserve_first`` is set to True on a copy); or
            none and its keyword arguments in ``reducer_kwargs`` (default limits: 20 to 40).
        summarizer: a callable ``(messages) -> str`` making the running summary (replaces the
            reducer's); with one, the summary is injected after the task prompt.
        on_reduce: called with a ``ReduceRecord`` after every model call's reduction; its errors
            are logged, never raised.
        validate: repair each request to one OpenAI and Anthropic accept (default True).

    Raises:
        TypeError: a bad reducer, summarizer (async ones included), ``on_reduce`` or ``validate``.
        ValueError: keyword arguments that are no valid reducer configuration.
    """

    def __init__(
        self,
        reducer: MessageReducer | None = None,
        *,
        summarizer: Callable[[list[Any]], str] | None = None,
        on_reduce: Callable[[ReduceRecord], Any] | None = None,
        validate: bool = True,
        **reducer_kwargs: Any,
    ) -> None:
        built = build_reducer(reducer, reducer_kwargs, preserve_first=True, summarizer=summarizer, what=_WHAT)
        if built.config.summarize_fn is None and built.config.asummarize_fn is not None:
            raise TypeError(
                f"{_WHAT}: the summarizer is async, but CrewAI runs its hooks synchronously: "
                "pass a plain callable (messages) -> str"
            )
        self._flow = CallFlow(
            built,
            mode="state",
            validate=validate,
            on_reduce=on_reduce,
            native=NativeSummaries(_summary_message, _user_text),
            logger=logger,
            stores_request=True,
        )
        self._global: _Registered | None = None
        self._calibrations = Calibrations(built)
        #: id of an LLM -> the executor that called it last and the LLM's prompt tokens then
        self._totals: BoundedMap[int, tuple[int, int]] = BoundedMap(1024)

    @property
    def reducer(self) -> MessageReducer:
        """The reducer this hook runs (``preserve_first=True``)."""
        return self._flow.reducer

    def __repr__(self) -> str:
        state = "registered" if self._global is not None else "unregistered"
        return f"ReducerHook({self.reducer!r}, {state})"

    # -- the hook ------------------------------------------------------------------------------

    def __call__(self, context: Any) -> None:
        """Bound ``context.messages`` in place; returns None (the call goes on)."""
        executor = getattr(context, "executor", None)
        messages = getattr(context, "messages", None)
        if executor is None or not isinstance(messages, list):
            return None  # a direct LLM call: no history of an agent's loop to keep
        lead = _leading_system(messages)
        task = getattr(context, "task", None)
        owner = task if task is not None else getattr(context, "agent", None)
        owner_id = getattr(owner, "id", None)
        thread = str(owner_id) if owner_id is not None else None
        key = id(executor)
        usage = self._reported(key, getattr(context, "llm", None))
        calibration = self._calibrations.calibration(key, usage)
        bounded = self._flow.bound(key, messages[lead:], thread=thread, calibration=calibration)
        new = [*messages[:lead], *bounded.sent]
        if len(new) != len(messages) or any(a is not b for a, b in zip(new, messages, strict=True)):
            messages[:] = new
        self._calibrations.sent(key, new)
        return None

    def _reported(self, key: int, llm: Any) -> int | None:
        """The input tokens of this executor's previous call: the growth of the LLM's running
        prompt tokens (``get_token_usage_summary``, which CrewAI's providers add each response's
        usage to) since that call, when no other executor called the LLM in between; else None."""
        summary = getattr(llm, "get_token_usage_summary", None)
        if summary is None:
            return None
        try:
            total = summary().prompt_tokens
        except Exception:
            logger.exception("reading the usage of %r failed; the budget is not calibrated", llm)
            return None
        if isinstance(total, bool) or not isinstance(total, int):
            return None
        last = self._totals.put(id(llm), (key, total))
        if last is None or last[0] != key:
            return None
        return total - last[1]

    # -- registration --------------------------------------------------------------------------

    def register(self, agents: Sequence[Any] | None = None) -> ReducerHook:
        """Register globally, for every agent (``agents=None``) or only for ``agents`` (roles or
        ``Agent`` objects); before the kickoff that should use it. Returns the hook.

        Raises:
            RuntimeError: it is registered already (``unregister()`` first).
            TypeError, ValueError: ``agents`` is not a non-empty list of roles or agents.
        """
        if self._global is not None:
            raise RuntimeError(f"{_WHAT} is registered already: call unregister() before registering again")
        only = _AgentFilter(agents) if agents is not None else None
        registered = _Registered(self, only)
        if only is not None:
            for agent in only.objects:
                executor = getattr(agent, "agent_executor", None)
                if executor is not None:
                    warnings.warn(
                        f"{_WHAT} registered after the first kickoff of agent {agent.role!r}: CrewAI "
                        "copied the global hooks into its executor then and keeps that executor, so "
                        "this hook will not run for it; register before the first kickoff, or use "
                        "`with hook.scoped(): ...`",
                        RuntimeWarning,
                        stacklevel=2,
                    )
        register_before_llm_call_hook(registered)
        self._global = registered
        return self

    def unregister(self) -> bool:
        """Remove the global registration; True when there was one. Executors CrewAI built while
        it was registered keep their copy of it (see the module's Timing)."""
        registered, self._global = self._global, None
        return registered is not None and bool(unregister_before_llm_call_hook(registered))

    @contextlib.contextmanager
    def scoped(self, agents: Sequence[Any] | None = None) -> Iterator[ReducerHook]:
        """Run for the model calls made inside the ``with`` block (every agent, or ``agents``);
        hooks of an enclosing scope keep running inside it. CrewAI keeps the scope in a context
        variable: asyncio tasks and ``asyncio.to_thread`` (``kickoff_async``) see it, a thread
        started in the block without a copy of the context does not."""
        only = _AgentFilter(agents) if agents is not None else None
        # scoped_hooks() starts an empty scope: carry the enclosing scope's hooks into it
        outer = {point: get_scoped_hooks(point) for point in InterceptionPoint}
        with scoped_hooks({point: hooks for point, hooks in outer.items() if hooks}):
            register_scoped(InterceptionPoint.PRE_MODEL_CALL, _Registered(self, only))
            yield self
