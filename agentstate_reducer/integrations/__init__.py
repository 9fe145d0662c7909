"""One thin module per agent framework over the one core; none is imported by this package.

Each module imports its framework when it is imported (its ImportError names the extra to
install from the checkout) and adapts the framework's own place for a history reducer:

* ``integrations.langchain``: ``ReducerMiddleware`` for LangChain 1.x ``create_agent``
  (also importable as ``agentstate_reducer.middleware``), extra ``langchain``;
* ``integrations.openai_agents``: ``ReducingSession`` for the OpenAI Agents SDK (also
  ``agentstate_reducer.sessions``), extra ``openai-agents``;
* ``integrations.crewai``: ``ReducerHook``, a pre-model-call hook, extra ``crewai``;
* ``integrations.pydantic_ai``: ``ReduceHistory``, a capability, extra ``pydantic-ai``;
* ``integrations.google_adk``: ``ReducerCallback`` and ``ReducerPlugin``, extra ``google-adk``;
* ``integrations.autogen``: ``ReducingChatCompletionContext``, extra ``autogen``;
* ``integrations.agent_framework``: ``ReducerCompactionStrategy``, a compaction strategy for the
  Microsoft Agent Framework, extra ``agent-framework``;
* ``integrations.llama_index``: ``ReducingMemory``, a LlamaIndex ``Memory``, extra ``llama-index``;
* ``integrations.smolagents``: ``ReduceMemory``, a step callback, extra ``smolagents``;
* ``integrations.agno``: ``ReducingCompressionManager``, extra ``agno``.
* ``integrations.openai_responses``: ``reduce_request``, the ``input`` of a Responses request
  (a server-chained one only when asked), no extra.

What they share (building the reducer, the request repair, ``ReduceRecord``, the running
summary in a framework's own message class, one model call's flow) is ``integrations._common``,
which imports only the core.
"""
