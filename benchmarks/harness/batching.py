"""Batched scoring (``Agent.score_batch``) against one ``score()`` per candidate, for
``benchmarks/batching.py`` (extras ``gym``, and ``digits`` for the digits runs).

Every figure is measured in the run. For CartPole-v1 and Pendulum-v1, each population and
worker count (``Settings.workers``), one generation of scoring is timed
through ``es_search.Evaluator`` (persistent workers, as ``run()`` uses them; several
workers always score in the workers: ``sequential_fallback=False``), side by side: the
paths take turns rep by rep, and in its turn a path runs one untimed generation (its
workers wake after the others' turn) and then ``burst`` (3) timed ones back to back, as
generations follow each other in a run. The paths:

- ``batched``: the built-in of ``es_search.problems.batched_control`` with its default
  group of ``score_batch_size=32`` candidates per ``score_batch()`` call;
- ``alone``: the same class with ``score_batch_size=0``: one ``score()`` (a group of one)
  per candidate, the same scores bit for bit;
- ``gym``: ``es_search.problems.GymPolicy``: one candidate per ``score()`` on
  gymnasium's single environment with a NumPy forward pass, the fastest per-candidate
  path here (its own random streams: other episodes, so compare steps per second).

Each generation scores ``population`` candidates jittered (sigma as below) from a centre:
for CartPole the starting (zero) policy, whose episodes are short and uneven, and a
balancing linear controller, whose episodes mostly run to 500 steps; for Pendulum the
starting policy (every episode is 200 steps). Environment steps are counted from the
returns (CartPole: one reward per step; Pendulum: 200 steps per episode).

Whole runs, as a user runs them: ``es_search.run`` of the built-in, batched and alone
(``score_batch_size=0``), at population 64 on the most workers measured, its
``default_config`` otherwise (CartPole 40 generations of hill-climb, Pendulum 200 of
PGPE), the two paths taking turns rep by rep. The two histories must be equal (every
field but ``seconds``; the benchmark stops if not); reported: each run's wall time
(worker start-up included) and its median generation (the differences of the history's
``seconds``).

``digits``: ``es_search.run`` on ``Digits()`` with its default settings (openai-es,
population 64, sigma 0.05, learning rate 0.03) on the most workers measured, for each
seed; the held-out test accuracy of the best weights and the wall time.

Writes ``batching.md`` and ``batching.json``; ``benchmarks/batching.py`` judges this
repository's targets.
"""
from __future__ import annotations

import dataclasses
import json
import os
import platform
import statistics
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import joblib  # joblib.cpu_count(): the cores n_jobs=-1 uses (affinity, cgroup quotas)
import numpy as np
import torch

from es_search.candidates import Candidate
from es_search.front import Evaluator
from es_search.extras import require
from es_search.record import TIMING_FIELDS
from es_search.loop import run as es_run
from .measure import cpu_model, load_average

BALANCING = torch.tensor([[0.0, 0.0, -20.0, -20.0], [0.0, 0.0, 20.0, 20.0]])


def _default_workers() -> tuple[int, ...]:
    return tuple(sorted({1, joblib.cpu_count()}))


@dataclass
class Settings:
    """What the benchmark runs (:meth:`quick` and :meth:`tiny` shrink it)."""

    populations: tuple[int, ...] = (16, 64, 256)
    workers: tuple[int, ...] = field(default_factory=_default_workers)
    reps: int = 5
    #: back-to-back generations a path runs in each rep, each timed (the first of a
    #: burst runs first, untimed: the workers wake after the other paths' turn)
    burst: int = 3
    #: CartPole's balanced stage (mostly 500-step episodes: ~4 s a generation of 256 one
    #: candidate per call on 1 worker) runs fewer reps
    trained_populations: tuple[int, ...] = (16, 64, 256)
    trained_reps: int = 3
    group: int = 32
    paths: tuple[str, ...] = ("batched", "alone", "gym")
    #: whole runs: (problem, population, generations), on ``run_workers`` workers
    runs: tuple[tuple[str, int, int], ...] = (("cartpole", 64, 40), ("pendulum", 64, 200))
    run_reps: int = 3
    run_workers: int | None = None  # None: the most of ``workers``
    digits_seeds: tuple[int, ...] = (0, 1, 2)
    digits_generations: int = 300
    digits_workers: int | None = None  # None: the most of ``workers``

    def __post_init__(self) -> None:
        self.workers = tuple(int(w) for w in self.workers)
        if not self.workers or min(self.workers) < 1:
            raise ValueError(f"workers must be counts >= 1, got {self.workers}")
        most = max(self.workers)
        self.run_workers = most if self.run_workers is None else self.run_workers
        self.digits_workers = most if self.digits_workers is None else self.digits_workers

    @classmethod
    def quick(cls, **kwargs: Any) -> "Settings":
        return cls(**{**dict(populations=(16, 64), reps=2, burst=2, trained_populations=(64,),
                             trained_reps=1, runs=(("cartpole", 64, 10), ("pendulum", 64, 40)),
                             run_reps=1, digits_seeds=(0,), digits_generations=100),
                      **kwargs})

    @classmethod
    def tiny(cls, **kwargs: Any) -> "Settings":
        """Seconds: the code paths, no figures worth reading (tests)."""
        return cls(**{**dict(populations=(8,), workers=(1,), reps=1, burst=1,
                             trained_populations=(8,), trained_reps=1,
                             runs=(("pendulum", 8, 3),), run_reps=1, digits_seeds=()),
                      **kwargs})


