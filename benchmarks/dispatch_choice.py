"""Does the engine use the workers for short scores? (~5 ms of CPU per
score, population 8, n_jobs=2, a 4-generation run.)

    PYTHONPATH=. flock /work/coord/bench.lock python benchmarks/dispatch_choice.py

For each try, a fresh Evaluator scores the starting agent and then ``--generations``
generations, the way ``run()`` does; printed: which path each generation took, the
policy's estimates, and the wall time of the generations against scoring them all in
this process (n_jobs=1).
"""
import argparse
import time

import torch

import es_search
from es_search.candidates import Candidate


class Busy(es_search.Agent):
    """``score()`` spins the CPU for ``seconds``."""

    def __init__(self, seconds=0.005):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(4))
        self.seconds = seconds

    def score(self):
        end = time.perf_counter() + self.seconds
        x = 0
        while time.perf_counter() < end:
            x += 1
        return float(self.w.sum())


def one_try(n_jobs, seconds, population, generations):
    paths = []
    with es_search.Evaluator(Busy(seconds), seed=0, n_jobs=n_jobs) as ev:
        center = ev.local.get_flat()
        ev.score(-1, center, [Candidate("center")] * 2)
        began = time.perf_counter()
        for generation in range(generations):
            ev.score(generation, center, [Candidate("jitter", 0.1)] * population)
            paths.append(ev.stats["last_path"] or "in-process")
        wall = time.perf_counter() - began
        stats = ev.stats
    return paths, wall, stats


def main():
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--seconds", type=float, default=0.005)
    parser.add_argument("--population", type=int, default=8)
    parser.add_argument("--generations", type=int, default=4)
    parser.add_argument("--tries", type=int, default=4)
    args = parser.parse_args()
    all_parallel = 0
    for t in range(args.tries):
        paths, wall, stats = one_try(2, args.seconds, args.population, args.generations)
        _, alone, _ = one_try(1, args.seconds, args.population, args.generations)
        all_parallel += all(p == "parallel" for p in paths)
        shown = (" ".join(paths) if len(paths) <= 8 else
                 f"{paths.count('parallel')} parallel, {paths.count('sequential')} in-process")
        print(f"try {t}: {shown}; {wall * 1e3:.1f} ms vs n_jobs=1 "
              f"{alone * 1e3:.1f} ms (task {stats['task_seconds'] * 1e3:.2f} ms, "
              f"overhead {stats['overhead_seconds'] * 1e3:.2f} ms)")
    print(f"{all_parallel} of {args.tries} tries used the workers in every generation")


if __name__ == "__main__":
    main()
