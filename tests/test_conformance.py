"""LangGraph's official checkpointer conformance suite against ReducingCheckpointSaver.

The suite is async-only; it detects optional capabilities on the saver's *class*, so these tests
also prove the wrapper shows exactly its inner saver's capabilities plus retention's prune/aprune.
The suite's channel values are small strings: it never exercises the reducer (the scenario
tests do), it proves the wrapper is a correct saver.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from langgraph.checkpoint.conformance import checkpointer_test, validate

from agentstate_reducer import MessageReducer
from checkpointers import ReducingCheckpointSaver
from tests.scenario_graph import aopen_saver

BASE = {"put": 17, "put_writes": 10, "get_tuple": 10, "list": 16, "delete_thread": 5}
EXTENDED = {"delete_for_runs": 7, "copy_thread": 8, "prune": 8}

CASES = [
    # prune: checkpointers.retention's on every one (AsyncPostgresSaver's own refuses DeltaChannel threads)
    pytest.param("memory", {"prune": 8}, id="InMemorySaver"),
    pytest.param("aiosqlite", {"prune": 8}, id="AsyncSqliteSaver"),
    pytest.param("apostgres", {"prune": 8}, id="AsyncPostgresSaver", marks=pytest.mark.postgres),
]


@pytest.mark.slow
@pytest.mark.parametrize(("kind", "extended"), CASES)
async def test_conformance_full(
    kind: str, extended: dict[str, int], tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    pg_url = None
    if kind == "apostgres":
        # a database of its own: the suites list and delete across threads
        pg_url = request.getfixturevalue("postgres_server").new_database("conformance")
    reducer = MessageReducer(min_messages=2, max_messages=4)
    counter = iter(range(100))

    async def factory() -> AsyncIterator[ReducingCheckpointSaver]:
        # a fresh inner saver (and sqlite file) per capability suite, as the suite expects
        async with aopen_saver(kind, path=tmp_path / f"conf-{next(counter)}.db", pg_url=pg_url) as inner:
            yield ReducingCheckpointSaver(inner, reducer)

    registered = checkpointer_test(name=f"ReducingCheckpointSaver({kind})")(factory)
    report = await validate(registered)
    # Captured like any test output: pytest shows the report with a failure, not among the dots.
    report.print_report()
    counts = {
        cap: f"{r.tests_passed}/{r.tests_passed + r.tests_failed}"
        for cap, r in report.results.items() if r.detected
    }  # fmt: skip
    print(f"  pass counts: {counts}")

    failures = {cap: r.failures for cap, r in report.results.items() if r.failures}
    assert report.conformance_level() == "FULL", failures
    expected = {**BASE, **extended}
    assert {cap for cap, r in report.results.items() if r.detected} == set(expected)
    assert {cap: (r.tests_passed, r.tests_failed) for cap, r in report.results.items() if r.detected} == {
        cap: (n, 0) for cap, n in expected.items()
    }
