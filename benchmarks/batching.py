"""Batched scoring against one ``score()`` per candidate, with this repository's targets.

    python benchmarks/batching.py                       # the full benchmark (~7 min)
    python benchmarks/batching.py --quick               # a smoke run (~1 min)
    python benchmarks/batching.py --only-runs           # the whole runs only
    python benchmarks/batching.py --render --out DIR    # re-render DIR/batching.json
    python benchmarks/batching.py --render --readme README.md --readme benchmarks/README.md

It measures with ``benchmarks/harness/batching.py`` (what is timed and how), then judges
the targets and writes ``batching.md`` (with the targets) and ``batching.json`` into
``--out`` (default ``benchmarks/results``); ``--readme FILE`` replaces FILE's
``batching-table`` (the short table) and ``batching-detail`` (every population and worker
count) marker blocks with the run's figures. Time it alone:
``flock /work/coord/bench.lock python benchmarks/batching.py``.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [p for p in (os.path.dirname(HERE), HERE) if p not in sys.path]

from benchmarks.harness.batching import (Settings, benchmark, markdown,  # noqa: E402
                                         run_summary, write)
from provenance import commit  # noqa: E402
from readme_table import markers, update_readme  # noqa: E402

#: population 64 on 2 workers, batched >= 20x the per-candidate path
POPULATION, WORKERS, SPEEDUP = 64, 2, 20.0
#: digits >= 95% held-out accuracy within 5 minutes on 2 cores
ACCURACY, SECONDS = 0.95, 300.0


def targets(result: dict) -> list[str]:
    """The targets, one line each with this run's figure: met or NOT met."""
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
        "", "## Targets", "",
        f"Population {POPULATION} on {WORKERS} workers, batched generations >= "
        f"{SPEEDUP:.0f}x faster than the per-candidate path of the same built-in "
        f"(`alone`); digits >= {ACCURACY:.0%} held-out accuracy within {SECONDS:.0f} s on "
        f"{WORKERS} cores.", ""] + (judged or [f"- none measured here (the targets need "
                                                 f"{WORKERS} workers)"])) + "\n"


# ------------------------------------------------------------------ the README's tables
def _speedup(result: dict, problem: str, stage: str, pop: int, workers: int) -> float | None:
    return next((s["time_vs_alone"] for s in result["speedups"]
                 if (s["problem"], s["stage"], s["population"], s["workers"])
                 == (problem, stage, pop, workers) and "time_vs_alone" in s), None)


CASE_NAMES = {("cartpole", "balanced"): "CartPole, balancing policy",
              ("cartpole", "start"): "CartPole, starting policy (short, uneven episodes)",
              ("pendulum", "start"): "Pendulum"}


def tables(result: dict) -> dict[str, str]:
    """The README's marker blocks from one run: ``batching-table`` (population 64 on 2
    workers, each target met or not) and ``batching-detail`` (every population and worker
    count, the whole runs, digits)."""
    short = ["From `benchmarks/results/batching.json` (`python benchmarks/batching.py "
             "--render --readme README.md` writes this table):", "",
             f"| problem | per-candidate time / batched time | target: {SPEEDUP:.0f}x |",
             "|---|---|---|"]
    for (problem, stage), name in CASE_NAMES.items():
        value = _speedup(result, problem, stage, POPULATION, WORKERS)
        if value is None:
            continue
        extra = _speedup(result, problem, stage, 256, WORKERS)
        more = f" (population 256: {extra:.1f}x)" if problem == "pendulum" and extra else ""
        short.append(f"| {name} | {value:.1f}x{more} | "
                     f"{'met' if value >= SPEEDUP else 'NOT met'} |")
    d = [x for x in result.get("digits") or [] if x.get("workers", WORKERS) == WORKERS]
    if d:
        acc = statistics.median(x["test_accuracy"] for x in d)
        median = statistics.median(x["seconds"] for x in d)
        slowest = max(x["seconds"] for x in d)
        met = "met" if acc >= ACCURACY and slowest <= SECONDS else "NOT met"
        short.append(f"| digits, openai-es, 300 generations, {len(d)} seeds | "
                     f"{100 * acc:.1f}% held-out accuracy (median of the seeds), "
                     f"{median:.1f} s a run (median; slowest {slowest:.1f} s) | "
                     f"{ACCURACY:.0%} in {SECONDS / 60:.0f} minutes: {met} |")
    long = ["Generation time of the per-candidate path over the batched one "
            "(`python benchmarks/batching.py --render --readme benchmarks/README.md` writes "
            "this table):", "", "| problem | pop | 1 worker | 2 workers |", "|---|---|---|---|"]
    for (problem, stage), name in CASE_NAMES.items():
        for pop in sorted({s["population"] for s in result["speedups"]}):
            cells = [_speedup(result, problem, stage, pop, w) for w in (1, WORKERS)]
            if cells != [None, None]:
                long.append(f"| {name} | {pop} | " + " | ".join(
                    "-" if c is None else f"{c:.1f}x" for c in cells) + " |")
    whole = [r for r in run_summary(result.get("runs") or [])
             if (r["population"], r["workers"]) == (POPULATION, WORKERS)]
    if whole:
        long += ["", f"Whole runs (population {POPULATION}, {WORKERS} workers), the median "
                 "generation's speed-up: " + "; ".join(
                     f"{r['problem']} {r['generation_x']:.1f}x" for r in whole) + "."]
    if d:
        long += ["", f"digits (openai-es, population 64, 300 generations, {WORKERS} workers, "
                 f"{len(d)} seeds): median held-out accuracy {100 * acc:.1f}%; median time "
                 f"per run {median:.1f} s, slowest run {slowest:.1f} s."]
    found = re.search(r"Commit (\w+)", result.get("note", ""))
    long += ["", f"Measured at commit {found.group(1) if found else '?'}."]
    return {"batching-table": "\n".join(short) + "\n",
            "batching-detail": "\n".join(long) + "\n"}


def write_tables(blocks: dict[str, str], readmes: list[str]) -> None:
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
    parser.add_argument("--readme", action="append", default=[], metavar="FILE",
                        help="also replace FILE's batching-table and batching-detail marker "
                             "blocks with this run's figures (may be given twice)")
    args = parser.parse_args(argv)
    args.out = args.out or ("bench-results" if args.quick else os.path.join(HERE, "results"))
    if args.render:
        saved = os.path.join(args.out, "batching.json")
        if not os.path.isfile(saved):
            parser.error(f"--render reads {saved}, which does not exist (--out DIR: the "
                         f"folder of a batching.json)")
        with open(saved) as f:
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
    write_tables(tables(result), args.readme)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
