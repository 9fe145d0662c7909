"""One module per agent framework for ``benchmarks/bench_frameworks.py``.

Each module ``<framework>.py`` has ``measure(quick: bool) -> list[dict]``: one row per policy
(ours, and the framework's built-in history handling) on the same scripted conversation, scored
by ``_score.score``; run as ``python -m benchmarks.frameworks.<framework> [--quick]`` it prints
those rows as JSON (how ``bench_frameworks`` runs a framework that lives in another environment).
"""
