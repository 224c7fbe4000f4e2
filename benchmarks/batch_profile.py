"""Where a batched group's time goes, in this process (no workers): one group of the
built-in CartPole or Pendulum against the same candidates scored one by one.

    python benchmarks/batch_profile.py                 # pendulum and cartpole, group 32
    python benchmarks/batch_profile.py --group 16

For each problem (Pendulum from its starting policy; CartPole from the starting policy
and from a balancing controller, as ``benchmarks/batching.py``), the best of a few
repetitions, in microseconds per group, of:

- ``task_seeds``: the group's task seeds, at once (``es_search.seeding.task_seeds``);
- ``build_group``: the stacked weights of the group (``es_search.candidates``);
- ``streams``: ``candidate_rngs`` for the group (the built-ins' per-candidate streams);
- ``score_batch``: the built-in's ``score_batch`` on the group;
- ``group``: the whole group through the engine (``worker.score_groups``);
- ``alone``: the same candidates one ``score()`` at a time (``worker.score_alone``);

and ``alone / group``, the in-process speed-up (a generation on workers adds one round
trip per chunk to both). Timing: run it under ``flock /work/coord/bench.lock``.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from es_search import worker  # noqa: E402
from es_search.batched import candidate_rngs  # noqa: E402
from es_search.candidates import Candidate, build_group  # noqa: E402
from es_search.problems import batched_control  # noqa: E402
from es_search.seeding import task_seeds  # noqa: E402

BALANCING = torch.tensor([[0.0, 0.0, -20.0, -20.0], [0.0, 0.0, 20.0, 20.0]])


def best(fn, reps: int = 5, inner: int = 3) -> float:
    """The fastest of ``reps`` runs of ``inner`` calls, in microseconds per call."""
    times = []
    for _ in range(reps):
        began = time.perf_counter()
        for _ in range(inner):
            fn()
        times.append((time.perf_counter() - began) / inner)
    return min(times) * 1e6


def profile(name: str, group: int, reps: int) -> dict:
    problem, stage = name.split("-")
    cls = batched_control.Pendulum if problem == "pendulum" else batched_control.CartPole
    batched, alone = cls(score_batch_size=group), cls(score_batch_size=0)
    if stage == "balanced":
        for agent in (batched, alone):
            agent.set_weights({"layers.0.weight": BALANCING})
    sigma = {"pendulum-start": 0.2, "cartpole-start": 0.5, "cartpole-balanced": 0.1}[name]
    center = batched.get_flat()
    candidates = [Candidate("jitter", sigma)] * group
    payload = worker.Payload(center, {}, None)
    seed, generation = 0, 3
    seeds = task_seeds(seed, generation, 0, group)
    with torch.no_grad(), worker.single_torch_thread():
        params = build_group(batched, center, candidates, seeds, seed, generation)
        row = {
            "task_seeds": best(lambda: task_seeds(seed, generation, 0, group), reps, 20),
            "build_group": best(lambda: build_group(batched, center, candidates, seeds, seed,
                                                    generation), reps, 20),
            "streams": best(lambda: candidate_rngs(seeds, 1), reps, 20),
            "score_batch": best(lambda: batched.score_batch(params, seeds), reps),
            "group": best(lambda: worker.score_groups(batched, payload, candidates, seed,
                                                      generation, 0), reps),
            "alone": best(lambda: worker.score_alone(alone, payload, candidates, seed,
                                                     generation, 0), reps, 1),
        }
    row["alone / group"] = row["alone"] / row["group"]
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--group", type=int, default=32, help="candidates per group")
    parser.add_argument("--reps", type=int, default=5, help="repetitions (the best counts)")
    parser.add_argument("--problems", default="pendulum-start,cartpole-start,cartpole-balanced")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    for name in args.problems.split(","):
        row = profile(name, args.group, args.reps)
        shown = ", ".join(f"{k} {v:,.0f} us" for k, v in row.items() if k != "alone / group")
        print(f"{name} (group {args.group}): {shown}; alone / group {row['alone / group']:.1f}x",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
