"""How the DeltaChannel benchmark measures a reduced thread: what it reports at a point does not
depend on where the point falls in the thread's retention and reduction cycles, and on
PostgreSQL the dead rows retention leaves are reclaimed by a plain VACUUM, as autovacuum would,
before the relations are measured. A reduced plain DeltaChannel graph then measures flat between
two points on a real SQLite file and the test PostgreSQL server."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from benchmarks import bench_savers as bench
from tests.pg_service import PostgresServer

#: two points in different phases of the reduced thread's retention cycle (every 8 steps): on
#: PostgreSQL it holds 6 checkpoints after turn 44 and 11 after turn 88, 75 kB and 115 kB of rows
POINTS = (44, 88)


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_a_reduced_delta_graph_measures_flat_whatever_the_phase_of_its_points(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    server: PostgresServer | None = request.getfixturevalue("postgres_server") if kind == "postgres" else None
    pg_base = server.url_for("postgres") if server is not None else None
    tag = "_measure"
    try:
        at = {r["turns"]: r for r in bench.delta_run(kind, "delta_graph_keep_last", POINTS, tmp_path,
                                                     pg_base, tag=tag)}
    finally:
        if server is not None:
            with psycopg.connect(server.base_url, autocommit=True) as admin:
                admin.execute(f"DROP DATABASE IF EXISTS bench_delta_delta_graph_keep_last{tag} WITH (FORCE)")
    first, last = at[POINTS[0]], at[POINTS[1]]
    assert first["messages"] <= bench.MAX_MESSAGES and last["messages"] <= bench.MAX_MESSAGES
    assert last["row_bytes"] <= bench.DELTA_FLAT_TARGET * first["row_bytes"], (first, last)
    assert last["stored_bytes"] <= bench.DELTA_FLAT_TARGET * first["stored_bytes"], (first, last)
