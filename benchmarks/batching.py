"""Batched scoring against one ``score()`` per candidate (issue 11), with this
repository's targets.

    python benchmarks/batching.py                       # the full benchmark (~7 min)
    python benchmarks/batching.py --quick               # a smoke run (~1 min)
    python benchmarks/batching.py --only-runs           # the whole runs only
    python benchmarks/batching.py --render --out DIR    # re-render DIR/batching.json
    python benchmarks/batching.py --ranges --readme README.md --readme benchmarks/README.md
                                                        # the range over the committed runs

It measures with the library (``es-search bench --batching``, see
``es_search/bench/batching.py`` for what is timed and how), then judges issue 11's
targets and writes ``batching.md`` (with the targets) and ``batching.json`` into
``--out`` (default ``benchmarks/results``). Time it alone:
``flock /work/coord/bench.lock python benchmarks/batching.py``.

``--ranges`` measures nothing: it reads every full run committed in ``--out``
(``batching.json`` is run 1, ``batching-runN.json`` run N; move a new run's files to the
next ``batching-runN`` name to keep it) and prints the range over them of each figure the
targets judge, and how many runs met each target; ``--readme FILE`` replaces FILE's
``batching-table`` (the short table) and ``batching-ranges`` (every population and worker
count) marker blocks with them.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import re
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [p for p in (os.path.dirname(HERE),) if p not in sys.path]

from es_search.bench.batching import (Settings, benchmark, markdown,  # noqa: E402
                                      run_summary, write)
from provenance import commit  # noqa: E402
from readme_table import markers, update_readme  # noqa: E402

#: issue 11: population 64 on 2 workers, batched >= 20x the per-candidate path
POPULATION, WORKERS, SPEEDUP = 64, 2, 20.0
#: issue 11: digits >= 95% held-out accuracy within 5 minutes on 2 cores
ACCURACY, SECONDS = 0.95, 300.0


def targets(result: dict) -> list[str]:
    """Issue 11's targets, one line each with this run's figure: met or NOT met."""
    lines = []
    for s in result["speedups"]:
        if (s["population"], s["workers"]) == (POPULATION, WORKERS) and "time_vs_alone" in s:
            met = "met" if s["time_vs_alone"] >= SPEEDUP else "NOT met"
            gym = (f"; {s['steps_vs_gym']:.1f}x the steps per second of `gym`"
                   if "steps_vs_gym" in s else "")
            lines.append(f"- {s['problem']} ({s['stage']} centre): "
                         f"{s['time_vs_alone']:.1f}x `alone`: {met}{gym}")
    for r in run_summary(result.get("runs") or []):
        if (r["population"], r["workers"]) == (POPULATION, WORKERS):
            met = "met" if r["generation_x"] >= SPEEDUP else "NOT met"
            lines.append(f"- {r['problem']} run: median generation {r['generation_x']:.1f}x "
                         f"faster batched: {met}; the whole run {r['wall_x']:.1f}x")
    d = [r for r in result.get("digits") or [] if r.get("workers", WORKERS) == WORKERS]
    if d:
        acc = statistics.median(r["test_accuracy"] for r in d)
        slowest = max(r["seconds"] for r in d)
        met = "met" if acc >= ACCURACY and slowest <= SECONDS else "NOT met"
        lines.append(f"- digits: median held-out accuracy {acc:.4f}, slowest run "
                     f"{slowest:.1f} s: {met}")
    return lines


def report(result: dict) -> str:
    """The library's report and the targets."""
    judged = targets(result)
    return markdown(result, "python benchmarks/batching.py") + "\n".join([
        "", "## Targets (issue 11)", "",
        f"Population {POPULATION} on {WORKERS} workers, batched generations >= "
        f"{SPEEDUP:.0f}x faster than the per-candidate path of the same built-in "
        f"(`alone`); digits >= {ACCURACY:.0%} held-out accuracy within {SECONDS:.0f} s on "
        f"{WORKERS} cores.", ""] + (judged or [f"- none measured here (the targets need "
                                                 f"{WORKERS} workers)"])) + "\n"


