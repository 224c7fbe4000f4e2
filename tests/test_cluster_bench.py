"""The cluster benchmark: the cost model recovers known costs, the report and the targets
render from a saved run (the measuring itself: `python benchmarks/cluster.py`)."""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import pytest

from benchmarks.harness.cluster_model import analyse, markdown, predict_time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def synthetic(a0=2e-3, a1=0.25e-3, h=50e-6, b=0.5e-9, centre=8e6):
    """A saved run whose figures follow the model exactly."""
    def gen(n, pop, t):
        return a0 + a1 * n + math.ceil(pop / n) * (t + h)

    sim = [{"n": n, "workers": n, "pop": 4 * n, "score_s": 0.01,
            "generation_s": gen(n, 4 * n, 0.01),
            "overhead_s": gen(n, 4 * n, 0.01) - 4 * 0.01, "cores": 2,
            "client_cpu_s": 1e-3 + 0.1e-3 * n, "workers_cpu_s": 2e-3 * n}
           for n in (2, 4, 8, 16, 32, 64)]
    size_rows = [{"size": s, "pop": 16, "n": 2, "loky_hill_climb_bytes": 1e3,
                  "cluster_hill_climb_bytes": 2e3, "loky_moving_bytes": 1e3,
                  "cluster_moving_bytes": 2e3 + (2 * centre if s > 10 else 0),
                  "loky_moving_s": 0.01, "cluster_moving_s":
                      gen(2, 16, 0) + b * (2e3 + (2 * centre if s > 10 else 0))}
                 for s in (10, 10**6)]
    return {"n": 2, "reps": 3, "machine": {"cpus": 2, "load_start": "1", "load_end": "1"},
            "bytes_source": "synthetic",
            "generations": [{"cost": c, "pop": 64, "n": 2, "loky_s": 0.1, "cluster_s": r * 0.1,
                             "ratio": r} for c, r in (("1ms", 1.1), ("10ms", 1.07))],
            "overheads": {"loky": {"per_generation_s": 1e-3, "per_task_s": 10e-6},
                          "cluster": {"per_generation_s": a0, "per_task_s": h}},
            "bytes": size_rows,
            "run_bytes": {"size": 10**6, "pop": 16, "generations": 5, "bytes": 9e6},
            "simulated": sim}


def test_the_cost_model_recovers_known_costs_and_predicts_unseen_sizes():
    result = analyse(synthetic())
    m = result["model"]
    assert m["a0_s"] == pytest.approx(2e-3) and m["a1_s"] == pytest.approx(0.25e-3)
    assert m["b_s_per_byte"] == pytest.approx(0.5e-9, rel=1e-3)
    assert all(abs(c["error"]) < 1e-9 for c in result["check"])  # fitted on n <= 8 only
    assert predict_time(m, 256, 1024, 0.01) == pytest.approx(
        2e-3 + 0.25e-3 * 256 + 4 * (0.01 + 50e-6))
    # this machine's floor: (client + workers CPU) / cores, from the lines fitted on n <= 8
    big = next(c for c in result["check"] if c["n"] == 64)
    floor = (1e-3 + 0.1e-3 * 64 + 2e-3 * 64) / 2
    assert big["machine_s"] == pytest.approx(max(floor, big["predicted_s"]))
    text = markdown(result)
    assert "| 64 | 256 |" in text and "256 workers" in text and "CPU floor" in text


def test_targets_are_judged_from_a_saved_run(tmp_path):
    saved = tmp_path / "saved.json"
    saved.write_text(json.dumps(synthetic()))
    out = tmp_path / "out"
    subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "cluster.py"),
                    "--render", str(saved), "--out", str(out)], check=True,
                   capture_output=True, env={**os.environ, "PYTHONPATH": ROOT})
    result = json.loads((out / "cluster.json").read_text())
    verdicts = [t["met"] for t in result["targets"]]
    assert verdicts == [True, False, True]  # 1.10 <= 1.25; 1.07 > 1.05; 9 MB < 16 MB
    assert "NOT met" in (out / "cluster.md").read_text()


@pytest.mark.slow
def test_cluster_benchmark_runs_end_to_end(tmp_path):
    pytest.importorskip("distributed")
    import runpy
    script = runpy.run_path(os.path.join(ROOT, "benchmarks", "cluster.py"), run_name="x")
    assert script["main"](["--tiny", "--out", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "cluster.json").read_text())
    assert {r["cost"] for r in result["generations"]} == {"trivial", "1ms", "10ms"}
    assert all(r["loky_s"] > 0 and r["cluster_s"] > 0 for r in result["generations"])
    assert [r["size"] for r in result["bytes"]] == [10, 1000]
    assert result["run_bytes"]["bytes"] > 0 and len(result["simulated"]) == 2
    assert "Dask against loky" in (tmp_path / "cluster.md").read_text()


def test_a_ray_run_renders_its_generation_times_and_their_targets(tmp_path):
    """A run on Ray measures generation times and overheads only: its report and
    targets leave out the bytes and the cost model, in files of its own."""
    import runpy
    saved = {k: v for k, v in synthetic().items()
             if k not in ("bytes", "run_bytes", "simulated")}
    saved.update(backend="Ray", bytes_source="not measured")
    (tmp_path / "saved.json").write_text(json.dumps(saved))
    script = runpy.run_path(os.path.join(ROOT, "benchmarks", "cluster.py"), run_name="x")
    assert script["main"](["--render", str(tmp_path / "saved.json"),
                           "--out", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "cluster-ray.json").read_text())
    assert [t["met"] for t in result["targets"]] == [True, False]  # 1.10; 1.07 > 1.05
    text = (tmp_path / "cluster-ray.md").read_text()
    assert "Ray against loky" in text and "| Ray / loky |" in text
    assert "Ray generation time <= 1.05x" in text and "Cost model" not in text


@pytest.mark.slow
def test_cluster_benchmark_runs_end_to_end_on_ray(tmp_path):
    pytest.importorskip("ray")
    import runpy
    script = runpy.run_path(os.path.join(ROOT, "benchmarks", "cluster.py"), run_name="x")
    assert script["main"](["--backend", "ray", "--tiny", "--out", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "cluster-ray.json").read_text())
    assert {r["cost"] for r in result["generations"]} == {"trivial", "1ms", "10ms"}
    assert all(r["loky_s"] > 0 and r["cluster_s"] > 0 for r in result["generations"])
    assert result["overheads"]["cluster"]["per_task_s"] >= 0
