"""What es_search's cma-es strategy costs per generation beyond pycma's own ask/tell.

    PYTHONPATH=$PWD python benchmarks/cma_overhead.py                # 100 and 2,000 weights
    PYTHONPATH=$PWD python benchmarks/cma_overhead.py --weights 5000 --generations 4

The strategy keeps pycma's object in an immutable, picklable state (checkpoints hold
it): live, pickled every 64th tell and when the state is pickled. For each ``--weights`` n, one round times ``--generations``
generations of ask/tell on a cheap quadratic (population 16, no workers, no run folder)
through ``es_search.strategies.CMAES`` and through pycma directly, in an order that
alternates between rounds; it prints the median milliseconds per generation of each over
``--rounds`` rounds and their ratio. Both search the same function from the same start
with the same population; their samples differ (es_search seeds each generation from
the run's seed). Run it alone (``flock /work/coord/bench.lock`` here).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from es_search.strategies import CMAES  # noqa: E402


def quadratic(x: np.ndarray) -> float:
    return float(((x - 3.0) ** 2).sum())


def ours(n: int, generations: int) -> tuple[float, np.ndarray]:
    strategy = CMAES(population=16, sigma=0.5)
    state = strategy.init(np.zeros(n), -quadratic(np.zeros(n)), seed=0)
    began = time.perf_counter()
    for g in range(generations):
        candidates = strategy.ask(state, g)
        state = strategy.tell(state, g, candidates,
                              [-quadratic(c.vector) for c in candidates], None)
    return (time.perf_counter() - began) / generations, state.center


def theirs(n: int, generations: int) -> tuple[float, np.ndarray]:
    import cma
    es = cma.CMAEvolutionStrategy(np.zeros(n), 0.5, {"verbose": -9, "popsize": 16,
                                                     "seed": 1})
    began = time.perf_counter()
    for _ in range(generations):
        solutions = es.ask()
        es.tell(solutions, [quadratic(x) for x in solutions])
    return (time.perf_counter() - began) / generations, np.asarray(es.mean)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--weights", type=int, nargs="+", default=[100, 2000],
                        help="numbers of evolved values (default 100 2000)")
    parser.add_argument("--generations", type=int, default=8,
                        help="generations per timing (default 8)")
    parser.add_argument("--rounds", type=int, default=5,
                        help="timings of each, interleaved; the median counts (default 5)")
    args = parser.parse_args(argv)
    print("| weights | es_search cma-es, ms per generation | pycma directly | ratio |")
    print("|---|---|---|---|")
    for n in args.weights:
        times: dict[str, list[float]] = {"ours": [], "theirs": []}
        for r in range(args.rounds):
            order = (("ours", ours), ("theirs", theirs))
            for name, fn in (order if r % 2 == 0 else order[::-1]):
                seconds, _ = fn(n, args.generations)
                times[name].append(seconds)
        mine, pycma = (statistics.median(times[k]) for k in ("ours", "theirs"))
        print(f"| {n:,} | {mine * 1e3:.1f} | {pycma * 1e3:.1f} | {mine / pycma:.2f} |",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
