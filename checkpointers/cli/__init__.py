"""The ``agentstate-reducer`` command line: ``main.main`` is the console script (also
``python -m checkpointers.cli``). It sits above the savers: nothing else in ``checkpointers``
imports it, and it starts without LangGraph installed (each command says which extra it needs)."""
