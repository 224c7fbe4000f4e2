"""What a persistent-worker transport would save on a short batched generation.

    python benchmarks/persistent_loops.py                 # 60 rounds
    python benchmarks/persistent_loops.py --rounds 200

Batched Pendulum (the built-in, groups of 32), population 64, 2 workers. Each round
times, one after the other (interleaved, medians over the rounds after 10 warm ones):

- ``loops``: 2 forked processes, each looping on a pipe: it receives the centre and its
  group, scores it with the engine's own ``worker.score_groups`` and sends the scores
  back. No executor between the two: the floor of a persistent-loop transport (no
  timeouts, no dead-worker handling; an experiment, not a pool es_search offers);
- ``loky``: ``es_search.Evaluator`` on loky, as ``run()`` scores a generation;
- ``alone``: the same Evaluator path with ``score_batch_size=0`` (one ``score()`` per
  candidate), the per-candidate path issue 11's 20x target is measured against.

Every round checks that ``loops`` and ``loky`` give the same scores. Needs the ``fork``
start method (Linux). Time it alone: ``flock /work/coord/bench.lock python ...``.
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from es_search.bench.measure import load_average  # noqa: E402
from es_search.candidates import Candidate  # noqa: E402
from es_search.evaluation import Evaluator  # noqa: E402
from es_search.problems.batched_control import Pendulum  # noqa: E402

GROUP = 32


def serve(conn) -> None:
    """A worker's loop: (centre, candidates, seed, generation, start) -> scores."""
    from es_search.worker import Payload, score_groups, single_torch_thread
    agent = Pendulum(score_batch_size=GROUP)
    while True:
        message = conn.recv()
        if message is None:
            return
        center, candidates, seed, generation, start = message
        with single_torch_thread():
            scores, _ = score_groups(agent, Payload(center, {}, None), candidates, seed,
                                     generation, start)
        conn.send(scores)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=60)
    args = parser.parse_args(argv)
    population, workers, warm = 64, 2, 10
    candidates = [Candidate("noise", 0.2, sign, k) for k in range(population // 2)
                  for sign in (1.0, -1.0)]
    context = mp.get_context("fork")
    pipes, processes = [], []
    for _ in range(workers):
        ours, theirs = context.Pipe()
        process = context.Process(target=serve, args=(theirs,), daemon=True)
        process.start()
        pipes.append(ours)
        processes.append(process)
    batched = Evaluator(Pendulum(score_batch_size=GROUP), seed=0, n_jobs=workers,
                        sequential_fallback=False).__enter__()
    alone = Evaluator(Pendulum(score_batch_size=0), seed=0, n_jobs=workers,
                      sequential_fallback=False).__enter__()
    times: dict[str, list[float]] = {"loops": [], "loky": [], "alone": []}
    try:
        start = batched.local.get_flat()
        for g in range(args.rounds + warm):
            center = start + g * 1e-9  # a new centre every generation, as in a run
            began = time.perf_counter()
            for i, conn in enumerate(pipes):
                conn.send((center, candidates[i * GROUP:(i + 1) * GROUP], 0, g, i * GROUP))
            looped = [s for conn in pipes for s in conn.recv()]
            times["loops"].append(time.perf_counter() - began)
            began = time.perf_counter()
            scored = batched.score(g, center, candidates)
            times["loky"].append(time.perf_counter() - began)
            began = time.perf_counter()
            alone.score(g, center, candidates)
            times["alone"].append(time.perf_counter() - began)
            if looped != list(scored):
                raise AssertionError(f"generation {g}: the loops' scores differ from loky's")
    finally:
        for conn in pipes:
            conn.send(None)
        for process in processes:
            process.join(5)
        batched.__exit__(None, None, None)
        alone.__exit__(None, None, None)
    median = {k: statistics.median(v[warm:]) for k, v in times.items()}
    print(f"batched Pendulum, population {population}, {workers} workers, "
          f"{args.rounds} rounds (median ms per generation):")
    for path in ("loops", "loky", "alone"):
        print(f"  {path:5} {median[path] * 1e3:8.3f} ms   alone / {path}: "
              f"{median['alone'] / median[path]:5.1f}x")
    print(f"persistent loops save {(median['loky'] - median['loops']) * 1e3:.3f} ms a "
          f"generation ({1 - median['loops'] / median['loky']:.1%}); load average "
          f"{load_average()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
