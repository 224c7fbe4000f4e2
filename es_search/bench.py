"""``es-search bench``: how one generation of scoring scales with the workers here, for
scores of 0, 1 and 10 ms of pure-Python work (the full benchmark:
``benchmarks/scaling.py``)."""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path
from typing import Any, Sequence

import torch

from .agent import Agent
from .files import check_writable

COSTS_MS = (0, 1, 10)


def spin(loops: int) -> int:
    """``loops`` additions: fixed pure-Python work."""
    total = 0
    for i in range(loops):
        total += i
    return total


def calibrate(seconds: float) -> dict:
    """Loops of :func:`spin` that take ``seconds`` here (median of 7 trials)."""
    probe = 200_000
    spin(probe)
    per_loop = []
    for _ in range(7):
        began = time.perf_counter()
        spin(probe)
        per_loop.append((time.perf_counter() - began) / probe)
    ns = statistics.median(per_loop)
    loops = max(1, round(seconds / ns)) if seconds > 0 else 0
    return {"target_s": seconds, "loops": loops, "ns_per_loop": ns * 1e9,
            "spread": (max(per_loop) - min(per_loop)) / ns}


class BenchAgent(Agent):
    """``size`` float32 parameters; ``score()`` runs ``spin(loops)`` and reads one weight."""

    def __init__(self, size: int = 10, loops: int = 0):
        super().__init__()
        self.loops = int(loops)
        self.w = torch.nn.Parameter(torch.zeros(int(size)), requires_grad=False)

    def score(self, **kwargs: Any) -> float:
        spin(self.loops)
        return float(self.w[0])


def measure(n_values: Sequence[int] | None = None, population: int = 64, reps: int = 5) -> dict:
    """Median seconds of one generation per score cost and ``n_jobs``, and speed-ups."""
    import joblib
    from .candidates import Candidate
    from .evaluation import Engine
    n_cpus = joblib.cpu_count()  # what n_jobs=-1 uses: affinity and cgroup quotas
    n_values = sorted(set(n_values or range(1, n_cpus + 1)) | {1})
    if n_values[0] < 1 or n_values[-1] > n_cpus:
        raise ValueError(f"--n-jobs values go from 1 to the {n_cpus} cores of this machine")
    rows = []
    for cost in COSTS_MS:
        agent = BenchAgent(loops=calibrate(cost / 1e3)["loops"])
        block = []
        for n in n_values:
            with Engine(agent, seed=0, n_jobs=n) as ev:
                center = ev.local.get_flat()
                times = []
                for generation in range(reps + 1):  # the first warms the workers up
                    center = center.copy()
                    center[0] += 1e-3  # a new centre each generation, as a strategy's
                    began = time.perf_counter()
                    ev.score(generation, center, [Candidate("jitter", 0.1)] * population)
                    times.append(time.perf_counter() - began)
                path = ev.stats["last_path"] or "in-process"
            seconds = statistics.median(times[1:])
            block.append({"score_ms": cost, "n_jobs": n, "generation_s": seconds, "path": path})
            print(f"{cost:g} ms scores, n_jobs={n}: {seconds * 1e3:.1f} ms ({path})")
        for row in block:  # block[0]: n_jobs=1
            row["speedup"] = block[0]["generation_s"] / row["generation_s"]
        rows += block
    return {"cpus": n_cpus, "population": population, "reps": reps,
            "python": platform.python_version(), "torch": torch.__version__,
            "load_average": [round(x, 2) for x in os.getloadavg()], "rows": rows}


def table(result: dict) -> str:
    lines = [f"One generation of {result['population']} candidates on "
             f"{result['cpus']} cores (median of {result['reps']}):", "",
             "| score | n_jobs | generation | speed-up | path |", "|---|---|---|---|---|"]
    lines += [f"| {r['score_ms']:g} ms | {r['n_jobs']} | {r['generation_s'] * 1e3:.1f} ms | "
              f"{r['speedup']:.2f}x | {r['path']} |" for r in result["rows"]]
    return "\n".join(lines)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true",
                        help="2 timed generations per figure instead of 5")
    parser.add_argument("--out", default="bench-results", help="folder for bench.json")
    parser.add_argument("--n-jobs", default=None, metavar="LIST",
                        help="comma-separated worker counts (default: 1 to all cores)")


def main(args: argparse.Namespace) -> int:
    try:
        n_values = [int(x) for x in args.n_jobs.split(",")] if args.n_jobs else None
    except ValueError:
        raise ValueError(f"--n-jobs takes integers like 1,2,4; got {args.n_jobs!r}") from None
    out = Path(args.out)
    check_writable(f"--out {args.out}", out)
    result = measure(n_values, reps=2 if args.quick else 5)
    print("\n" + table(result))
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench.json").write_text(json.dumps(result, indent=1))
    print(f"wrote {out / 'bench.json'}")
    return 0