# ------------------------------------------------------------------ the committed runs
def committed_runs(folder: str) -> list[tuple[int, dict]]:
    """The full runs saved in ``folder``, as (run number, result), in run order:
    ``batching.json`` is run 1, ``batching-runN.json`` run N; ``--quick`` runs are left
    out."""
    runs = []
    for path in glob.glob(os.path.join(folder, "batching*.json")):
        name = os.path.basename(path)
        found = re.fullmatch(r"batching(?:-run(\d+))?\.json", name)
        if not found:
            continue
        with open(path) as f:
            result = json.load(f)
        if not result.get("quick"):
            runs.append((int(found.group(1) or 1), result))
    return sorted(runs, key=lambda item: item[0])


def _span(values: list[float], fmt: str = ".1f") -> str:
    low, high = format(min(values), fmt), format(max(values), fmt)
    return low if low == high else f"{low}-{high}"


def _speedups(runs: list[tuple[int, dict]], problem: str, stage: str, pop: int,
              workers: int) -> list[float]:
    return [s["time_vs_alone"] for _, r in runs for s in r["speedups"]
            if (s["problem"], s["stage"], s["population"], s["workers"])
            == (problem, stage, pop, workers) and "time_vs_alone" in s]


def _digits(runs: list[tuple[int, dict]]) -> list[dict]:
    """Per run with digits figures: its median accuracy, median and slowest seconds."""
    out = []
    for _, r in runs:
        d = [x for x in r.get("digits") or [] if x.get("workers", WORKERS) == WORKERS]
        if d:
            out.append({"accuracy": statistics.median(x["test_accuracy"] for x in d),
                        "median": statistics.median(x["seconds"] for x in d),
                        "slowest": max(x["seconds"] for x in d), "seeds": len(d)})
    return out


CASE_NAMES = {("cartpole", "balanced"): "CartPole, balancing policy",
              ("cartpole", "start"): "CartPole, starting policy (short, uneven episodes)",
              ("pendulum", "start"): "Pendulum"}


def ranges(runs: list[tuple[int, dict]]) -> dict[str, str]:
    """The marker blocks: ``batching-table`` (population 64 on 2 workers, each target
    with the number of runs that met it) and ``batching-ranges`` (every population and
    worker count the runs share, the whole runs, digits)."""
    if not runs:
        raise ValueError("no full batching runs committed (batching*.json)")
    n = len(runs)
    numbers = [k for k, _ in runs]
    listed = (f"{numbers[0]}-{numbers[-1]}" if numbers == list(range(numbers[0], numbers[-1] + 1))
              else ", ".join(map(str, numbers)))
    short = [f"Over runs {listed} of `python benchmarks/batching.py` (`--ranges` writes "
             f"this table):", "",
             f"| problem | per-candidate time / batched time | target: "
             f"{SPEEDUP:.0f}x |", "|---|---|---|"]
    for (problem, stage), name in CASE_NAMES.items():
        values = _speedups(runs, problem, stage, POPULATION, WORKERS)
        if not values:
            continue
        met = sum(v >= SPEEDUP for v in values)
        extra = _speedups(runs, problem, stage, 256, WORKERS)
        more = f" (population 256: {_span(extra)}x)" if problem == "pendulum" and extra else ""
        short.append(f"| {name} | {_span(values)}x{more} | met in {met} of "
                     f"{len(values)} runs |")
    digits = _digits(runs)
    if digits:
        met = sum(d["accuracy"] >= ACCURACY and d["slowest"] <= SECONDS for d in digits)
        short.append(
            f"| digits, openai-es, 300 generations, {digits[0]['seeds']} seeds | "
            f"{_span([100 * d['accuracy'] for d in digits])}% held-out accuracy "
            f"(median of the seeds), {_span([d['median'] for d in digits])} s a run "
            f"(median; slowest {max(d['slowest'] for d in digits):.1f} s) | "
            f"{ACCURACY:.0%} in {SECONDS / 60:.0f} minutes: met in {met} of "
            f"{len(digits)} runs |")
    long = [f"The range over {n} runs (generation time of the per-candidate path over the "
            f"batched one; `python benchmarks/batching.py --ranges` writes this table):", "",
            "| problem | pop | 1 worker | 2 workers |", "|---|---|---|---|"]
    pops = sorted({s["population"] for _, r in runs for s in r["speedups"]})
    for (problem, stage), name in CASE_NAMES.items():
        for pop in pops:
            cells = []
            for workers in (1, WORKERS):
                values = _speedups(runs, problem, stage, pop, workers)
                partial = f" ({len(values)} runs)" if values and len(values) < n else ""
                cells.append(f"{_span(values)}x{partial}" if values else "-")
            if cells != ["-", "-"]:
                long.append(f"| {name} | {pop} | {cells[0]} | {cells[1]} |")
    whole = {}
    for _, r in runs:
        for item in run_summary(r.get("runs") or []):
            if (item["population"], item["workers"]) == (POPULATION, WORKERS):
                whole.setdefault(item["problem"], []).append(item["generation_x"])
    if whole:
        long += ["", f"Whole runs (population {POPULATION}, {WORKERS} workers), the median "
                 "generation's speed-up: " + "; ".join(
                     f"{problem} {_span(values)}x ({len(values)} runs)"
                     for problem, values in whole.items()) + "."]
    if digits:
        long += ["", f"digits (openai-es, population 64, 300 generations, {WORKERS} workers, "
                 f"{digits[0]['seeds']} seeds): median held-out accuracy "
                 f"{_span([100 * d['accuracy'] for d in digits])}%; median time per run "
                 f"{_span([d['median'] for d in digits])} s, slowest run "
                 f"{max(d['slowest'] for d in digits):.1f} s ({len(digits)} runs)."]
    commits = []
    for k, r in runs:
        found = re.search(r"Commit (\w+)", r.get("note", ""))
        commits.append(f"run {k} at {found.group(1) if found else '?'}")
    long += ["", "Runs: " + ", ".join(commits) + "."]
    return {"batching-table": "\n".join(short) + "\n", "batching-ranges": "\n".join(long) + "\n"}


