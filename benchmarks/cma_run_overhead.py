"""es_search.run's cost per evaluation of a cheap black-box function, against pycma's own
ask/tell loop on the same search (issue 30's target: at most 1.5x).

    PYTHONPATH=$PWD python benchmarks/cma_run_overhead.py
    PYTHONPATH=$PWD python benchmarks/cma_run_overhead.py --dim 5 --generations 200 --rounds 5
    PYTHONPATH=$PWD python benchmarks/cma_run_overhead.py --profile   # cProfile of one run

One round: ``es_search.run(Function(sphere, x0), strategy="cma-es", n_jobs=1,
generations=G, progress=False)`` (no run folder) and pycma's ``ask``/``tell`` loop for
the same function, dimension, population (pycma's default, 4 + 3 ln d) and ``G``
generations, in an order that alternates between rounds. Prints the median
microseconds per evaluation of each over ``--rounds`` rounds and their ratio.
Everything runs in this process, on one core.
"""
from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import statistics
import sys
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import es_search  # noqa: E402
from es_search.problems import Function  # noqa: E402


def sphere(x: np.ndarray) -> float:
    return float((x * x).sum())


def population(dim: int) -> int:
    return 4 + int(3 * np.log(dim))  # pycma's default popsize


def ours(dim: int, generations: int) -> float:
    agent = Function(sphere, x0=np.full(dim, 1.0))
    began = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        es_search.run(agent, generations=generations, strategy="cma-es", sigma=0.5,
                      population=population(dim), n_jobs=1, progress=False)
    return (time.perf_counter() - began) / (generations * population(dim))


def theirs(dim: int, generations: int) -> float:
    import cma
    began = time.perf_counter()
    es = cma.CMAEvolutionStrategy(np.full(dim, 1.0), 0.5,
                                  {"verbose": -9, "popsize": population(dim), "seed": 1})
    for _ in range(generations):
        solutions = es.ask()
        es.tell(solutions, [sphere(x) for x in solutions])
    return (time.perf_counter() - began) / (generations * population(dim))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--dim", type=int, default=5, help="dimension (default 5)")
    parser.add_argument("--generations", type=int, default=200,
                        help="generations per timing (default 200)")
    parser.add_argument("--rounds", type=int, default=5,
                        help="timings of each, interleaved; the median counts (default 5)")
    parser.add_argument("--profile", action="store_true",
                        help="print cProfile's top functions of one es_search run instead")
    args = parser.parse_args(argv)
    if args.profile:
        ours(args.dim, 5)  # imports (pycma, scipy) and first calls: not profiled
        profile = cProfile.Profile()
        profile.runcall(ours, args.dim, args.generations)
        pstats.Stats(profile).sort_stats("tottime").print_stats(25)
        return 0
    ours(args.dim, 5), theirs(args.dim, 5)  # imports and first calls, not timed
    times: dict[str, list[float]] = {"ours": [], "theirs": []}
    for r in range(args.rounds):
        order = (("ours", ours), ("theirs", theirs))
        for name, fn in (order if r % 2 == 0 else order[::-1]):
            times[name].append(fn(args.dim, args.generations))
    mine, pycma = (statistics.median(times[k]) * 1e6 for k in ("ours", "theirs"))
    print(f"{args.dim}-d sphere, population {population(args.dim)}, {args.generations} "
          f"generations, median of {args.rounds}: es_search.run {mine:.1f} us per "
          f"evaluation, pycma ask/tell {pycma:.1f} us, ratio {mine / pycma:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
