"""Strategies side by side, in one run: black-box functions, CartPole-v1, Pendulum-v1.

    python benchmarks/strategies.py            # the full benchmark (5 seeds)
    python benchmarks/strategies.py --quick    # 2 seeds, small budgets: a smoke run

Every figure is measured here, in this run; nothing is copied in. For each task, each
es_search strategy runs through ``es_search.run`` and pycma runs directly (its own
``CMAEvolutionStrategy`` ask/tell loop on the raw function, with its own seeding):

- black-box functions (``n_jobs=1``: a call costs microseconds, parallelism does not pay):
  evaluations until f < 1e-8 on sphere-10, sphere-30 and Rosenbrock-10, and the best f
  after 1e5 evaluations on Rastrigin-10; the median over the seeds;
- CartPole-v1 (linear policy sampling its actions, 3 training episodes per score, 16
  evaluations per generation, at most 50 generations): after every generation the
  strategy's centre (the parent for hill climbers, the mean for openai-es and CMA-ES) is
  tested on 10 fresh episodes; solved when their mean return reaches 475. Reported:
  generations, environment steps (training and test) and wall time to solve; here
  also ``ars`` and ``pgpe`` (their settings in ``CONTROL_OPTIONS``; ``--methods`` picks
  the methods of every section, e.g. ``--only pendulum --methods ars,pgpe``);
- Pendulum-v1 (3-16-1 tanh MLP, 3 episodes per score, 32 evaluations per generation,
  200 generations): the mean return of the final centre on 100 test episodes (the same
  episode seeds for every strategy and seed).

Hill climbers with ``reevaluate=True`` score their parent as one of the generation's
evaluations (population 15 + 1 and 31 + 1), so every method gets the same evaluations
per generation. es_search's evaluation counts include the starting point's evaluation;
pycma's direct counts (``countevals``) do not.

Writes ``strategies.json`` (every seed's figures and the settings) and ``strategies.md``
(the tables, also printed) into ``--out`` (default ``benchmarks/results``).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import sys
import time
from typing import Any, Callable

import joblib
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import es_search  # noqa: E402
from es_search.problems.sphere import Rastrigin, Rosenbrock, Sphere  # noqa: E402
from es_search.seeding import preserved_global_rngs, seed_global_rngs, task_seed  # noqa: E402
from es_search.strategies import Strategy, make_strategy  # noqa: E402
from benchmarks import provenance  # noqa: E402

STRATEGY_NAMES = ["hill-climb", "adaptive-hill-climb", "openai-es", "cma-es"]
METHODS = STRATEGY_NAMES + ["pycma"]
#: strategies for control tasks: by default run on CartPole only here (seconds per run);
#: ``--methods ars,pgpe --only pendulum`` runs them on Pendulum too (the control ladder,
#: Pendulum to HalfCheetah, is benchmarks/control.py's)
CONTROL_ONLY = ["ars", "pgpe"]
ALL_METHODS = STRATEGY_NAMES + CONTROL_ONLY + ["pycma"]
DEFAULT_METHODS = {"black-box": METHODS, "cartpole": ALL_METHODS, "pendulum": METHODS}
#: their settings per task (sigma is the section's: 2.0 on CartPole, 0.2 on Pendulum);
#: step sizes picked from a few tries on seeds 0-1 (the notes say which)
CONTROL_OPTIONS = {
    "cartpole": {"ars": {"top": 4, "step_size": 2.0}, "pgpe": {"step_size": 1.0}},
    "pendulum": {"ars": {"top": 8, "step_size": 0.3}, "pgpe": {"step_size": 0.3}},
}
TARGET = 1e-8


# ------------------------------------------------------------------ black-box functions
def sphere_f(x: np.ndarray) -> float:
    return float(((x - 3.0) ** 2).sum())


def rosenbrock_f(x: np.ndarray) -> float:
    return float((100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2).sum())


def rastrigin_f(x: np.ndarray) -> float:
    return float(10 * x.size + (x * x - 10 * np.cos(2 * math.pi * x)).sum())


#: name -> (agent factory, raw function (minimised), start value, sigma0, target or None)
BLACK_BOX: dict[str, tuple[Callable[[], Any], Callable, float, float, float | None]] = {
    "sphere-10": (lambda: Sphere(dim=10), sphere_f, 0.0, 1.0, TARGET),
    "sphere-30": (lambda: Sphere(dim=30), sphere_f, 0.0, 1.0, TARGET),
    "rosenbrock-10": (lambda: Rosenbrock(dim=10), rosenbrock_f, 0.0, 0.5, TARGET),
    "rastrigin-10": (lambda: Rastrigin(dim=10), rastrigin_f, 3.0, 2.0, None),
}


def blackbox_settings(method: str, sigma: float) -> dict:
    """run() keywords of ``method`` on the black-box functions."""
    if method in ("hill-climb", "adaptive-hill-climb"):
        return {"strategy": method, "population": 10, "sigma": sigma}
    if method == "openai-es":  # no weight decay: the optima are not at 0
        return {"strategy": method, "population": 20, "sigma": sigma,
                "strategy_options": {"learning_rate": 0.1, "weight_decay": 0.0}}
    return {"strategy": method, "sigma": sigma}  # cma-es: pycma's default population


def blackbox_job(task: str, method: str, seed: int, budget: int) -> dict:
    make_agent, f, start, sigma0, target = BLACK_BOX[task]
    started = time.perf_counter()
    if method == "pycma":
        import cma
        dim = make_agent().num_evolved()
        es = cma.CMAEvolutionStrategy(np.full(dim, start), sigma0,
                                      {"seed": seed + 1, "verbose": -9, "verb_log": 0,
                                       "verb_disp": 0})
        best, reached = math.inf, None
        while es.countevals < budget:
            X = es.ask()
            values = [f(np.asarray(x)) for x in X]
            es.tell(X, values)
            best = min(best, min(values))
            if target is not None and best < target:
                reached = es.countevals
                break
        evaluations = es.countevals
    else:
        stop = (lambda r: -r["best_score"] < target or r["evaluations"] >= budget) \
            if target is not None else (lambda r: r["evaluations"] >= budget)
        result = es_search.run(make_agent(), generations=10 ** 9, n_jobs=1, seed=seed,
                               progress=False, callbacks=[stop],
                               **blackbox_settings(method, sigma0))
        best = -result.best_score
        reached = result.evaluations if target is not None and best < target else None
        evaluations = result.evaluations
    return {"task": task, "method": method, "seed": seed, "best_f": best,
            "evaluations_to_target": reached, "evaluations": evaluations,
            "seconds": time.perf_counter() - started}


# ------------------------------------------------------------------ control tasks
class KeepState(Strategy):
    """Wraps a strategy and keeps its latest state, so a callback can test the centre."""

    def __init__(self, inner: Strategy):
        self.inner, self.name, self.population = inner, inner.name, inner.population
        self.state: Any = None

    def init(self, center, center_score, seed):
        self.state = self.inner.init(center, center_score, seed)
        return self.state

    def ask(self, state, generation):
        return self.inner.ask(state, generation)

    def _tell(self, state, generation, candidates, scores, rebuild):
        self.state = self.inner.tell(state, generation, candidates, scores, rebuild)
        return self.state

    def center(self, state):
        return self.inner.center(state)

    def sigma(self, state):
        return self.inner.sigma(state)

    def config(self):
        return self.inner.config()


def test_returns(agent, flat: np.ndarray, seeds: range) -> list[float]:
    """Returns of ``agent`` with weights ``flat`` on episodes seeded ``seeds`` (actions
    sampled from NumPy's global generator, seeded per episode; the caller's RNGs kept)."""
    agent = agent.clone()
    agent.set_flat(flat)
    returns = []
    with preserved_global_rngs():
        for s in seeds:
            seed_global_rngs(s)
            returns.append(agent.episode_return(s))
    return returns


def control_strategy(method: str, evaluations: int, sigma: float, learning_rate: float,
                     task: str):
    """The strategy of ``method`` making ``evaluations`` scores per generation on ``task``."""
    if method in ("hill-climb", "adaptive-hill-climb"):  # the parent is the last one
        return make_strategy(method, population=evaluations - 1, sigma=sigma,
                             reevaluate=True)
    if method == "openai-es":
        return make_strategy(method, population=evaluations, sigma=sigma,
                             learning_rate=learning_rate)
    return make_strategy(method, population=evaluations, sigma=sigma,
                         **CONTROL_OPTIONS[task].get(method, {}))


def pycma_control(agent, seed: int, evaluations: int, sigma: float, generations: int,
                  after_generation: Callable[[int, np.ndarray, list], bool]) -> None:
    """pycma's own ask/tell loop on -score; candidate i of generation g is scored as
    es_search would score it (task seed, global RNGs seeded), in this process."""
    import cma
    local = agent.clone()
    es = cma.CMAEvolutionStrategy(local.get_flat(), sigma,
                                  {"seed": seed + 1, "popsize": evaluations, "verbose": -9,
                                   "verb_log": 0, "verb_disp": 0})
    for generation in range(generations):
        X = es.ask()
        scores = []
        with preserved_global_rngs():
            for i, x in enumerate(X):
                local.task_seed = s = task_seed(seed, generation, i)
                seed_global_rngs(s)
                local.set_flat(np.asarray(x))
                scores.append(local.score())
        local.task_seed = None
        es.tell(X, [-s for s in scores])
        if after_generation(generation, np.array(es.mean), scores):
            return


def cartpole_job(method: str, seed: int, max_generations: int, n_jobs: int,
                 sigma: float | None = None, learning_rate: float = 2.0) -> dict:
    from es_search.problems import GymPolicy
    episodes, evaluations = 3, 16
    sigma = sigma if sigma is not None else 2.0  # weights must grow: big steps pay
    agent = GymPolicy("CartPole-v1", episodes=episodes)
    log = {"train_steps": 0, "test_steps": 0, "solved_at": None, "generations": 0}
    started = time.perf_counter()

    def after_generation(generation: int, center: np.ndarray, scores: list) -> bool:
        # CartPole pays +1 per step: a score (mean return) * episodes is its steps
        log["train_steps"] += int(round(sum(s * episodes for s in scores)))
        test = test_returns(agent, center, range(10 ** 7 + 100 * generation,
                                                 10 ** 7 + 100 * generation + 10))
        log["test_steps"] += int(sum(test))
        log["generations"] = generation + 1
        if np.mean(test) >= 475:
            log["solved_at"] = generation + 1
            return True
        return False

    if method == "pycma":
        pycma_control(agent, seed, evaluations, sigma, max_generations, after_generation)
    else:
        strategy = KeepState(control_strategy(method, evaluations, sigma, learning_rate,
                                              "cartpole"))
        es_search.run(agent, generations=max_generations, strategy=strategy, n_jobs=n_jobs,
                      seed=seed, progress=False,
                      callbacks=[lambda r: after_generation(
                          r["generation"], strategy.center(strategy.state), r["scores"])])
    log.update(method=method, seed=seed, seconds=time.perf_counter() - started)
    return log


def pendulum_job(method: str, seed: int, generations: int, n_jobs: int,
                 test_episodes: int, sigma: float = 0.2, learning_rate: float = 0.1) -> dict:
    import torch
    from es_search.problems import GymPolicy
    evaluations = 32
    with preserved_global_rngs():
        torch.manual_seed(seed)  # the hidden layer's random initial weights
        agent = GymPolicy("Pendulum-v1", hidden=16, episodes=3)
    started = time.perf_counter()
    final: dict[str, Any] = {}

    def keep(generation, center, scores):
        final["center"] = center
        return False

    if method == "pycma":
        pycma_control(agent, seed, evaluations, sigma, generations, keep)
    else:
        strategy = KeepState(control_strategy(method, evaluations, sigma, learning_rate,
                                              "pendulum"))
        es_search.run(agent, generations=generations, strategy=strategy, n_jobs=n_jobs,
                      seed=seed, progress=False)
        final["center"] = strategy.center(strategy.state)
    train_seconds = time.perf_counter() - started
    test = test_returns(agent, final["center"], range(10 ** 8, 10 ** 8 + test_episodes))
    return {"method": method, "seed": seed, "test_return": float(np.mean(test)),
            "train_seconds": train_seconds, "seconds": time.perf_counter() - started}


# ------------------------------------------------------------------ report
def median_or_none(values: list) -> float | None:
    """Median with None counted as worse than anything; None if that median is None."""
    if not values:
        return None
    median = statistics.median([math.inf if v is None else v for v in values])
    return None if math.isinf(median) else median


def fmt_int(v: float | None) -> str:
    return "—" if v is None or not math.isfinite(v) else f"{v:,.0f}"


def blackbox_table(bb: list, s: dict, n: int) -> list[str]:
    lines = [f"**Black-box functions** (median of {n} seeds; evaluations until "
             f"f < 1e-8, budget {s['budget']:,}; in brackets the seeds that got "
             f"there; Rastrigin: best f after {s['rastrigin_budget']:,} evaluations)", ""]
    tasks = list(BLACK_BOX)
    lines.append("| method | " + " | ".join(tasks) + " |")
    lines.append("|---" * (len(tasks) + 1) + "|")
    for method in [m for m in ALL_METHODS if any(r["method"] == m for r in bb)]:
        cells = []
        for task in tasks:
            runs = [r for r in bb if r["task"] == task and r["method"] == method]
            if not runs:
                cells.append("")
            elif BLACK_BOX[task][4] is None:
                cells.append(f"{statistics.median(r['best_f'] for r in runs):.3g}")
            else:
                reached = [r["evaluations_to_target"] for r in runs]
                ok = sum(v is not None for v in reached)
                med = median_or_none(reached)
                if med is None:
                    best = statistics.median(r["best_f"] for r in runs)
                    cells.append(f"not reached ({ok}/{len(runs)}; median f {best:.2g})")
                else:
                    cells.append(f"{fmt_int(med)} ({ok}/{len(runs)})")
        name = "pycma, called directly" if method == "pycma" else f"`{method}`"
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


def markdown(results: dict) -> str:
    s = results["settings"]
    lines: list[str] = []
    n = len(s["seeds"])
    if results["black_box"]:
        lines += blackbox_table(results["black_box"], s, n)
    if results.get("cartpole"):
        cp = results["cartpole"]
        lines += ["", f"**CartPole-v1** (median of {n} seeds; solved: the centre's mean "
                  f"return on 10 test episodes reaches 475 within {s['cartpole_generations']} "
                  f"generations of 16 evaluations, 3 episodes each; steps: environment "
                  f"steps of the generations' training episodes and of the tests; {s['n_jobs']} jobs)", "",
                  "| method | solved | generations | training steps | test steps | "
                  "wall time (s) |", "|---|---|---|---|---|---|"]
        for method in ALL_METHODS:
            runs = [r for r in cp if r["method"] == method]
            if not runs:
                continue
            solved = [r for r in runs if r["solved_at"] is not None]
            gens = median_or_none([r["solved_at"] for r in runs])
            med = (lambda k: median_or_none([r[k] if r["solved_at"] else None
                                             for r in runs]))
            name = "pycma, called directly (1 process)" if method == "pycma" else \
                f"`{method}`"
            lines.append(f"| {name} | {len(solved)}/{len(runs)} | {fmt_int(gens)} | "
                         f"{fmt_int(med('train_steps'))} | {fmt_int(med('test_steps'))} | "
                         + ("—" if med("seconds") is None else f"{med('seconds'):.1f}")
                         + " |")
    if results.get("pendulum"):
        pd = results["pendulum"]
        lines += ["", f"**Pendulum-v1** (3-16-1 tanh MLP; {s['pendulum_generations']} "
                  f"generations of 32 evaluations, 3 episodes each; mean return of the "
                  f"final centre on {s['pendulum_test_episodes']} test episodes; "
                  f"{s['n_jobs']} jobs)", "",
                  "| method | median test return | seeds >= -250 | per seed | "
                  "wall time per run (s) |", "|---|---|---|---|---|"]
        for method in ALL_METHODS:
            runs = [r for r in pd if r["method"] == method]
            if not runs:
                continue
            returns = [r["test_return"] for r in runs]
            name = "pycma, called directly (1 process)" if method == "pycma" else \
                f"`{method}`"
            lines.append(f"| {name} | {statistics.median(returns):.1f} | "
                         f"{sum(v >= -250 for v in returns)}/{len(runs)} | "
                         f"{', '.join(f'{v:.0f}' for v in returns)} | "
                         f"{statistics.median(r['seconds'] for r in runs):.1f} |")
    lines += ["", "**Targets**", "", "| target | measured | met |", "|---|---|---|"]
    quick = s["quick"] or len(s["seeds"]) < 5
    for text, measured, met in targets(results):
        verdict = "not judged (quick run)" if quick else ("yes" if met else "no")
        lines.append(f"| {text} | {measured} | {verdict} |")
    lines += ["", f"{platform.processor() or platform.machine()}, {joblib.cpu_count()} cores, "
              f"Python {platform.python_version()}, {s['command']}, "
              f"{results['seconds']:.0f} s in all."]
    return "\n".join(lines)


def targets(results: dict) -> list[tuple[str, str, bool]]:
    out = []
    bb = results["black_box"]

    def med(task, method):
        return median_or_none([r["evaluations_to_target"] for r in bb
                               if r["task"] == task and r["method"] == method])

    if bb:
        shown, met = [], True
        for task in ("sphere-10", "sphere-30", "rosenbrock-10"):
            ours, theirs = med(task, "cma-es"), med(task, "pycma")
            if ours is None or theirs is None:
                shown.append(f"{task}: not reached")
                met = False
            else:
                shown.append(f"{task} {fmt_int(ours)} vs {fmt_int(theirs)} "
                             f"({ours / theirs:.2f}x)")
                met = met and abs(ours / theirs - 1) <= 0.10
        out.append(("`cma-es` within 10% of pycma's evaluations (median)",
                    "; ".join(shown), met))
    adaptive = med("sphere-10", "adaptive-hill-climb")
    if bb:
        out.append(("`adaptive-hill-climb`: f < 1e-8 on sphere-10 in <= 2,500 "
                    "evaluations", fmt_int(adaptive), adaptive is not None
                    and adaptive <= 2500))
    pendulum = [r for r in results.get("pendulum") or () if r["method"] == "openai-es"]
    if pendulum:  # a target of a method not run (--methods) is not shown
        good = sum(r["test_return"] >= -250 for r in pendulum)
        out.append(("`openai-es`: Pendulum test return >= -250 on >= 3 of 5 seeds",
                    f"{good}/{len(pendulum)} seeds", good >= 3 and len(pendulum) >= 5))
    if results.get("cartpole"):
        for method in STRATEGY_NAMES:
            runs = [r for r in results["cartpole"] if r["method"] == method]
            if not runs:
                continue
            solved = sum(r["solved_at"] is not None and r["solved_at"] <= 50 for r in runs)
            out.append((f"`{method}` solves CartPole on >= 4 of 5 seeds within 50 "
                        f"generations", f"{solved}/{len(runs)} seeds",
                        solved >= 4 and len(runs) >= 5))
    return out


# ------------------------------------------------------------------ main
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--quick", action="store_true",
                        help="2 seeds, small budgets (a few minutes)")
    parser.add_argument("--seeds", type=int, default=None, help="default 5 (quick: 2)")
    parser.add_argument("--n-jobs", type=int, default=-1,
                        help="workers inside each control run (default -1: all cores)")
    parser.add_argument("--workers", type=int, default=-1,
                        help="black-box runs side by side (each n_jobs=1; default -1)")
    parser.add_argument("--only", default="black-box,cartpole,pendulum",
                        help="comma-separated sections")
    parser.add_argument("--methods", default=None,
                        help="comma-separated methods for every section (default: "
                             "black-box and pendulum: " + ",".join(METHODS) + "; cartpole "
                             "also " + ",".join(CONTROL_ONLY) + ")")
    parser.add_argument("--out", default=None,
                        help="folder for strategies.{md,json} (default: benchmarks/results; "
                             "with --quick, bench-results in the current folder, so that a "
                             "smoke run never replaces the committed tables)")
    args = parser.parse_args(argv)
    args.out = args.out or ("bench-results" if args.quick else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "results"))
    seeds = list(range(args.seeds if args.seeds is not None else (2 if args.quick else 5)))
    sections = set(args.only.split(","))
    if not seeds or sections - {"black-box", "cartpole", "pendulum"}:
        parser.error(f"--seeds takes a count >= 1, --only sections of black-box,cartpole,"
                     f"pendulum (got --seeds {args.seeds}, --only {args.only})")
    chosen = None if args.methods is None else args.methods.split(",")
    if chosen is not None and set(chosen) - set(ALL_METHODS):
        parser.error(f"unknown methods {sorted(set(chosen) - set(ALL_METHODS))}; choose "
                     f"from {','.join(ALL_METHODS)}")
    methods = {section: chosen or default for section, default in DEFAULT_METHODS.items()}
    settings = {
        "seeds": seeds, "quick": args.quick, "n_jobs": args.n_jobs, "methods": methods,
        "control_options": CONTROL_OPTIONS,
        "budget": 10_000 if args.quick else 100_000,
        "rastrigin_budget": 5_000 if args.quick else 100_000,
        "cartpole_generations": 20 if args.quick else 50,
        "pendulum_generations": 20 if args.quick else 200,
        "pendulum_test_episodes": 20 if args.quick else 100,
        "command": "python benchmarks/strategies.py" + " ".join(
            [""] + (argv if argv is not None else sys.argv[1:])),
        "commit": provenance.commit(),
    }
    started = time.perf_counter()
    results: dict[str, Any] = {"settings": settings, "black_box": [], "cartpole": [],
                               "pendulum": []}
    if "black-box" in sections:
        import joblib
        jobs = [(task, method, seed,
                 settings["rastrigin_budget"] if BLACK_BOX[task][4] is None
                 else settings["budget"])
                for task in BLACK_BOX for method in methods["black-box"] for seed in seeds]
        print(f"black-box: {len(jobs)} runs ...", file=sys.stderr, flush=True)
        results["black_box"] = joblib.Parallel(n_jobs=args.workers)(
            joblib.delayed(blackbox_job)(*job) for job in jobs)
    if "cartpole" in sections:
        for method in methods["cartpole"]:
            for seed in seeds:
                r = cartpole_job(method, seed, settings["cartpole_generations"], args.n_jobs)
                print(f"cartpole {method} seed {seed}: solved at {r['solved_at']} "
                      f"({r['seconds']:.1f} s)", file=sys.stderr, flush=True)
                results["cartpole"].append(r)
    if "pendulum" in sections:
        for method in methods["pendulum"]:
            for seed in seeds:
                r = pendulum_job(method, seed, settings["pendulum_generations"],
                                 args.n_jobs, settings["pendulum_test_episodes"])
                print(f"pendulum {method} seed {seed}: test return {r['test_return']:.1f} "
                      f"({r['seconds']:.1f} s)", file=sys.stderr, flush=True)
                results["pendulum"].append(r)
    results["seconds"] = time.perf_counter() - started
    results["targets"] = [{"target": t, "measured": m, "met": ok}
                          for t, m, ok in targets(results)]
    text = markdown(results)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "strategies.json"), "w") as fh:
        json.dump(results, fh, indent=1, default=float)
    with open(os.path.join(args.out, "strategies.md"), "w") as fh:
        fh.write(f"# Strategies benchmark\n\nWritten by `{settings['command']}` at "
                 f"{settings['commit']}.\n\n"
                 f"{text}\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
