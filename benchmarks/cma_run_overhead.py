"""es_search.run's cost per evaluation of a cheap black-box function, against pycma's own
ask/tell loop on the same search (issue 30's target: at most 1.5x).

    PYTHONPATH=$PWD python benchmarks/cma_run_overhead.py
    PYTHONPATH=$PWD python benchmarks/cma_run_overhead.py --dim 5 --generations 200 --rounds 5
    PYTHONPATH=$PWD python benchmarks/cma_run_overhead.py --profile   # cProfile of one run

One round: ``es_search.run(Function(sphere, x0), strategy="cma-es", n_jobs=1,
generations=G, progress=False)`` (no run folder, the defaults otherwise) and pycma's
``ask``/``tell`` loop for the same function, start, sigma, population (pycma's default,
4 + 3 ln d) and ``G`` generations, in an order that alternates between rounds; both
timings include building pycma's object. A third loop, "the promise alone", is pycma's
loop with each evaluation done as a task of es_search's must be and nothing else: the
generation's task seeds derived, the global RNGs seeded with the task's, the vector set
into the agent and its ``score()`` called without gradients (no strategy layer, engine,
record or check): what the per-task seeding the design promises costs before any of
es_search's own layers, the floor of any ratio. Each divides by the ``G`` generations'
evaluations; the run's own few more (the starting point, the repeat check, the end's
selection: ~20, about 1% at the defaults) count in its time, as a user pays them.
Prints the median microseconds per evaluation of each over ``--rounds`` rounds and
their ratio, in wall-clock time and in this process's CPU time (steadier on a shared
machine), with the load average. Everything runs in this process, on one core.
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


def ours(dim: int, generations: int) -> tuple[float, float]:
    agent = Function(sphere, x0=np.full(dim, 1.0))
    began, cpu = time.perf_counter(), time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        es_search.run(agent, generations=generations, strategy="cma-es", sigma=0.5,
                      population=population(dim), n_jobs=1, progress=False)
    n = generations * population(dim)
    return (time.perf_counter() - began) / n, (time.process_time() - cpu) / n


def theirs(dim: int, generations: int) -> tuple[float, float]:
    import cma
    began, cpu = time.perf_counter(), time.process_time()
    es = cma.CMAEvolutionStrategy(np.full(dim, 1.0), 0.5,
                                  {"verbose": -9, "popsize": population(dim), "seed": 1})
    for _ in range(generations):
        solutions = es.ask()
        es.tell(solutions, [sphere(x) for x in solutions])
    n = generations * population(dim)
    return (time.perf_counter() - began) / n, (time.process_time() - cpu) / n


def promise(dim: int, generations: int) -> tuple[float, float]:
    import cma
    import torch
    from es_search.seeding import seed_global_rngs, task_seeds
    agent = Function(sphere, x0=np.full(dim, 1.0))
    began, cpu = time.perf_counter(), time.process_time()
    es = cma.CMAEvolutionStrategy(np.full(dim, 1.0), 0.5,
                                  {"verbose": -9, "popsize": population(dim), "seed": 1})
    with torch.no_grad():
        for generation in range(generations):
            solutions, values = es.ask(), []
            for x, seed in zip(solutions, task_seeds(0, generation, 0, len(solutions))):
                seed_global_rngs(seed)
                agent.set_flat(x)
                values.append(-agent.score())
            es.tell(solutions, values)
    n = generations * population(dim)
    return (time.perf_counter() - began) / n, (time.process_time() - cpu) / n


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
    times: dict[str, list[tuple[float, float]]] = {"ours": [], "theirs": [], "promise": []}
    for r in range(args.rounds):
        order = (("ours", ours), ("theirs", theirs), ("promise", promise))
        for name, fn in (order if r % 2 == 0 else order[::-1]):
            times[name].append(fn(args.dim, args.generations))
    print(f"{args.dim}-d sphere, population {population(args.dim)}, {args.generations} "
          f"generations, median of {args.rounds} (load average "
          f"{os.getloadavg()[0]:.2f}):")
    for k, clock in enumerate(("wall", "CPU")):
        mine, pycma, floor = (statistics.median(t[k] for t in times[name]) * 1e6
                              for name in ("ours", "theirs", "promise"))
        print(f"  {clock:4s} es_search.run {mine:.1f} us per evaluation, pycma ask/tell "
              f"{pycma:.1f} us, ratio {mine / pycma:.2f}; the promise alone {floor:.1f} "
              f"us, ratio {floor / pycma:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
