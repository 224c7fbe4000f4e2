"""benchmarks/control.py runs top to bottom with a tiny budget (no EvoTorch)."""
import json
import os
import runpy

import pytest

BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                     "benchmarks", "control.py")


@pytest.mark.slow
def test_control_benchmark_smoke(tmp_path):
    pytest.importorskip("gymnasium")
    module = runpy.run_path(BENCH, run_name="not_main")
    assert module["main"](["--tasks", "pendulum", "--seeds", "3", "--budget-scale", "0.02",
                           "--ceiling-seconds", "0.2", "--test-episodes", "3",
                           "--n-jobs", "2", "--no-evotorch", "--out", str(tmp_path)]) == 0
    rows = json.loads((tmp_path / "control.json").read_text())["rows"]
    assert [(r["task"], r["framework"], r["seed"]) for r in rows] == [
        ("pendulum", "es_search", 3)]
    row = rows[0]
    assert row["generations"] >= 1 and row["test_mean"] < 0
    assert row["ceiling"] > 0 and row["run_ceiling"] > 0
    assert "| pendulum | es_search | 3 |" in (tmp_path / "control.md").read_text()
    with pytest.raises(SystemExit, match="unknown task"):
        module["main"](["--tasks", "nosuch", "--out", str(tmp_path)])