#: (problem, stage) -> (sigma, episodes per score, steps per episode or None if counted)
CASES = {("cartpole", "start"): (0.5, 3, None),
         ("cartpole", "balanced"): (0.1, 3, None),
         ("pendulum", "start"): (0.2, 1, 200)}


def make_agent(problem: str, path: str, group: int) -> Any:
    """The agent a path scores (see the module docstring), groups of ``group``."""
    torch.manual_seed(0)  # the same initial weights on every path (Pendulum's hidden layer)
    if path == "gym":  # GymPolicy, one candidate per score()
        from es_search.problems import GymPolicy
        return GymPolicy("CartPole-v1") if problem == "cartpole" else \
            GymPolicy("Pendulum-v1", hidden=16, episodes=1)
    from es_search.problems import batched_control
    cls = batched_control.CartPole if problem == "cartpole" else batched_control.Pendulum
    episodes = CASES[(problem, "start")][1]  # CartPole: 3, as the gym path (GymPolicy)
    return cls(episodes=episodes, score_batch_size=group if path == "batched" else 0)


def centre(agent: Any, stage: str) -> np.ndarray:
    """The centre of ``stage``: the agent's own (zero) policy or a balancing one."""
    if stage == "balanced":
        agent = agent.clone()
        agent.set_weights({"layers.0.weight": BALANCING})
    return agent.get_flat()


def measure(problem: str, stage: str, pop: int, workers: int, reps: int,
            settings: Settings) -> list[dict]:
    """Generation times of every path, rep by rep (interleaved), in one block."""
    sigma, episodes, length = CASES[(problem, stage)]
    candidates = [Candidate("jitter", sigma)] * pop
    evaluators = {}
    try:
        for path in settings.paths:
            agent = make_agent(problem, path, settings.group)
            ev = Evaluator(agent, seed=0, n_jobs=workers, sequential_fallback=False)
            evaluators[path] = (ev.__enter__(), centre(agent, stage))
            ev.score(-1, evaluators[path][1], candidates[:1])  # warm: imports, envs
        times: dict[str, list[float]] = {p: [] for p in settings.paths}
        steps: dict[str, list[int]] = {p: [] for p in settings.paths}
        for rep in range(reps):
            for path, (ev, center) in evaluators.items():
                generation = rep * (settings.burst + 1)
                ev.score(generation, center, candidates)  # untimed: after the others ran
                for g in range(generation + 1, generation + 1 + settings.burst):
                    began = time.perf_counter()
                    scores = ev.score(g, center, candidates).scores
                    times[path].append(time.perf_counter() - began)
                    steps[path].append(round(sum(scores) * episodes) if length is None
                                       else length * episodes * pop)
    finally:
        for ev, _ in evaluators.values():
            ev.__exit__(None, None, None)
    rows = []
    for path in settings.paths:
        seconds = statistics.median(times[path])
        rows.append({"problem": problem, "stage": stage, "population": pop,
                     "workers": workers, "path": path, "seconds": seconds,
                     "times": times[path], "steps": steps[path],
                     "steps_per_second": statistics.median(
                         s / t for s, t in zip(steps[path], times[path]))})
    return rows


def comparable(history: list[dict]) -> str:
    """A history without its timing fields, as text (NaN equals NaN)."""
    return json.dumps([{k: v for k, v in r.items() if k not in TIMING_FIELDS}
                       for r in history])


