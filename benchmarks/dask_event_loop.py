"""Where a Dask worker should run es_search's calls: beside its event loop (in the actor
thread, Dask's default) or on it (``separate_thread=False``, es_search's choice for
short calls). Both against loky, in one process, generations interleaved.

    PYTHONPATH=$PWD python benchmarks/dask_event_loop.py                  # 10 ms, 15 gens
    PYTHONPATH=$PWD python benchmarks/dask_event_loop.py --ms 1 --generations 25

One LocalCluster of ``--workers`` single-thread processes and a loky pool of as many;
``--reps`` runs, each printing the median generation time of each way and the ratios
to loky. The scores are :func:`es_search.bench.spin` calibrated to ``--ms``
in this process. Timing: run it alone (``flock /work/coord/bench.lock`` here).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from es_search.bench import BenchAgent, calibrate  # noqa: E402
from es_search.candidates import Candidate  # noqa: E402
from es_search.front import Evaluator  # noqa: E402


def one_run(ms: float, generations: int, workers: int, population: int) -> dict:
    agent = BenchAgent(size=10, loops=calibrate(ms / 1e3)["loops"])
    candidates = [Candidate("jitter", 0.1)] * population
    loky = Evaluator(agent, seed=0, n_jobs=workers, sequential_fallback=False).__enter__()
    dask = Evaluator(agent, seed=0, n_jobs=workers, backend="dask",
                     sequential_fallback=False).__enter__()
    # the same Dask pool both ways: only where its calls run differs
    ways = {"loky": (loky, None), "dask, beside the loop": (dask, 0.0),
            "dask, on the loop": (dask, float("inf"))}
    center = loky.local.get_flat()
    times: dict[str, list[float]] = {name: [] for name in ways}
    try:
        for g in range(generations):
            order = list(ways) if g % 2 == 0 else list(reversed(ways))
            for name in order:
                evaluator, limit = ways[name]
                if limit is not None:
                    evaluator.pool.loop_call_seconds = limit
                began = time.perf_counter()
                evaluator.score(g, center + g * 1e-6, candidates)
                times[name].append(time.perf_counter() - began)
    finally:
        dask.close()
        loky.close()
    return {name: statistics.median(t[1:]) for name, t in times.items()}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--ms", type=float, default=10.0, help="milliseconds per score")
    parser.add_argument("--generations", type=int, default=15)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--population", type=int, default=64)
    args = parser.parse_args(argv)
    from distributed import Client, LocalCluster
    with LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster):
        for rep in range(args.reps):
            med = one_run(args.ms, args.generations, args.workers, args.population)
            loky = med["loky"]
            print(f"run {rep + 1}: {args.ms:g} ms scores, population {args.population}, "
                  f"{args.workers} workers, {args.generations} interleaved generations: "
                  + ", ".join(f"{name} {m * 1e3:.1f} ms" for name, m in med.items())
                  + "; Dask / loky: beside the loop "
                  f"{med['dask, beside the loop'] / loky:.3f}, on the loop "
                  f"{med['dask, on the loop'] / loky:.3f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
