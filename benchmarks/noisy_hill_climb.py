"""The default hill climber on a noisy score: CartPole with sampled actions (issue 32).

CleanRL-style: the arguments are the dataclass below, the script runs top to bottom.

    PYTHONPATH=$PWD python benchmarks/noisy_hill_climb.py               # seeds 1-5
    PYTHONPATH=$PWD python benchmarks/noisy_hill_climb.py --no-plain    # es_search only

The agent is ``GymPolicy("CartPole-v1", episodes=3)``: a linear policy whose actions are
sampled from the softmax of its logits, scored by the mean return of 3 episodes seeded
from its task seed, so a score is noisy. For each seed, ``es_search.run`` with the
default strategy (``hill-climb``, its default ``reevaluate="auto"``), population 16,
sigma 1.0 and 25 generations; then the run's centre (the final parent) and its best
(the highest score seen) each play 10 fresh test episodes (seeds 1_000_000, ...).
``--plain`` adds a (1+16) hill climber written here, outside es_search, on the same
budget: each generation it scores the parent again with its 16 children and keeps the
highest of those 17 fresh scores. Writes ``benchmarks/results/noisy_hill_climb.md``.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import shlex
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import es_search  # noqa: E402
import provenance  # noqa: E402
from es_search.problems.gym_policy import TEST_SEED, GymPolicy  # noqa: E402


@dataclass
class Args:
    seeds: str = "1,2,3,4,5"
    """the runs' seeds"""
    generations: int = 25
    population: int = 16
    sigma: float = 1.0
    episodes: int = 3
    """episodes per score"""
    test_episodes: int = 10
    target: float = 475.0
    n_jobs: int = 2
    plain: bool = True
    """also run the plain (1+16) hill climber written below"""
    out: str = str(Path(__file__).resolve().parent / "results" / "noisy_hill_climb.md")


def parse_args() -> Args:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    for f in dataclasses.fields(Args):
        if f.type == "bool":
            parser.add_argument(f"--{f.name.replace('_', '-')}", dest=f.name,
                                action=argparse.BooleanOptionalAction, default=f.default)
        else:
            kind = {"int": int, "float": float}.get(f.type, str)
            parser.add_argument(f"--{f.name.replace('_', '-')}", dest=f.name, type=kind,
                                default=f.default)
    return Args(**vars(parser.parse_args()))


def test_mean(agent: GymPolicy, flat: np.ndarray, episodes: int) -> float:
    agent.set_flat(flat)
    return float(agent.returns(episodes, TEST_SEED).mean())


def plain_climber(agent: GymPolicy, args: Args, seed: int) -> np.ndarray:
    """(1+lambda) outside es_search: the parent is scored again with its children each
    generation, and the highest of the fresh scores is the next parent."""
    rng = np.random.default_rng(seed)
    parent = agent.get_flat()
    task = 0
    for _ in range(args.generations):
        pool = [parent] + [parent + args.sigma * rng.standard_normal(parent.size)
                           for _ in range(args.population)]
        scores = []
        for flat in pool:
            agent.set_flat(flat)
            agent.task_seed = seed * 1_000_003 + task  # fresh episodes for each score
            np.random.seed(agent.task_seed % 2 ** 32)
            task += 1
            scores.append(agent.score())
        parent = pool[int(np.argmax(scores))]
    return parent


args = parse_args()
seeds = [int(s) for s in args.seeds.split(",")]
rows = []
for seed in seeds:
    started = time.perf_counter()
    result = es_search.run(GymPolicy("CartPole-v1", episodes=args.episodes),
                           generations=args.generations, population=args.population,
                           sigma=args.sigma, seed=seed, n_jobs=args.n_jobs, progress=False)
    agent = GymPolicy("CartPole-v1", episodes=args.episodes)
    center = test_mean(agent, result.center_agent().get_flat(), args.test_episodes)
    best = test_mean(agent, result.best_agent().get_flat(), args.test_episodes)
    row = {"seed": seed, "center": center, "best": best, "evaluations": result.evaluations,
           "resolved": result.config.get("resolved", {}),
           "seconds": time.perf_counter() - started}
    if args.plain:
        plain = plain_climber(GymPolicy("CartPole-v1", episodes=args.episodes), args, seed)
        row["plain"] = test_mean(agent, plain, args.test_episodes)
    rows.append(row)
    print(f"seed {seed}: centre {center:.1f}, best {best:.1f}"
          + (f", plain (1+{args.population}) {row['plain']:.1f}" if args.plain else "")
          + f" ({row['evaluations']} evaluations, {row['seconds']:.0f} s)", flush=True)

columns = ["center", "best"] + (["plain"] if args.plain else [])
reached = {c: sum(r[c] >= args.target for r in rows) for c in columns}
for c in columns:
    print(f"{c}: {reached[c]} of {len(rows)} seeds reached {args.target:g}")

names = {"center": "es_search centre", "best": "es_search best",
         "plain": f"plain (1+{args.population})"}
lines = [
    "# The default hill climber on a noisy CartPole agent",
    "",
    f"Generated by `python benchmarks/noisy_hill_climb.py {shlex.join(sys.argv[1:])}` at "
    f"{provenance.commit()} ({time.strftime('%Y-%m-%d')}): "
    f"`GymPolicy(\"CartPole-v1\", episodes={args.episodes})` (actions sampled), default "
    f"strategy `hill-climb`, population {args.population}, sigma {args.sigma:g}, "
    f"{args.generations} generations; the centre (final parent) and best each play "
    f"{args.test_episodes} fresh test episodes. Target: a test mean of "
    f"{args.target:g}.",
    "",
    "| seed | " + " | ".join(names[c] for c in columns) + " | evaluations |",
    "|---" * (len(columns) + 2) + "|",
]
for r in rows:
    lines.append(f"| {r['seed']} | " + " | ".join(f"{r[c]:.1f}" for c in columns)
                 + f" | {r['evaluations']} |")
lines.append("| reached | " + " | ".join(f"{reached[c]} of {len(rows)}" for c in columns)
             + " | |")
Path(args.out).parent.mkdir(parents=True, exist_ok=True)
Path(args.out).write_text("\n".join(lines) + "\n")
print(f"wrote {args.out}")