def whole_runs(settings: Settings, log: Callable[[str], Any] = print) -> list[dict]:
    """Each built-in's run, batched and alone, interleaved rep by rep (see the module
    docstring). Raises when the two paths' histories differ."""
    rows = []
    for problem, population, generations in settings.runs:
        reference = None
        for rep in range(settings.run_reps):
            for path in ("batched", "alone"):
                agent = make_agent(problem, path, settings.group)
                config = {**type(agent).default_config, "population": population,
                          "generations": generations}
                began = time.perf_counter()
                result = es_run(agent, n_jobs=settings.run_workers, seed=0, progress=False,
                                **config)
                wall = time.perf_counter() - began
                history = comparable(result.history)
                if reference is None:
                    reference = history
                elif history != reference:
                    raise RuntimeError(f"{problem}: the {path} run (rep {rep}) differs "
                                       f"from the first run: batching changed a result")
                seconds = [r["seconds"] for r in result.history]
                times = [b - a for a, b in zip(seconds, seconds[1:])]
                rows.append({"problem": problem, "path": path, "rep": rep,
                             "population": population, "generations": generations,
                             "workers": settings.run_workers, "wall": wall,
                             "generation_times": times,
                             "generation_seconds": statistics.median(times),
                             "best_score": result.best_score,
                             "last_mean": result.history[-1]["mean_score"]})
                log(f"run {problem} {path} rep {rep}: {wall:.1f} s, median generation "
                    f"{rows[-1]['generation_seconds'] * 1e3:.1f} ms, last generation's "
                    f"mean score {rows[-1]['last_mean']:.1f}")
    return rows


def run_summary(rows: list[dict]) -> list[dict]:
    """Per problem and path: the median run's wall time and the median generation of
    all reps' generations (generation 1 on); batched against alone."""
    out = []
    for problem in dict.fromkeys(r["problem"] for r in rows):
        first = next(r for r in rows if r["problem"] == problem)
        item: dict[str, Any] = {k: first.get(k) for k in (
            "problem", "population", "generations", "workers", "last_mean")}
        for path in ("batched", "alone"):
            mine = [r for r in rows if r["problem"] == problem and r["path"] == path]
            item[f"{path}_wall"] = statistics.median(r["wall"] for r in mine)
            item[f"{path}_generation"] = statistics.median(
                t for r in mine for t in r.get("generation_times", [r["generation_seconds"]]))
        item["wall_x"] = item["alone_wall"] / item["batched_wall"]
        item["generation_x"] = item["alone_generation"] / item["batched_generation"]
        out.append(item)
    return out


def digits(settings: Settings, log: Callable[[str], Any] = print) -> list[dict]:
    """``Digits()`` runs at its default settings, one per seed: held-out accuracy, time."""
    from es_search.problems.digits import Digits
    rows = []
    for seed in settings.digits_seeds:
        agent = Digits()
        config = Digits.default_config
        began = time.perf_counter()
        result = es_run(agent, generations=settings.digits_generations,
                        population=config["population"], sigma=config["sigma"],
                        strategy=config["strategy"],
                        strategy_options=config["strategy_options"],
                        n_jobs=settings.digits_workers, seed=seed, progress=False)
        seconds = time.perf_counter() - began
        test = Digits(split="test")
        test.set_weights(result.best_weights)
        rows.append({"seed": seed, "seconds": seconds, "test_accuracy": test.score(),
                     "train_accuracy": test.accuracy("train"),
                     "generations": settings.digits_generations,
                     "workers": settings.digits_workers, "evaluations": result.evaluations})
        log(f"digits seed {seed}: held-out accuracy {rows[-1]['test_accuracy']:.4f} "
            f"in {seconds:.1f} s")
    return rows


def speedups(rows: list[dict]) -> list[dict]:
    """batched against each per-candidate path, per block."""
    out = []
    keys = sorted({(r["problem"], r["stage"], r["population"], r["workers"]) for r in rows})
    for key in keys:
        block = {r["path"]: r for r in rows
                 if (r["problem"], r["stage"], r["population"], r["workers"]) == key}
        if "batched" not in block:
            continue
        b = block["batched"]
        item = dict(zip(("problem", "stage", "population", "workers"), key))
        for other in ("alone", "gym"):
            if other in block:
                item[f"time_vs_{other}"] = block[other]["seconds"] / b["seconds"]
                item[f"steps_vs_{other}"] = (b["steps_per_second"]
                                             / block[other]["steps_per_second"])
        out.append(item)
    return out


