"""The DeltaChannel table of ``benchmarks/bench_savers.py`` in its ``--quick`` mode, on a real SQLite
file and the test PostgreSQL server: every config is measured at every point on both backends, and
each target row is judged. Nothing here asserts on speed (timings are the benchmark's business)."""

from __future__ import annotations

import re

import psycopg
import pytest

from benchmarks import bench_savers as bench
from tests.pg_service import PostgresServer


def test_the_quick_delta_benchmark_measures_every_config_at_every_point(
    postgres_server: PostgresServer, capsys: pytest.CaptureFixture[str]
) -> None:
    try:
        rows, details = bench.delta(quick=True, pg_base=postgres_server.url_for("postgres"))
    finally:
        with psycopg.connect(postgres_server.base_url, autocommit=True) as admin:
            for variant in bench.DELTA_VARIANTS:
                admin.execute(f"DROP DATABASE IF EXISTS bench_delta_{variant} WITH (FORCE)")
    points = bench.DELTA_QUICK_POINTS
    measured = sorted((d["kind"], d["variant"], d["turns"]) for d in details)
    assert measured == sorted(
        (kind, variant, n)
        for kind in ("sqlite", "postgres")
        for variant in bench.DELTA_VARIANTS
        for n in points
    )
    for d in details:
        assert d["stored_bytes"] > 0 and d["row_bytes"] > 0 and d["get_state_ms"] > 0, d
    at_end = {(d["kind"], d["variant"]): d for d in details if d["turns"] == points[-1]}
    for kind in ("sqlite", "postgres"):
        # the reduced configs load a bounded history, the bare ones every message of the thread
        for variant in ("deepagents_keep_last", "delta_graph_keep_last"):
            assert at_end[(kind, variant)]["messages"] <= bench.MAX_MESSAGES, (kind, variant)
        for variant in ("deepagents", "delta_graph"):
            assert at_end[(kind, variant)]["messages"] > bench.MAX_MESSAGES, (kind, variant)
    # per backend: flatness of both reduced configs, and deepagents bare / reduced
    assert [(r["benchmark"].split(", ")[1], r["target"]) for r in rows] == [
        (kind, target) for kind in ("sqlite", "postgres")
        for target in (f"<= {bench.DELTA_FLAT_TARGET:g}",) * 2 + (f">= {bench.DELTA_BELOW_TARGET:g}",)
    ]
    assert all(isinstance(r["met"], bool) and r["ratio"] > 0 for r in rows)

    bench.print_delta(details)
    table = capsys.readouterr().out.splitlines()
    assert table[0].startswith("stored MB") and f"median of {bench.GET_STATE_CALLS} calls" in table[0]
    assert re.split(r"\s{2,}", table[1])[:3] == ["backend", "config", f"{points[0]} turns: MB (rows), ms"]
    assert len(table) == 2 + 2 * len(bench.DELTA_VARIANTS)


@pytest.mark.parametrize("points", [[100], [300, 100], [0, 10], [10, 10]])
def test_delta_points_must_be_two_or_more_ascending_turn_counts(points: list[int]) -> None:
    with pytest.raises(ValueError, match=r"points must be two or more ascending turn counts >= 1, got \["):
        bench.delta(quick=True, pg_base="postgresql://unused", points=points)
