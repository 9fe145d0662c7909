"""Runnable benchmarks: ``python -m benchmarks [--quick]`` runs them all and prints one table.

Each ``bench_*.py`` module exposes ``run(quick: bool) -> list[dict]``: one dict per measurement,
with a ``benchmark`` name, a ``ratio`` measured against a baseline in the same process, and any
other fields (times, bytes, ``target``, ``met``). Ratios, not absolute times, are what the
README quotes, with the machine and date that ``python -m benchmarks`` prints first.
"""
