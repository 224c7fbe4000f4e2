"""When a control run's centre first tests at the target, on a grid of generations.

CleanRL-style: the arguments are the dataclass below, the script runs top to bottom.

    PYTHONPATH=$PWD python benchmarks/time_to_target.py                       # hopper, 0.02
    PYTHONPATH=$PWD python benchmarks/time_to_target.py --step-sizes 0.02,0.03

``benchmarks/control.py`` times the target on 19 snapshots, one every twentieth of the
budget (6 s for Hopper's 120 s): a centre that crosses the target between two snapshots
and falls back is not seen. Here, for each step size and seed, the built-in's default run
(``--task``'s strategy, population, sigma; only ``step_size`` changed) goes for
``--generations`` generations on ``--n-jobs`` workers, its centre (with the observation
statistics of that generation) kept every ``--every`` generations with the time since the
run's start; then the kept centres are tested in order on the ``--test-episodes`` test
episodes (seeds 1_000_000, ...; true returns) until one reaches ``--target``. Reports that
generation and time per seed and the median time over seeds (never: infinite). Writes
``benchmarks/results/time_to_target.md``.
"""
from __future__ import annotations

import json
import os
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import tyro

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[1])]
import es_search  # noqa: E402
import provenance  # noqa: E402
from control import test_returns  # noqa: E402
from es_search.agent import weights_of  # noqa: E402
from es_search.problems import load_problem, problem_defaults  # noqa: E402
from es_search.seeding import build_seeded  # noqa: E402
from es_search.strategies import DEFAULT, make_strategy  # noqa: E402


@dataclass
class Args:
    task: str = "hopper"
    """a built-in control problem"""
    target: float = 3120.0
    step_sizes: str = "0.02"
    """comma-separated ARS/PGPE step sizes"""
    seeds: str = "0,1,2,3,4"
    generations: int = 170
    every: int = 5
    """generations between two kept centres"""
    test_episodes: int = 20
    n_jobs: int = 2
    out: str = str(Path(__file__).resolve().parent / "results" / "time_to_target.md")


def first_at_target(args: Args, step: float, seed: int) -> dict:
    cls = load_problem(args.task)
    config = problem_defaults(cls)
    options = {**(config.get("strategy_options") or {}), "step_size": step}
    strategy = make_strategy(config.get("strategy", DEFAULT), config["population"], config["sigma"],
                             **options)
    kept, started = [], time.perf_counter()

    def keep(record) -> None:
        if (record["generation"] + 1) % args.every == 0:
            saved = record.checkpoint
            kept.append((record["generation"] + 1, time.perf_counter() - started,
                         saved["strategy"].center(saved["state"]).copy(), saved["shared"]))

    result = es_search.run(build_seeded(seed, cls), generations=args.generations,
                           strategy=strategy, n_jobs=args.n_jobs, seed=seed, progress=False,
                           callbacks=[keep], select_tasks=0)
    for generation, seconds, flat, shared in kept:
        policy = result.agent.clone()
        policy.set_weights(weights_of(policy, flat, shared))
        mean = float(test_returns(policy, args.test_episodes, args.n_jobs).mean())
        if mean >= args.target:
            return {"generation": generation, "seconds": round(seconds, 1),
                    "test_mean": round(mean, 1)}
    return {"generation": None, "seconds": None, "test_mean": None}


args = tyro.cli(Args)
command = " ".join(["python", "benchmarks/time_to_target.py", *sys.argv[1:]])
lines = [f"# Time to {args.target:g} on {args.task}, a centre tested every {args.every} "
         f"generations\n", f"`{command}` at {provenance.commit()}, "
         f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load average "
         f"{os.getloadavg()[0]:.1f}", "",
         "| step size | seed | generation | seconds | test mean |", "|---|---|---|---|---|"]
medians = []
for step in [float(s) for s in args.step_sizes.split(",")]:
    times = []
    for seed in [int(s) for s in args.seeds.split(",")]:
        found = first_at_target(args, step, seed)
        print(json.dumps({"step_size": step, "seed": seed, **found}), flush=True)
        times.append(found["seconds"] if found["seconds"] is not None else float("inf"))
        lines.append(f"| {step:g} | {seed} | {found['generation'] or 'never'} | "
                     f"{found['seconds'] or '-'} | {found['test_mean'] or '-'} |")
    medians.append(f"- step size {step:g}: median {statistics.median(times):g} s over "
                   f"seeds {args.seeds}")
Path(args.out).write_text("\n".join(lines + [""] + medians) + "\n")
print("\n".join(medians))