def markdown(result: dict, command: str = "python benchmarks/batching.py") -> str:
    """The report: a table per measurement, as ``batching.md`` holds it (``command``:
    what measured it, in the title)."""
    lines = [f"# Batched scoring (`{command}{' --quick' if result['quick'] else ''}`)", "",
             f"Machine: {result['machine']}. {result['note']}", "",
             "Median seconds per generation (one generation of scoring; each path runs "
             f"{result['settings'].get('burst', 1)} timed generations back to back per "
             "rep, the paths taking turns rep by rep) and environment "
             "steps per second, per path; `x` = batched against that path "
             "(generation time for `alone`, which runs the same episodes; steps per "
             "second for `gym`, which runs other episodes).", "",
             "| problem | centre | pop | workers | batched s | alone s | gym s | "
             "batched steps/s | alone steps/s | gym steps/s | x alone | x gym |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    rows = result["rows"]
    for s in result["speedups"]:
        block = {r["path"]: r for r in rows if all(
            r[k] == s[k] for k in ("problem", "stage", "population", "workers"))}

        def cell(path: str, key: str, fmt: str) -> str:
            return format(block[path][key], fmt) if path in block else "-"
        lines.append(
            f"| {s['problem']} | {s['stage']} | {s['population']} | {s['workers']} | "
            f"{cell('batched', 'seconds', '.4f')} | {cell('alone', 'seconds', '.4f')} | "
            f"{cell('gym', 'seconds', '.4f')} | "
            f"{cell('batched', 'steps_per_second', ',.0f')} | "
            f"{cell('alone', 'steps_per_second', ',.0f')} | "
            f"{cell('gym', 'steps_per_second', ',.0f')} | "
            f"{s.get('time_vs_alone', float('nan')):.1f} | "
            f"{s.get('steps_vs_gym', float('nan')):.1f} |")
    runs = result.get("runs") and run_summary(result["runs"])
    if runs:
        lines += ["", "Whole runs (`es_search.run` of the built-in, its default settings but "
                      "population, generations and CartPole's episodes (3 per score); the "
                      "same history batched and alone, "
                      "checked; the median run, and the median generation of all the reps' runs):", "",
                  "| problem | pop | generations | workers | last mean score | batched run s | "
                  "alone run s | x run | batched generation ms | alone generation ms | "
                  "x generation |", "|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in runs:
            lines.append(
                f"| {r['problem']} | {r['population']} | {r['generations']} | "
                f"{r['workers']} | {r['last_mean'] or float('nan'):.1f} | "
                f"{r['batched_wall']:.2f} | "
                f"{r['alone_wall']:.2f} | {r['wall_x']:.1f} | "
                f"{r['batched_generation'] * 1e3:.2f} | {r['alone_generation'] * 1e3:.1f} | "
                f"{r['generation_x']:.1f} |")
    if result.get("digits"):
        d = result["digits"]
        acc = statistics.median(r["test_accuracy"] for r in d)
        secs = statistics.median(r["seconds"] for r in d)
        lines += ["", f"digits (openai-es, population 64, {d[0]['generations']} "
                      f"generations, {d[0].get('workers', 2)} workers), {len(d)} seed(s): "
                      f"median held-out accuracy "
                      f"{acc:.4f}, median {secs:.1f} s; per seed: "
                      + ", ".join(f"seed {r['seed']}: {r['test_accuracy']:.4f} in "
                                  f"{r['seconds']:.1f} s" for r in d)]
    return "\n".join(lines) + "\n"


def benchmark(settings: Settings, quick: bool = False, note: str = "",
              log: Callable[[str], Any] = print) -> dict:
    """Run every measurement of ``settings``; returns them as a JSON-able dict
    (:func:`markdown` renders it). ``note`` ends the report's provenance line."""
    require("gymnasium", "gym")
    rows: list[dict] = []
    started, began = load_average(), time.time()
    plan = [("cartpole", "start", settings.populations, settings.reps),
            ("cartpole", "balanced", settings.trained_populations, settings.trained_reps),
            ("pendulum", "start", settings.populations, settings.reps)]
    for problem, stage, pops, reps in plan:
        for pop in pops:
            for workers in settings.workers:
                block = measure(problem, stage, pop, workers, reps, settings)
                rows += block
                shown = ", ".join(f"{r['path']} {r['seconds']:.4f} s" for r in block)
                log(f"{problem} {stage} pop {pop} workers {workers}: {shown}")
    model = cpu_model()
    result = {"quick": quick, "settings": dataclasses.asdict(settings), "rows": rows,
              "speedups": speedups(rows),
              "machine": f"{platform.machine()}{f' ({model})' if model else ''}, "
                         f"{joblib.cpu_count()} cores, Python {platform.python_version()}, "
                         f"torch {torch.__version__}",
              "note": ""}
    result["runs"] = whole_runs(settings, log) if settings.runs else []
    result["digits"] = digits(settings, log) if settings.digits_seeds else []
    result["note"] = (f"Load average at start {started}, at end {load_average()}; "
                      f"{time.time() - began:.0f} s in all. " + note).strip()
    return result


def write(result: dict, out: str, text: str | None = None) -> dict[str, str]:
    """``batching.json`` and ``batching.md`` (``text``, default :func:`markdown`) in
    ``out``; returns their paths."""
    os.makedirs(out, exist_ok=True)
    paths = {k: os.path.join(out, f"batching.{k}") for k in ("json", "md")}
    with open(paths["json"], "w") as f:
        json.dump(result, f, indent=1)
    with open(paths["md"], "w") as f:
        f.write(markdown(result) if text is None else text)
    return paths
