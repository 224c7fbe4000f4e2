"""The control ladder: es_search's built-ins against EvoTorch 0.6.1, on all cores.

CleanRL-style: the arguments are the dataclass below, the script runs top to bottom.

    python benchmarks/control.py --quick                  # one seed
    python benchmarks/control.py                          # seeds 0-4, + BipedalWalker
    python benchmarks/control.py --tasks hopper --seeds 1 --append

For each task and seed, each framework trains for the task's wall-time budget with all
cores (the time of starting workers included), then the policy the run hands back
(``Result.chosen_agent()``: the best weights, the final centre or a centre kept over the
run, whichever its end's selection test chose, with its observation statistics) plays
``--test-episodes`` test episodes (default 100; the MuJoCo and LunarLander rows used
20, as each row's command says; seeds 1_000_000, ...; the true reward, no
``reward_offset``). Reported per run: the test mean,
environment steps, wall time, the time to the target (from the run's start to the first
centre, of one every 5 generations, that tests at it), and steps per second against this
machine's ceilings, measured in the same run right after the training: the same policies
stepped with no framework, one process per core (``control_ceiling.py``): the final
policy, and the candidates the run scored at 19 snapshots, one every twentieth of the
budget. EvoTorch (GymNE with PGPE + ClipUp at its documented settings, one Ray actor per
core) runs in a subprocess with the interpreter ``--evotorch-python`` (a venv with
evotorch==0.6.1: a benchmark-only dependency, e.g. ``python3 -m venv
/work/venvs/evotorch && /work/venvs/evotorch/bin/pip install -c constraints.txt
torch==2.13.0 evotorch==0.6.1 'gymnasium[box2d,mujoco]'``). Per task, over the seeds:
the test mean's median, interquartile mean (IQM) and its 95% stratified-bootstrap
interval (``benchmarks/harness/stats.py``, the computation of Agarwal et al. 2021's
rliable), the share of seeds at or above the target, and the median environment steps
and wall time. Writes ``benchmarks/results/control.{json,md}``; ``--readme README.md``
also the README's ladder table.
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import joblib
import numpy as np
import tyro  # extra scripts: each field's docstring is its --help

from es_search.problems.gym_policy import TEST_SEED  # the test episodes' first seed

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[1])]
import cloudpickle  # noqa: E402
import control_ceiling  # noqa: E402
import provenance  # noqa: E402
from benchmarks.harness.stats import summary  # noqa: E402
from control_ceiling import Snapshots, final_ceiling, run_ceiling  # noqa: E402
from readme_table import update_readme  # noqa: E402

# the bare loops run in worker processes that may not find benchmarks/ on their path
cloudpickle.register_pickle_by_value(control_ceiling)

HERE = Path(__file__).resolve().parent


@dataclass
class Args:
    quick: bool = False
    """one seed, no BipedalWalker"""
    tasks: str = ""
    """comma-separated subset of the ladder (default: all of the mode's)"""
    seeds: str = ""
    """comma-separated seeds (default: 0 with --quick, else 0,1,2,3,4)"""
    n_jobs: int = -1
    """workers (-1: all cores) for es_search; actors for EvoTorch"""
    budget_scale: float = 1.0
    """multiply every wall budget (a smoke test: 0.05 with --ceiling-seconds 0.2
    --test-episodes 3)"""
    test_episodes: int = 100
    """episodes the final policy is tested on"""
    ceiling_seconds: float = 8.0
    """seconds of bare stepping per core for the ceiling"""
    evotorch_python: str = "/work/venvs/evotorch/bin/python"
    """the interpreter of a venv with evotorch==0.6.1"""
    no_evotorch: bool = False
    """run es_search only"""
    no_es_search: bool = False
    """run EvoTorch only"""
    render: bool = False
    """only rewrite control.md (and --readme's table) from control.json"""
    readme: str = ""
    """also write the median table between this README's control-table markers"""
    append: bool = False
    """keep the rows of an earlier control.json (same task, framework, seed replaced)"""
    out: str = ""
    """default: benchmarks/results; with --quick, bench-results in the current folder
    (a smoke run never replaces the committed tables)"""


@dataclass(frozen=True)
class Task:
    problem: str  # es_search built-in
    env_id: str
    budget_s: float  # wall-time budget, all cores
    target: float | None  # the test-mean target within the budget (median of the seeds)
    evotorch: str  # EvoTorch settings (control_evotorch.SETTINGS)
    decrease_rewards_by: float = 0.0  # EvoTorch's reward offset (alive bonus)
    full_only: bool = False
    spec: str | None = None  # load_problem spec when not the built-in of that name
    options: tuple = ()  # (name, value) pairs for the policy's constructor
    config: tuple = ()  # (name, value) pairs over the spec's default_config


LADDER = {
    # GymPolicy (the built-ins of these names are batched; the ceiling steps GymPolicy's
    # own policies)
    # greedy: EvoTorch's GymNE takes the argmax of a discrete policy; so does this one
    "cartpole": Task("cartpole", "CartPole-v1", 20, None, "classic", spec="gym:CartPole-v1",
                     options=(("greedy", True),)),
    "pendulum": Task("pendulum", "Pendulum-v1", 60, None, "classic", spec="gym:Pendulum-v1",
                     options=(("hidden", 16), ("episodes", 1)),
                     config=(("generations", 300), ("population", 50), ("sigma", 0.25),
                             ("strategy", "pgpe"),
                             ("strategy_options", {"max_speed": 0.15, "step_size": 0.1125}))),
    "lunarlander": Task("lunarlander", "LunarLanderContinuous-v3", 120, 200.0, "box2d"),
    "hopper": Task("hopper", "Hopper-v5", 120, 3120.0, "mujoco", decrease_rewards_by=1.0),
    "halfcheetah": Task("halfcheetah", "HalfCheetah-v5", 240, 3430.0, "mujoco"),
    "bipedalwalker": Task("bipedalwalker", "BipedalWalker-v3", 3600, 300.0, "box2d",
                          full_only=True),
}


def parse_args(argv=None) -> Args:
    return tyro.cli(Args, description=" ".join(__doc__.split("\n\n")[0].split()), args=argv)


def cores(n_jobs: int) -> int:
    return joblib.cpu_count() if n_jobs == -1 else n_jobs


# ----------------------------------------------------------------------------- es_search
def run_es_search(task: Task, seed: int, args: Args) -> tuple[dict, object]:
    import es_search
    from es_search.problems import load_problem
    from es_search.seeding import build_seeded
    from es_search.strategies import DEFAULT, make_strategy

    cls = load_problem(task.spec or task.problem)
    agent = build_seeded(seed, cls, **dict(task.options))  # weights from the seed, as the CLI
    config = {**cls.default_config, **dict(task.config)}
    strategy = make_strategy(config.get("strategy", DEFAULT), config["population"],
                             config["sigma"], **dict(config.get("strategy_options") or {}))
    budget = task.budget_s * args.budget_scale
    with tempfile.TemporaryDirectory() as folder:
        snapshots = Snapshots(budget)  # the ceiling's policies, the time to the target
        started = time.perf_counter()
        result = es_search.run(
            agent, generations=10 ** 7, strategy=strategy, n_jobs=args.n_jobs, seed=seed,
            progress=False, out=folder,
            callbacks=[snapshots, lambda record: time.perf_counter() - started >= budget])
        wall = time.perf_counter() - started
    final = result.chosen_agent()  # what the run hands back (its selection test's pick)
    steps = result.history[-1].get("steps")
    row = {"framework": "es_search", "task": task.problem, "env": task.env_id,
           "seed": seed, "budget_s": budget, "wall_s": wall, "steps": steps,
           "generations": result.generations, "chosen": result.chosen,
           "selection": result.selection,
           "settings": {"problem": task.problem, **result.config["strategy"],
                        "normalize": getattr(agent, "normalize", None),
                        "hidden": list(getattr(agent, "hidden", ())),
                        "n_jobs": args.n_jobs, **dict(task.options)}}
    return row, final, snapshots


def time_to_target(final, snapped, task: Task, args: Args, n: int) -> float | None:
    """Seconds from the run's start to the first centre of ``snapped.grid`` (one every 5
    generations) that tests at the target on the test episodes; None when none does."""
    from es_search.agent import weights_of
    for seconds, saved in snapped.grid:
        policy = final.clone()
        policy.set_weights(weights_of(policy, saved["strategy"].center(saved["state"]),
                                      saved["shared"]))
        if test_returns(policy, args.test_episodes, n).mean() >= task.target:
            return round(seconds, 1)
    return None


def test_returns(agent, episodes: int, n: int) -> np.ndarray:
    """``agent.returns`` of episodes TEST_SEED, ... split over ``n`` processes."""
    from joblib import Parallel, delayed
    bounds = np.linspace(0, episodes, n + 1).astype(int)
    parts = Parallel(n_jobs=n)(delayed(agent.returns)(int(b - a), TEST_SEED + int(a))
                               for a, b in zip(bounds[:-1], bounds[1:]) if b > a)
    return np.concatenate(parts)


# ----------------------------------------------------------------------------- EvoTorch
def run_evotorch(task: Task, seed: int, args: Args) -> dict:
    spec = {"env": task.env_id, "seed": seed, "kind": task.evotorch,
            "budget": task.budget_s * args.budget_scale, "num_actors": cores(args.n_jobs),
            "test_episodes": args.test_episodes, "test_seed": TEST_SEED,
            "discrete": task.problem == "cartpole",
            "decrease_rewards_by": task.decrease_rewards_by,
            "hidden": 16 if task.problem == "pendulum" else 0}
    done = subprocess.run([args.evotorch_python, str(HERE / "control_evotorch.py"),
                           json.dumps(spec)], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"EvoTorch on {task.env_id} failed:\n{done.stderr[-3000:]}")
    row = json.loads(done.stdout.strip().splitlines()[-1])
    row.update(task=task.problem, budget_s=spec["budget"])
    return row


# ----------------------------------------------------------------------------- output
def verdict(row: dict, task: Task) -> str:
    if task.target is None:
        return ""
    return "met" if row["test_mean"] >= task.target else "not met"


def _ratio(row: dict, ceiling: float | None) -> float | None:
    return row["steps"] / row["wall_s"] / ceiling if ceiling and row.get("steps") else None


def _fmt(x: float | None, spec: str = ".2f") -> str:
    return "-" if x is None else format(x, spec)


def _to_target(group: list[dict]) -> str:
    """The median seconds to the target over the seeds (a seed that never reached it
    counts as infinite), with how many measured it; "-" when none did."""
    times = [r["time_to_target"] for r in group if "time_to_target" in r]
    if not times:
        return "-"
    median = np.median([math.inf if s is None else s for s in times])
    return f"{median:.0f} ({len(times)})" if math.isfinite(median) else f"not reached ({len(times)})"


def render(rows: list[dict], meta: dict) -> str:
    lines = ["# Control ladder: es_search vs EvoTorch", "",
             f"{meta['cores']} cores ({meta['machine']}). The machine is shared (1-minute "
             f"load average before and after each row, on 2 cores): wall times and rates "
             f"are noisy.", "",
             "Test mean: the policy the run hands back (its selection test's pick, in "
             "parentheses; older rows: the final centre) on the test episodes (true rewards; "
             "`--test-episodes`). Time to target: from the run's start to the first centre, of "
             "one every 5 generations, that tests at the target (rows before 2026-12-03: the "
             "first twentieth of the budget at which it did). Rate: environment "
             "steps per second of the whole run (worker start included). Two ceilings, "
             "each one bare process per core (gymnasium and a NumPy forward pass, resets "
             "included; `benchmarks/control_ceiling.py`), measured right after the run and "
             "after its test, the higher: *final*, es_search's final policy, episode after "
             "episode; *run*, the candidates es_search scored at 5%, 10%, ..., 95% of the "
             "budget, built as its workers build them, each snapshot's stepped as long "
             "(the mix of short and long episodes that training steps). EvoTorch rows are "
             "compared with es_search's ceilings of the same seed (other policies). Rows "
             "without a run ceiling predate it.",
             "",
             "| task | framework | seed | budget s | wall s | env steps | steps/s | ceiling "
             "final | rate / final | ceiling run | rate / run | test mean ± std | target | "
             "load before/after |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    ceilings = {(r["task"], r["seed"]): (r.get("ceiling"), r.get("run_ceiling"))
                for r in rows if r["framework"] == "es_search"}
    order = list(LADDER)
    for row in sorted(rows, key=lambda r: (order.index(r["task"]), r["seed"],
                                           r["framework"] != "es_search")):
        task = LADDER[row["task"]]
        rate = row["steps"] / row["wall_s"] if row.get("steps") else math.nan
        final, run = ceilings.get((row["task"], row["seed"]), (None, None))
        target = "-" if task.target is None else f"{task.target:g}: {verdict(row, task)}"
        lines.append(
            f"| {row['task']} | {row['framework']} | {row['seed']} | {row['budget_s']:.0f} | "
            f"{row['wall_s']:.0f} | {row.get('steps') or '-'} | {rate:,.0f} | "
            f"{_fmt(final, ',.0f')} | {_fmt(_ratio(row, final))} | {_fmt(run, ',.0f')} | "
            f"{_fmt(_ratio(row, run))} | {row['test_mean']:.1f} ± {row['test_std']:.1f}"
            f"{' (' + row['chosen'] + ')' if row.get('chosen') else ''} | "
            f"{target} | {_load(row)} |")
    lines += ["", "Over the seeds run, per task and framework: the test mean's median, IQM with "
              "its 95% bootstrap interval, the seeds at or above the target, median steps, "
              "wall time and rates (the targets are judged on the median):", "",
              "| task | framework | seeds | median test mean | IQM [95% CI] | success | "
              "median env steps | median wall s | median rate / final | median rate / run | "
              "median s to target | target on the median |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name in order:
        for framework in ("es_search", "evotorch"):
            group = [r for r in rows if r["task"] == name and r["framework"] == framework]
            if not group:
                continue
            task = LADDER[name]
            stats = summary([r["test_mean"] for r in group], task.target)
            medians = []
            for which in (0, 1):
                ratios = [_ratio(r, ceilings.get((r["task"], r["seed"]), (None, None))[which])
                          for r in group]
                ratios = [x for x in ratios if x is not None]
                medians.append(f"{np.median(ratios):.2f} ({len(ratios)})" if ratios else "-")
            target = "-" if task.target is None else (
                f"{task.target:g}: {'met' if stats['median'] >= task.target else 'not met'}")
            lines.append(f"| {name} | {framework} | {len(group)} | {stats['median']:.1f} | "
                         f"{_iqm(stats)} | {_success(stats, task)} | {_steps(group)} | "
                         f"{np.median([r['wall_s'] for r in group]):.0f} | "
                         f"{medians[0]} | {medians[1]} | {_to_target(group)} | {target} |")
    commands = sorted({(r["run"]["date"], r["run"]["commit"], r["run"]["command"])
                       for r in rows if r.get("run")})
    if commands:
        lines += ["", "Rows come from these invocations (date UTC, commit, command):", ""]
        lines += [f"- {d}, {c}: `{cmd}`" for d, c, cmd in commands]
    return "\n".join(lines) + "\n"


def _iqm(stats: dict) -> str:
    low, high = stats["iqm_ci"]
    return f"{stats['iqm']:.1f} [{low:.1f}, {high:.1f}]"


def _success(stats: dict, task: Task) -> str:
    if stats["success"] is None:
        return "-"
    return f"{round(stats['success'] * stats['seeds'])}/{stats['seeds']} >= {task.target:g}"


def _steps(group: list[dict]) -> str:
    steps = [r["steps"] for r in group if r.get("steps")]
    if not steps:
        return "-"
    x = float(np.median(steps))
    return f"{x / 1e6:.2f}M" if x >= 1e6 else f"{x / 1e3:.0f}k" if x >= 1e3 else f"{x:.0f}"


def readme_summary(rows: list[dict]) -> str:
    """The README's table: per task, es_search's test mean over the seeds run (median,
    IQM [95% CI], seeds at the target), its median steps and wall time; EvoTorch's beside."""
    lines = ["| task (budget) | seeds | median | IQM [95% CI] | success | env steps | wall s | "
             "EvoTorch median | EvoTorch IQM [95% CI] |",
             "|---|---|---|---|---|---|---|---|---|"]
    for name, task in LADDER.items():
        mine = [r for r in rows if r["task"] == name and r["framework"] == "es_search"]
        theirs = [r for r in rows if r["task"] == name and r["framework"] == "evotorch"]
        if not mine:
            continue
        stats = summary([r["test_mean"] for r in mine], task.target)
        other = ["-", "-"]
        if theirs:
            them = summary([r["test_mean"] for r in theirs])
            seeds = "" if len(theirs) == len(mine) else f" ({len(theirs)} seeds)"
            other = [f"{them['median']:.1f}{seeds}", _iqm(them)]
        lines.append(f"| {task.env_id} ({task.budget_s:g} s) | {len(mine)} | "
                     f"{stats['median']:.1f} | {_iqm(stats)} | {_success(stats, task)} | "
                     f"{_steps(mine)} | {np.median([r['wall_s'] for r in mine]):.0f} | "
                     f"{other[0]} | {other[1]} |")
    return "\n".join(lines) + "\n"


def _load(row: dict) -> str:
    load = (row.get("run") or {}).get("load")
    return f"{load[0]} / {load[1]}" if load else "-"


def main(argv=None) -> int:
    args = parse_args(argv)
    names = [t for t in (args.tasks.split(",") if args.tasks else LADDER) if t]
    unknown = [t for t in names if t not in LADDER]
    if unknown:
        raise SystemExit(f"unknown task(s) {unknown}; the ladder: {', '.join(LADDER)}")
    if not args.tasks:
        names = [t for t in names if not (args.quick and LADDER[t].full_only)]
    seeds = [int(s) for s in (args.seeds or ("0" if args.quick else "0,1,2,3,4")).split(",")]
    out = Path(args.out or ("bench-results" if args.quick and not args.render
                            else HERE / "results"))
    out.mkdir(parents=True, exist_ok=True)
    if args.render:
        if not (out / "control.json").exists():
            raise SystemExit(f"--render rewrites control.md from {out}/control.json, which "
                             f"does not exist: run the benchmark first")
        saved = json.loads((out / "control.json").read_text())
        (out / "control.md").write_text(render(saved["rows"], saved["meta"]))
        if args.readme:
            update_readme(args.readme, readme_summary(saved["rows"]), "control-table")
        return 0
    rows = []
    if args.append and (out / "control.json").exists():
        rows = json.loads((out / "control.json").read_text())["rows"]
    commit = provenance.commit()
    meta = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "cores": cores(args.n_jobs), "machine": platform.processor() or platform.machine(),
            "commit": commit, "command": "python benchmarks/control.py " + " ".join(
                sys.argv[1:] if argv is None else argv),
            "args": dataclasses.asdict(args)}
    n = cores(args.n_jobs)

    def save(row: dict, load_before: float) -> None:
        row["run"] = {"date": meta["date"], "commit": commit, "command": meta["command"],
                      "load": [load_before, round(os.getloadavg()[0], 1)]}
        rows[:] = [r for r in rows if (r["task"], r["framework"], r["seed"]) !=
                   (row["task"], row["framework"], row["seed"])] + [row]
        (out / "control.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
        (out / "control.md").write_text(render(rows, meta))
        if args.readme:
            update_readme(args.readme, readme_summary(rows), "control-table")
        print(json.dumps({k: v for k, v in row.items() if k != "settings"}), flush=True)

    for name in names:
        task = LADDER[name]
        for seed in seeds:
            if not args.no_es_search:
                load = round(os.getloadavg()[0], 1)
                row, final, snapped = run_es_search(task, seed, args)
                snapshots = snapped.saved
                # the ceilings right after the run and again after the test: the higher
                first = (final_ceiling(final, n, args.ceiling_seconds),
                         run_ceiling(final, snapshots, seed, n, args.ceiling_seconds))
                returns = test_returns(final, args.test_episodes, n)
                second = (final_ceiling(final, n, args.ceiling_seconds),
                          run_ceiling(final, snapshots, seed, n, args.ceiling_seconds))
                row.update(test_mean=float(returns.mean()), test_std=float(returns.std()),
                           test_episodes=args.test_episodes,
                           ceiling=max(first[0], second[0]),
                           run_ceiling=max(first[1], second[1]), ceiling_runs=2)
                if task.target is not None:  # a time to it (None: not reached)
                    row["time_to_target"] = time_to_target(final, snapped, task, args, n)
                save(row, load)
            if not args.no_evotorch:
                load = round(os.getloadavg()[0], 1)
                save(run_evotorch(task, seed, args), load)
    return 0


if __name__ == "__main__":
    sys.exit(main())
