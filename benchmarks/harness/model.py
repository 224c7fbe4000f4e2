"""Figures derived from the scaling benchmark's measurements, and the cost models.

:func:`derive` adds speedup, efficiency and overheads to each measured row;
:func:`fit_models` fits Amdahl's serial fraction and a per-generation + per-task overhead
model on the engine's parallel generations; :func:`predict` extrapolates both to more
cores. Nothing here measures: a saved ``scaling.json`` can be re-analysed anywhere.
"""
from __future__ import annotations

import math
import statistics
from typing import Sequence

import numpy as np

from .workloads import COSTS


def path_kind(row: dict) -> str:
    """``parallel``, ``sequential`` or ``mixed``: where the engine scored a row's generations.

    >>> path_kind({"paths": ["parallel", "parallel"]})
    'parallel'
    >>> path_kind({"paths": ["parallel", "sequential"]})
    'mixed'
    """
    kinds = sorted(set(row["paths"]))
    return kinds[0] if len(kinds) == 1 else "mixed"


def derive(rows: list[dict], ceil: dict[int, dict]) -> None:
    """Add speedup, efficiency, ratios and per-task overheads to each row, in place."""
    for r in rows:
        n, t1 = r["n"], r["engine1_s"]
        r["task_s"] = t1 / r["pop"]
        r["speedup"] = t1 / r["engine_s"]
        r["efficiency"] = r["speedup"] / n
        r["ceiling_efficiency"] = ceil[n]["efficiency"]
        r["efficiency_vs_ceiling"] = r["efficiency"] / ceil[n]["efficiency"]
        r["vs_blog"] = r["blog_s"] / r["engine_s"]
        r["vs_joblib"] = r["joblib_s"] / r["engine_s"]
        for name in ("engine", "blog", "joblib"):
            # core-seconds per task beyond scoring it in-process
            r[f"{name}_overhead_us"] = (n * r[f"{name}_s"] - t1) / r["pop"] * 1e6


def fit_models(rows: list[dict], ceil: dict[int, dict], overheads: dict | None) -> dict:
    """Amdahl's serial fraction (scores >= 1 ms), from the engine's parallel generations,
    and the overhead model's per-generation and per-task costs, measured directly
    (``overheads``: :func:`benchmarks.harness.measure.measure_overheads`)."""
    par = [r for r in rows if r["n"] > 1 and r["paths"] and
           all(p == "parallel" for p in r["paths"])]
    # Amdahl: 1/S = f + (1 - f)/n  <=>  1/S - 1/n = f (1 - 1/n), with S the speedup
    # divided by the ceiling's efficiency at n: the engine's own serial part, apart from
    # what the machine (other load, shared caches, turbo) takes from n processes. Fitted
    # at the largest population measured, the one the predictions are for: a generation's
    # fixed costs weigh more in a small one (population 8 would set 256's serial part)
    amdahl = {}
    for cost in COSTS:
        measured = [r for r in par if r["cost"] == cost and r["size"] <= 10]
        top = max((r["pop"] for r in measured), default=None)
        pts = [(1 - 1 / r["n"], ceil[r["n"]]["efficiency"] / r["speedup"] - 1 / r["n"])
               for r in measured if r["pop"] == top]
        if pts:
            f = sum(x * y for x, y in pts) / sum(x * x for x, _ in pts)
            amdahl[cost] = min(1.0, max(0.0, f))
    # overhead model: T(n) = ceil(P/n) t / c(n) + a + h ceil(P/n), a and h measured on
    # trivial scores (fitted on the scored generations, they drown in 1% of 10 ms tasks)
    a = h = None
    if overheads:
        a, h = overheads["per_generation_s"], overheads["per_task_s"]
    return {"amdahl_serial_fraction": amdahl, "overhead_per_generation_s": a,
            "overhead_per_task_s": h, "points": len((overheads or {}).get("points", ()))}


def predict(rows: list[dict], model: dict, cores: Sequence[int] = (16, 64, 256)) -> list[dict]:
    """Speedup predicted by both models on ``cores`` workers, per score cost."""
    out = []
    top = max(r["pop"] for r in rows)
    for cost in COSTS:
        base = [r for r in rows if r["cost"] == cost and r["pop"] == top and r["n"] == 1
                and r["size"] <= 10]
        if not base:
            continue
        t = base[0]["task_s"]
        row = {"cost": cost, "pop": top, "task_ms": t * 1e3}
        f = model["amdahl_serial_fraction"].get(cost)
        a, h = model["overhead_per_generation_s"], model["overhead_per_task_s"]
        if a is not None:  # a cost measured below 0 (noise) predicts as none
            a, h = max(a, 0.0), max(h, 0.0)
        for c in cores:
            w = min(c, top)  # no more tasks than candidates run at once
            row[f"amdahl_{c}"] = None if f is None else 1 / (f + (1 - f) / w)
            if a is not None:
                k = math.ceil(top / c)
                row[f"overhead_{c}"] = top * t / (k * t + a + h * k)
        out.append(row)
    return out


def analyse(result: dict) -> dict:
    """Derive each row's figures, fit the models and predict, in ``result``; returns it."""
    derive(result["rows"], result["ceiling"])
    result["model"] = fit_models(result["rows"], result["ceiling"], result.get("overheads"))
    result["predictions"] = predict(result["rows"], result["model"])
    return result
