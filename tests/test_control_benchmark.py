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


def test_iqm_and_stratified_bootstrap_on_known_answers():
    import numpy as np
    from benchmarks.harness.stats import bootstrap_ci, iqm, summary
    assert iqm([4, 1, 3, 2]) == 2.5  # the middle two of four
    assert iqm(range(1, 9)) == 4.5  # 3, 4, 5, 6
    assert iqm([0, 1, 1, 2, 100]) == pytest.approx(4 / 3)  # one cut from each end of five
    assert iqm([1, 2, 9]) == 4.0  # three or fewer: the mean
    assert bootstrap_ci([[7.0] * 5]) == (7.0, 7.0)
    # the mean of 10 draws from five 0s and five 1s is Binomial(10, 1/2) / 10: its 2.5%
    # and 97.5% quantiles are 0.2 and 0.8
    assert bootstrap_ci([[0] * 5 + [1] * 5], np.mean, reps=20000) == (0.2, 0.8)
    # stratified: every resample holds three runs of the first task and one of the second,
    # so the mean of four runs is always 1/4 (an unstratified bootstrap would spread)
    assert bootstrap_ci([[0, 0, 0], [1]], np.mean) == (0.25, 0.25)
    low, high = bootstrap_ci([[1, 2, 3, 4, 5]])
    assert 1 <= low < iqm([1, 2, 3, 4, 5]) < high <= 5
    assert bootstrap_ci([[1, 2, 3, 4, 5]]) == (low, high)  # seeded
    s = summary([100, 200, 300, 400, 500], threshold=300)
    assert (s["seeds"], s["median"], s["iqm"], s["success"]) == (5, 300, 300, 0.6)
    assert summary([1.0])["success"] is None
    with pytest.raises(ValueError, match="at least one run"):
        bootstrap_ci([[1.0], []])


def test_ladder_tables_render_from_the_committed_results(tmp_path):
    """control.md and the README's ladder table come from the committed control.json:
    per task the seeds, median, IQM [95% CI], success at the target, steps and wall time,
    EvoTorch beside."""
    import shutil
    pytest.importorskip("gymnasium")
    results = os.path.join(os.path.dirname(BENCH), "results")
    shutil.copy(os.path.join(results, "control.json"), tmp_path / "control.json")
    readme = tmp_path / "README.md"
    readme.write_text("a\n<!-- control-table:begin -->\nold\n<!-- control-table:end -->\nb\n")
    module = runpy.run_path(BENCH, run_name="not_main")
    assert module["main"](["--render", "--out", str(tmp_path), "--readme", str(readme)]) == 0
    rows = json.loads((tmp_path / "control.json").read_text())["rows"]
    hopper = [r["test_mean"] for r in rows
              if r["task"] == "hopper" and r["framework"] == "es_search"]
    stats = module["summary"](hopper, 3120.0)
    text = readme.read_text()
    line = next(x for x in text.splitlines() if x.startswith("| Hopper-v5"))
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells[1] == str(len(hopper)) and cells[2] == f"{stats['median']:.1f}"
    assert cells[3] == f"{stats['iqm']:.1f} [{stats['iqm_ci'][0]:.1f}, {stats['iqm_ci'][1]:.1f}]"
    assert cells[4] == f"{sum(x >= 3120 for x in hopper)}/{len(hopper)} >= 3120"
    assert cells[7] != "-"  # EvoTorch ran on Hopper
    md = (tmp_path / "control.md").read_text()
    assert "| hopper | es_search |" in md and "IQM [95% CI]" in md
    with open(os.path.join(os.path.dirname(os.path.dirname(BENCH)), "README.md")) as f:
        table = text.split("<!-- control-table:begin -->")[1].split("<!--")[0]
        assert table in f.read()
