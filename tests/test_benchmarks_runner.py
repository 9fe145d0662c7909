"""``python -m benchmarks --runs N``: rows of several runs matched, medians taken, ``met`` judged on
the median. The benchmark modules themselves are not run here (tests never assert on speed): a
module of fixed rows stands in for one, so what is checked is the runner's arithmetic."""

from __future__ import annotations

import sys
import types
from typing import Any

import pytest

# `benchmarks` is not installed: it is imported from the repository root, which pytest puts on
# sys.path for the `tests` package.
from benchmarks import __main__ as runner


def test_judge_reads_the_target_forms_the_modules_write() -> None:
    assert runner.judge(">= 3", 3.0) is True
    assert runner.judge(">= 3", 2.99) is False
    assert runner.judge("<= 12", 12.5) is False
    assert runner.judge("< 0.10", 0.05) is True
    assert runner.judge(">= 1.3x", 1.2) is False
    assert runner.judge("0", 0) is True and runner.judge("0", 1) is False
    # Not a threshold, or no numeric ratio: no judgement.
    assert runner.judge("information", 5.0) is None
    assert runner.judge("warm <= 3x a list copy", 1.0) is None
    assert runner.judge(">= 3", "2.0x") is None
    assert runner.judge(">= 3", True) is None


def _row(ratio: float, met: bool, text: str, ms: float) -> dict[str, Any]:
    return {"benchmark": "b", "metric": "x / y", "ratio": ratio, "target": ">= 3", "met": met,
            "note": text, "y_ms": ms}  # fmt: skip


def test_combine_takes_medians_and_judges_met_on_the_median_ratio() -> None:
    # Each run's own `met` says True, but the median ratio (2.0) misses the target: the runner
    # judges the median, not the runs.
    group = [_row(1.0, True, "run 1", 10.0), _row(5.0, True, "run 2", 30.0), _row(2.0, True, "run 3", 20.0)]
    out = runner.combine(group, runs=3)
    assert out["ratio"] == 2.0
    assert out["y_ms"] == 20.0
    assert out["met"] is False
    assert out["note"] == "run 3"  # text of the run whose ratio is the median
    assert out["ratio_range"] == "1-5"
    assert "runs" not in out


def test_combine_without_a_readable_target_takes_the_majority_of_met() -> None:
    def group(ratio: float | None, *met: bool | None) -> list[dict[str, Any]]:
        return [{"benchmark": "b", "ratio": ratio, "target": "", "met": m} for m in met]

    assert runner.combine(group(None, True, False, False), runs=3)["met"] is False
    assert runner.combine(group(None, True, False, True), runs=3)["met"] is True
    assert runner.combine(group(1.0, None, None, None), runs=3)["met"] is None


def test_one_run_leaves_the_rows_as_the_module_made_them() -> None:
    row = {"benchmark": "b", "ratio": 1.29999, "target": ">= 1.3x", "met": False}
    assert runner.combine([row], runs=1) == row


def test_rows_match_by_text_else_by_place_among_their_benchmark() -> None:
    runs = [
        [
            {"benchmark": "a", "metric": "m1", "ratio": float(i)},
            {"benchmark": "a", "metric": "m2", "ratio": 10.0 + i},
            {"benchmark": "t", "metric": f"took {i} ms", "ratio": 100.0 + i},  # text differs per run
        ]
        for i in ((2, 0, 1)[k] for k in range(3))
    ]
    runs[1] = [runs[1][1], runs[1][0], runs[1][2]]  # order differs: matched by text, not place
    groups = runner.match_runs(runs)
    assert [[r["ratio"] for r in g] for g in groups] == [
        [2.0, 0.0, 1.0],
        [12.0, 10.0, 11.0],
        [102.0, 100.0, 101.0],
    ]
    rows = [runner.combine(g, runs=3) for g in groups]
    assert [(r["metric"], r["ratio"]) for r in rows] == [("m1", 1.0), ("m2", 11.0), ("took 1 ms", 101.0)]


def test_a_row_missing_from_a_run_says_so() -> None:
    runs = [
        [{"benchmark": "a", "ratio": 1.0}, {"benchmark": "only once", "ratio": 4.0}],
        [{"benchmark": "a", "ratio": 3.0}],
    ]
    rows = [runner.combine(g, runs=2) for g in runner.match_runs(runs)]
    assert rows[0]["ratio"] == 2.0
    assert rows[1]["ratio"] == 4.0
    assert rows[1]["runs"] == "1 of 2 (the row did not match in every run)"


def test_runs_runs_the_module_n_times_and_prints_medians(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    ratios = iter([1.0, 9.0, 4.0, 2.0, 8.0])
    calls: list[bool] = []

    def run(quick: bool) -> list[dict[str, Any]]:
        calls.append(quick)
        ratio = next(ratios)
        return [
            {"benchmark": "fake", "metric": "x / y", "ratio": ratio, "target": ">= 4.5", "met": ratio >= 4.5}
        ]

    fake = types.ModuleType("benchmarks.bench_fake")
    fake.run = run  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "benchmarks.bench_fake", fake)
    monkeypatch.setattr(runner, "MODULES", (*runner.MODULES, "bench_fake"))
    assert runner.main(["--only", "bench_fake", "--runs", "5", "--quick"]) == 0
    out = capsys.readouterr().out
    assert calls == [True] * 5
    assert out.splitlines()[0].startswith("benchmarks (quick), median of 5 runs: ")
    line = next(x for x in out.splitlines() if x.startswith("bench_fake  fake"))
    assert line.split()[2:] == ["x", "/", "y", "4", ">=", "4.5", "NO", "ratio_range=1-9"]
    assert "targets missed (1):\n  bench_fake: fake (x / y)" in out
    assert "bench_fake: 1 rows (median of 5 runs, " in out


def test_runs_must_be_positive(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        runner.main(["--runs", "0"])
    assert exc.value.code == 2
    assert "--runs must be 1 or more, got 0" in capsys.readouterr().err
