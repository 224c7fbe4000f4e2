"""Where a batched group's time goes, in this process (no workers): one group of the
built-in CartPole or Pendulum against the same candidates scored one by one.

    python benchmarks/batch_profile.py                 # pendulum and cartpole, group 32
    python benchmarks/batch_profile.py --group 16

For each problem (Pendulum from its starting policy; CartPole, 3 episodes per score,
from the starting policy and from a balancing controller: the agents, centres and sigmas
of ``benchmarks/batching.py``), the best of a few
repetitions, in microseconds per group, of:

- ``task_seeds``: the group's task seeds, at once (``es_search.seeding.task_seeds``);
- ``build_group``: the stacked weights of the group (``es_search.candidates``);
- ``streams``: ``candidate_rngs`` for the group (the built-ins' per-candidate streams);
- ``score_batch``: the built-in's ``score_batch`` on the group;
- ``group``: the whole group through the engine (``worker.score_groups``);
- ``alone``: the same candidates one ``score()`` at a time (``worker.score_alone``);

and ``alone / group``, the in-process speed-up (a generation on workers adds one round
trip per chunk to both). Then the loop iterations (steps of the whole vectorised
environment) of ``--generations`` generations of ``--workers`` groups (a population of 64
on 2 workers by default, one group each), against those of the same candidates one by
one (one candidate's episodes are stepped together too), summed and of the slowest
worker per generation: the most batching can save before the cost of a step. A group
steps until its longest episode ends, so for CartPole's short, uneven starting episodes
this bounds ``alone / group`` well under the group size. For CartPole also the iterations the same episodes would take
on a pool of half and a third as many rows, each row handed the group's next waiting
episode when its own ends (:func:`refilled`, from the episodes' lengths: an episode's
steps do not depend on the row that runs it): all of a group's episodes start at once,
so a pool of fewer rows only adds iterations. Timing: run it under
``flock /work/coord/bench.lock``.
"""
from __future__ import annotations

import argparse
import heapq
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from es_search import worker  # noqa: E402
from es_search.batched import candidate_rngs  # noqa: E402
from es_search.candidates import Candidate, build_group  # noqa: E402
from benchmarks.harness.batching import CASES, centre, make_agent  # noqa: E402
from es_search.seeding import single_torch_thread, task_seeds  # noqa: E402


def best(fn, reps: int = 5, inner: int = 3) -> float:
    """The fastest of ``reps`` runs of ``inner`` calls, in microseconds per call."""
    times = []
    for _ in range(reps):
        began = time.perf_counter()
        for _ in range(inner):
            fn()
        times.append((time.perf_counter() - began) / inner)
    return min(times) * 1e6


def refilled(lengths, slots: int) -> int:
    """Loop iterations of episodes of ``lengths`` steps on ``slots`` rows, each row
    taking the next waiting episode (in order) at the step after its own ends."""
    free = [0] * slots  # the iteration after which each row is free
    for length in lengths:
        heapq.heapreplace(free, free[0] + int(length))
    return max(free)


TIMED = ("task_seeds", "build_group", "streams", "score_batch", "group", "alone")


def profile(name: str, group: int, reps: int, generations: int = 10,
            workers: int = 2) -> dict:
    problem, stage = name.split("-")
    batched, alone = make_agent(problem, "batched", group), make_agent(problem, "alone", group)
    sigma = CASES[(problem, stage)][0]
    center = centre(batched, stage)
    for agent in (batched, alone):
        agent.set_flat(center)
    candidates = [Candidate("jitter", sigma)] * group
    payload = worker.Payload(center, {}, None)
    seed, generation = 0, 3
    seeds = task_seeds(seed, generation, 0, group)
    with torch.no_grad(), single_torch_thread():
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
    row.update(iterations(batched, alone, center, candidates, seed, generation,
                          generations, workers, problem == "cartpole"))
    return row


def iterations(batched, alone, center, candidates, seed: int, first: int, generations: int,
               workers: int, refill: bool) -> dict:
    """Loop iterations (steps of the whole vectorised environment) of ``generations``
    generations of ``workers`` groups (a population cut one group per worker): the
    groups' and their candidates' one by one (each a group of one, its episodes stepped
    together: the same scores), summed (one worker) and of the slowest worker per
    generation; with ``refill``, the groups' on pools of half and a third of their rows
    (:func:`refilled`; CartPole: a return is its episode's length)."""
    group, rows = len(candidates), len(candidates) * batched.episodes
    counts = dict.fromkeys(("groups", "alone", "slowest group", "slowest alone"), 0)
    pools = {rows // 2: 0, rows // 3: 0} if refill else {}
    with torch.no_grad():
        for g in range(first, first + generations):
            seeds = task_seeds(seed, g, 0, workers * group)
            params = build_group(batched, center, candidates * workers, seeds, seed, g)
            shares = []  # (group's iterations, one by one's) per worker
            for a in range(0, workers * group, group):
                part = {name: value[a:a + group] for name, value in params.items()}
                lengths = batched.episode_returns(part, seeds[a:a + group]).ravel()
                shares.append([batched.iterations, 0])
                for slots in pools:
                    pools[slots] += refilled(lengths, slots)
                for k in range(a, a + group):
                    alone.score_batch({name: value[k:k + 1] for name, value in
                                       params.items()}, seeds[k:k + 1])
                    shares[-1][1] += alone.iterations
            counts["groups"] += sum(s[0] for s in shares)
            counts["alone"] += sum(s[1] for s in shares)
            counts["slowest group"] += max(s[0] for s in shares)
            counts["slowest alone"] += max(s[1] for s in shares)
    return {"iterations": counts, "refilled iterations": pools}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--group", type=int, default=32, help="candidates per group")
    parser.add_argument("--reps", type=int, default=5, help="repetitions (the best counts)")
    parser.add_argument("--generations", type=int, default=10,
                        help="generations whose loop iterations are counted")
    parser.add_argument("--workers", type=int, default=2,
                        help="groups per generation whose loop iterations are counted, "
                             "one per worker")
    known = ("pendulum-start", "cartpole-start", "cartpole-balanced")
    parser.add_argument("--problems", default=",".join(known),
                        help=f"comma-separated, of {', '.join(known)}")
    args = parser.parse_args(argv)
    if unknown := set(args.problems.split(",")) - set(known):
        parser.error(f"--problems: unknown {', '.join(sorted(unknown))}; choose of "
                     f"{', '.join(known)}")
    torch.set_num_threads(1)
    for name in args.problems.split(","):
        row = profile(name, args.group, args.reps, args.generations, args.workers)
        shown = ", ".join(f"{k} {row[k]:,.0f} us" for k in TIMED)
        n = row["iterations"]
        print(f"{name} (group {args.group}): {shown}; alone / group {row['alone / group']:.1f}x; "
              f"loop iterations of {args.generations} generations of {args.workers} groups: "
              f"groups {n['groups']:,}, one by one {n['alone']:,} "
              f"({n['alone'] / n['groups']:.1f}x); the slowest of {args.workers} workers: "
              f"groups {n['slowest group']:,}, one by one {n['slowest alone']:,} "
              f"({n['slowest alone'] / n['slowest group']:.1f}x)" + "".join(
                  f"; groups on {slots} rows refilled {count:,}"
                  for slots, count in row["refilled iterations"].items()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
