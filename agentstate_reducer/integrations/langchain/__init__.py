"""``ReducerMiddleware``: the pruning contract inside a LangChain 1.x ``create_agent`` agent.

>>> from agentstate_reducer import MessageReducer
>>> mw = ReducerMiddleware(MessageReducer(min_messages=20, max_messages=40))
>>> mw.mode, mw.preserve_first
('state', False)

``create_agent(model, tools, middleware=[mw])``. Needs the ``langchain`` extra
(``pip install ".[langchain]"`` from the checkout); ``import agentstate_reducer`` never imports
this module.

Two modes:

* ``mode="state"`` (default): ``before_model``/``abefore_model`` reduce the agent state's messages
  and write the result back (``RemoveMessage(REMOVE_ALL_MESSAGES)`` plus the survivors), so the
  checkpoint is bounded too. The running summary is injected once and rolls forward; ``on_prune``
  hooks see each pruned message once (it is gone from the state afterwards).
* ``mode="request"``: ``wrap_model_call``/``awrap_model_call`` reduce only the messages sent to the
  model; the state keeps the full history. A ``SummaryMemo`` (one entry per thread and graph
  namespace) remembers what the running summary covers, so the request is the previous request
  plus the new messages (a stable prefix), and the summarizer and hooks see each message once.

Invariants, in both modes:

* Every model call gets a history OpenAI and Anthropic accept (``validate=True``): one system
  message at the front (the agent's system prompt, then system messages held in state, merged),
  a user turn first after it, every tool result after its call, every call answered once. The
  repair is the planner's untriggered plan of the request read as if a user turn followed it
  (``_repair.RequestRepair``), so a call at the end still waiting for results goes too; an
  assistant answer left last (its later results removed) is not sent: the model is called
  after a user message or tool results.
  Repairs are logged with the ids they removed. In request mode they change only the request; in
  state mode the reduction of the state prunes, untriggered, what the contract names broken
  (orphan, late and second results, calls left unanswered) from the state too, and only the
  request loses what comes before the first user turn and a pending call at the end.
* The request's system prompt is never pruned; system messages in state stay pinned.
* ``trigger``/``keep`` take LangChain's forms: ``("messages", n)``, ``("tokens", n)``,
  ``("fraction", f)`` of the model profile's ``max_input_tokens``; a list means any of them, a dict
  all of them. A trigger fires when the history reaches the threshold (``>=``, as LangChain's).
  Without them the reducer's own limits apply (more than ``max_messages`` / ``max_tokens``,
  keep ``min_messages`` / ``target_tokens``). A keep over a threshold of the trigger in the same
  unit is a ``ValueError`` at construction.
* Token triggers use the newest AI message's ``usage_metadata["total_tokens"]`` plus an estimate
  of the messages after it, unless a reduction has happened since that message.
* A failing summarizer prunes nothing (``ReducerConfig.on_summary_error="keep"``, the default).
"""

from ._middleware import Mode, ReduceRecord, ReducerMiddleware
from ._summarizer import DEFAULT_SUMMARY_PROMPT

__all__ = ["DEFAULT_SUMMARY_PROMPT", "Mode", "ReduceRecord", "ReducerMiddleware"]
