"""A bare pipe loop against the engine's worker loops on a short batched generation.

    python benchmarks/persistent_loops.py                 # 60 rounds
    python benchmarks/persistent_loops.py --rounds 200
    python benchmarks/persistent_loops.py --idle 0 20 80   # workers left idle between generations

Batched Pendulum (the built-in, groups of 32), population 64, 2 workers. Each round
times, one after the other (interleaved, medians over the rounds after 10 warm ones):

- ``loops``: 2 forked processes, each looping on a pipe: it receives the centre and its
  group, scores it with the engine's own ``worker.score_groups`` and sends the scores
  back: the floor of the engine's own worker loops (``es_search/pools/loops.py``), with
  no timeouts, retries or payload files;
- ``loky``: ``es_search.Evaluator`` on loky (its worker loops), as ``run()`` scores a
  generation;
- ``alone``: the same Evaluator path with ``score_batch_size=0`` (one ``score()`` per
  candidate), the per-candidate path the batching target's 20x is measured against.

Every round checks that ``loops`` and ``loky`` give the same scores. Needs the ``fork``
start method (Linux).

``--idle MS ...``: only the ``loops`` path, with this process busy (a Python loop, as a
strategy's ``tell`` or the per-candidate path would keep it) for MS milliseconds before
each generation, so the workers sit idle that long; prints the generation and the
slowest worker's own time for its group. On this project's 2-core virtual machines a
worker left idle wakes late and runs its next group slower (two runs, 2026-11-30,
before the engine's worker loops, figures in that commit's note, idle 0 / 20 / 80 ms: the generation 4.4 / 6.5 / 9.2 and 4.1 / 5.0 / 8.6 ms, the
slowest worker's own group 4.1 / 4.9 / 7.0 and 3.9 / 4.5 / 4.8 ms; the same group run
back to back in one process: ~3.6 ms): a short batched generation pays for waking its
workers, whatever the transport. Time it alone: ``flock /work/coord/bench.lock python ...``.
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from benchmarks.harness.measure import load_average  # noqa: E402
from es_search.candidates import Candidate  # noqa: E402
from es_search.front import Evaluator  # noqa: E402
from es_search.problems.batched_control import Pendulum  # noqa: E402

GROUP = 32


def serve(conn) -> None:
    """A worker's loop: (centre, candidates, seed, generation, start) -> scores."""
    from es_search.seeding import single_torch_thread
    from es_search.worker import Payload, score_groups
    agent = Pendulum(score_batch_size=GROUP)
    while True:
        message = conn.recv()
        if message is None:
            return
        center, candidates, seed, generation, start = message
        began = time.perf_counter()
        with single_torch_thread():
            scores, _ = score_groups(agent, Payload(center, {}, None), candidates, seed,
                                     generation, start)
        conn.send((scores, time.perf_counter() - began))


def busy(milliseconds: float) -> None:
    """Keep this process busy (a Python loop) for ``milliseconds``."""
    end = time.perf_counter() + milliseconds / 1e3
    while time.perf_counter() < end:
        pass


def loop_generation(pipes, center, candidates, generation: int) -> tuple[list, float]:
    """One generation on the loops, a group per loop: the scores, in order, and the
    slowest loop's own seconds for its group."""
    for i, conn in enumerate(pipes):
        conn.send((center, candidates[i * GROUP:(i + 1) * GROUP], 0, generation, i * GROUP))
    answers = [conn.recv() for conn in pipes]
    return [s for scores, _ in answers for s in scores], max(t for _, t in answers)


def stop_loops(pipes, processes) -> None:
    for conn in pipes:
        conn.send(None)
    for process in processes:
        process.join(5)


def idle_rounds(pipes, candidates, center, idle_ms: float, rounds: int, warm: int) -> None:
    """The loops path only, this process busy ``idle_ms`` before each generation."""
    total, inside = [], []
    for g in range(rounds + warm):
        busy(idle_ms)
        began = time.perf_counter()
        _, slowest = loop_generation(pipes, center + g * 1e-9, candidates, g)
        total.append(time.perf_counter() - began)
        inside.append(slowest)
    print(f"  workers idle {idle_ms:5.1f} ms before each generation: generation "
          f"{statistics.median(total[warm:]) * 1e3:6.3f} ms, the slowest worker's group "
          f"{statistics.median(inside[warm:]) * 1e3:6.3f} ms")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--idle", type=float, nargs="+", metavar="MS",
                        help="only the loops path, the workers left idle MS ms before "
                             "each generation (several values: one after the other)")
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
    if args.idle:
        center = Pendulum().get_flat()
        print(f"batched Pendulum, population {population}, {workers} persistent worker "
              f"loops, {args.rounds} rounds (medians):")
        try:
            for idle_ms in args.idle:
                idle_rounds(pipes, candidates, center, idle_ms, args.rounds, warm)
        finally:
            stop_loops(pipes, processes)
        print(f"load average {load_average()}")
        return 0
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
            looped, _ = loop_generation(pipes, center, candidates, g)
            times["loops"].append(time.perf_counter() - began)
            began = time.perf_counter()
            scored = batched.score(g, center, candidates).scores
            times["loky"].append(time.perf_counter() - began)
            began = time.perf_counter()
            alone.score(g, center, candidates)
            times["alone"].append(time.perf_counter() - began)
            if looped != list(scored):
                raise AssertionError(f"generation {g}: the loops' scores differ from loky's")
    finally:
        stop_loops(pipes, processes)
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
