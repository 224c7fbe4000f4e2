"""The engine's speed targets (issue 30), each measured side by side in one run.

    python benchmarks/engine_targets.py [--n-jobs 2] [--reps 7]

Every figure is a median over ``--reps`` rounds; in each round the things compared run
one after the other (interleaved), so a noisy neighbour slows both. Scores are
calibrated pure-Python work (``es_search.bench.spin``: fixed work, no clock).

- **whole run**: 10 generations of 1.5 ms scores, population 64, worker start-up
  included (warm workers, as a script's second run): the run at ``n_jobs=1`` over N
  times the run at ``n_jobs=N``, divided by what N independent processes get on this
  machine (the ceiling, ``harness.schemes.ceiling``, measured in every round).
  Target >= 0.95.
- **warm start**: a 1-generation run of trivial scores, population 64, warm workers:
  ``n_jobs=N`` minus ``n_jobs=1``. Target <= 5 ms.
- **generation overhead**: a generation of 64 trivial tasks on N workers
  (``Evaluator``, the parallel path forced) minus 1/N of the same generation in this
  process (20 generations a round, after 5 that warm both paths up). Target <= 0.5 ms.
- **blog scheme**: 10 generations of 1 ms scores, population 64, through the blog
  post's scheme (a ``multiprocessing.Pool`` per generation, agents pickled per task)
  against ``es_search.run``: es_search's time over the scheme's. Target <= 0.25.

Writes ``benchmarks/results/engine_targets.md`` (``--out`` elsewhere). Run it against
another checkout with ``PYTHONPATH=/path/to/checkout``.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

# after PYTHONPATH's entries: PYTHONPATH=/path/to/checkout measures that checkout's engine
sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import es_search  # noqa: E402
from benchmarks import provenance  # noqa: E402
from benchmarks.harness.measure import load_average  # noqa: E402
from benchmarks.harness.schemes import blog_generation, ceiling  # noqa: E402
from es_search.bench import BenchAgent, calibrate  # noqa: E402
from es_search.candidates import Candidate  # noqa: E402

POPULATION = 64


def timed(fn) -> float:
    began = time.perf_counter()
    fn()
    return time.perf_counter() - began


def run(loops: int, generations: int, n_jobs: int) -> float:
    return timed(lambda: es_search.run(
        BenchAgent(loops=loops), generations=generations, population=POPULATION,
        seed=0, n_jobs=n_jobs, progress=False))


def generation(ev: es_search.Evaluator, k: int) -> float:
    center = ev.local.get_flat()
    candidates = [Candidate("jitter", 0.1)] * POPULATION
    return timed(lambda: ev.score(k, center, candidates))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n-jobs", type=int, default=2)
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results",
                                                       "engine_targets.md"))
    args = parser.parse_args()
    n, reps = args.n_jobs, args.reps
    if not 2 <= n <= os.cpu_count() or reps < 1 or not os.path.isdir(
            os.path.dirname(os.path.abspath(args.out))):
        parser.error(f"--n-jobs takes 2 to this machine's {os.cpu_count()} cores, --reps "
                     f"1 or more, --out a file in an existing folder")
    started = load_average()
    print(f"es_search {es_search.__file__}, load {started}", flush=True)
    loops = {ms: calibrate(ms / 1e3)["loops"] for ms in (1.0, 1.5)}
    times: dict[str, list[float]] = {k: [] for k in (
        "run1", "runN", "start1", "startN", "gen1", "genN", "blog", "es_blog", "ceiling")}
    run(0, 1, n)  # start the workers: every run below finds them warm
    for rep in range(reps):
        times["run1"].append(run(loops[1.5], 10, 1))
        times["runN"].append(run(loops[1.5], 10, n))
        times["ceiling"].append(ceiling([n], loops[1.5] * 200, 1)[n]["efficiency"])
        times["start1"].append(run(0, 1, 1))
        times["startN"].append(run(0, 1, n))
        times["blog"].append(timed(lambda: [
            blog_generation(BenchAgent(loops=loops[1.0]), POPULATION, n)
            for _ in range(10)]))
        times["es_blog"].append(run(loops[1.0], 10, n))
        # opened after the runs: an open Evaluator holds the warm workers
        with es_search.Evaluator(BenchAgent(), n_jobs=1) as one, es_search.Evaluator(
                BenchAgent(), n_jobs=n, sequential_fallback=False) as many:
            for k in range(25):  # the first 5 warm both paths up
                one_s, many_s = generation(one, k), generation(many, k)
                if k >= 5:
                    times["gen1"].append(one_s)
                    times["genN"].append(many_s)
    med = {k: statistics.median(v) for k, v in times.items()}
    ceil = med["ceiling"]
    whole = med["run1"] / (n * med["runN"]) / ceil
    start = (med["startN"] - med["start1"]) * 1e3
    overhead = (med["genN"] - med["gen1"] / n) * 1e3
    blog = med["es_blog"] / med["blog"]
    rows = [
        (f"whole run / ceiling (1.5 ms x {POPULATION}, 10 gens)", f"{whole:.3f}",
         ">= 0.95", whole >= 0.95,
         f"n_jobs=1 {med['run1']:.3f} s, n_jobs={n} {med['runN']:.3f} s, ceiling {ceil:.3f}"),
        ("warm start, n_jobs=N minus n_jobs=1 (ms)", f"{start:.1f}", "<= 5", start <= 5,
         f"{med['start1'] * 1e3:.1f} vs {med['startN'] * 1e3:.1f} ms"),
        (f"generation overhead, {POPULATION} trivial tasks (ms)", f"{overhead:.2f}",
         "<= 0.5", overhead <= 0.5,
         f"{med['genN'] * 1e3:.2f} ms on {n} workers, {med['gen1'] * 1e3:.2f} ms here"),
        ("es_search / blog scheme (1 ms x 64, 10 gens)", f"{blog:.3f}", "<= 0.25",
         blog <= 0.25, f"{med['es_blog']:.3f} s vs {med['blog']:.3f} s"),
    ]
    lines = [f"# Engine targets\n\n`python benchmarks/engine_targets.py --n-jobs {n} "
             f"--reps {reps}` at {provenance.commit()}, "
             f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} "
             f"cores; load {started} at the start, {load_average()} at the end; "
             f"medians of {reps} interleaved rounds.\n",
             "| target | figure | goal | met | measured |", "|---|---|---|---|---|"]
    lines += [f"| {name} | {figure} | {goal} | {'yes' if met else 'no'} | {note} |"
              for name, figure, goal, met, note in rows]
    print("\n".join(lines))
    with open(args.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