def write_ranges(blocks: dict[str, str], readmes: list[str]) -> None:
    """Replace each marker block that each of ``readmes`` holds (at least one each)."""
    for path in readmes:
        with open(path) as f:
            text = f.read()
        held = [name for name in blocks if all(m in text for m in markers(name))]
        if not held:
            raise SystemExit(f"{path} has none of the markers "
                             f"{', '.join(markers(name)[0] for name in blocks)}")
        for name in held:
            update_readme(path, blocks[name], name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--quick", action="store_true", help="a smoke run")
    parser.add_argument("--out", default=None,
                        help="folder for batching.{md,json} (default: benchmarks/results; "
                             "with --quick, bench-results in the current folder, so that a "
                             "smoke run never replaces the committed tables)")
    parser.add_argument("--no-digits", action="store_true", help="skip the digits runs")
    parser.add_argument("--only-runs", action="store_true",
                        help="the whole runs only (no generation blocks, no digits)")
    parser.add_argument("--note", default="", help="a sentence for the report (e.g. "
                        "what else ran on the machine)")
    parser.add_argument("--render", action="store_true",
                        help="rewrite batching.md from the saved batching.json")
    parser.add_argument("--ranges", action="store_true",
                        help="print the range of each figure over the full runs committed "
                             "in --out (measures nothing)")
    parser.add_argument("--readme", action="append", default=[], metavar="FILE",
                        help="with --ranges: replace FILE's batching-table and "
                             "batching-ranges marker blocks (may be given twice)")
    args = parser.parse_args(argv)
    args.out = args.out or ("bench-results" if args.quick else os.path.join(HERE, "results"))
    if args.readme and not args.ranges:
        parser.error("--readme goes with --ranges")
    if args.ranges:
        blocks = ranges(committed_runs(args.out))
        write_ranges(blocks, args.readme)
        print("\n".join(blocks.values()))
        return 0
    if args.render:
        with open(os.path.join(args.out, "batching.json")) as f:
            result = json.load(f)
    else:
        # the targets are for 1 and 2 workers, whatever the machine
        settings = (Settings.quick if args.quick else Settings)(workers=(1, WORKERS))
        try:
            from es_search.problems import control  # noqa: F401
        except ImportError:  # reworked elsewhere: compare with the same class alone only
            settings.paths = ("batched", "alone")
        if args.no_digits:
            settings.digits_seeds = ()
        if args.only_runs:
            settings.populations = settings.trained_populations = settings.digits_seeds = ()
        result = benchmark(settings, quick=args.quick,
                           note=f"Commit {commit()}. {args.note}".strip())
    text = report(result)
    write(result, args.out, text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
