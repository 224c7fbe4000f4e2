"""How a generation of long, uneven tasks is shared among the local (loky) workers.

    PYTHONPATH=$PWD python benchmarks/chunking.py                  # LunarLander, 40 generations
    PYTHONPATH=$PWD python benchmarks/chunking.py --task hopper --generations 60

The same run (same seed: the same candidates, episodes and results, checked) is timed
with each rule, interleaved, ``--reps`` times: ``claims`` (es_search's rule for tasks of
2 ms or more: each worker claims tasks one at a time from a shared counter,
``es_search.dispatch``), ``capK`` (chunks handed out by the main process, at most K per
worker, of about 5 ms or more; ``cap1`` is one chunk per worker) and ``seconds=X``
(chunks of about X seconds, down to one task each, no cap). Measured on 2 cores,
3 interleaved reps, medians (figures in the commits' notes, no results file):
2026-11-30, executor round trips: LunarLander 40 generations: claims 7.52 s, cap1 7.74 s
(0.972x), cap4 7.69 s (0.978x); Hopper 60 generations: claims 7.51 s, cap1 7.65 s
(0.981x), cap4 7.94 s (0.946x). 2026-12-03, the worker loops (``--rules
claims,cap1,cap4``, LunarLander, the machine slower): claims 32.99 s, cap1 33.51 s
(0.984x), cap4 33.85 s (0.975x); ``--rules claims,seconds=0.005`` (one rep): claims
32.85 s, seconds=0.005 36.52 s (0.90x). Handing out more chunks costs more than it
balances, over the worker loops too; claiming balances without it. Later that day (its
chunk rules switched claims off again; 20 generations, 5 reps on a loaded VM, reps from
6.4 to 17.7 s): cap1 9.53 s, cap4 7.30 s, claims 10.03 s: under a load, handing out
chunks as workers come free balances too. es_search's pools that cannot claim, the
clusters', deal their chunks out in turn, up front: they get ``cap1``.
Prints the median wall time and environment steps per second of each rule, and each
against the first.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import es_search  # noqa: E402
from es_search.dispatch import ChunkPolicy  # noqa: E402
from es_search.problems import load_problem  # noqa: E402

CLAIM_UNIT, COUNT = ChunkPolicy.claim_unit, ChunkPolicy.count  # es_search's own rule


def chunk_rule(cap: int | None, seconds: float):
    """``ChunkPolicy.count`` for a chunk rule: tasks of 2 ms or more in chunks of about
    ``seconds`` or more, at most ``cap`` per worker (None: any), down to one task each."""
    def count(self, n: int, measured) -> int:
        task = measured.task_seconds
        if task is None or task < ChunkPolicy.BALANCE_FROM:
            return measured.n_workers
        per_worker = max(1, n // measured.n_workers)
        k = max(1, min(per_worker, int(per_worker * task / seconds)))
        return measured.n_workers * (k if cap is None else min(k, cap))
    return count


def one_run(task: str, generations: int, seed: int, rule: str) -> tuple[float, list, int]:
    cls = load_problem(task)
    config = dict(cls.default_config)
    if rule == "claims":  # es_search's rule on loky
        ChunkPolicy.claim_unit, ChunkPolicy.count = CLAIM_UNIT, COUNT
    else:  # no claims: chunks handed out by the main process
        ChunkPolicy.claim_unit = lambda self, measured: 0
        ChunkPolicy.count = chunk_rule(int(rule[3:]), 0.005) if rule.startswith("cap") \
            else chunk_rule(None, float(rule.split("=")[1]))
    began = time.perf_counter()
    result = es_search.run(cls(), generations=generations, population=config["population"],
                           sigma=config["sigma"], strategy=config.get("strategy"),
                           strategy_options=config.get("strategy_options"), seed=seed,
                           n_jobs=-1, progress=False)
    wall = time.perf_counter() - began
    return wall, [r["scores"] for r in result.history], result.history[-1].get("steps") or 0


def rule_list(text: str) -> list[str]:
    """``--rules``, each rule checked before any run."""
    rules = text.split(",")
    for rule in rules:
        try:
            if rule != "claims" and not (int(rule[3:]) if rule.startswith("cap") else
                                         float(rule.split("=")[1])) > 0:
                raise ValueError
        except (ValueError, IndexError):
            raise argparse.ArgumentTypeError(
                f"{rule!r} is not a rule: claims, capK or seconds=X (K, X > 0)") from None
    return rules


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--task", default="lunarlander")
    parser.add_argument("--generations", type=int, default=40)
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rules", default="claims,cap1,cap4", type=rule_list,
                        help="comma-separated: claims, capK (at most K chunks per worker), "
                             "seconds=X (chunks of about X s)")
    args = parser.parse_args(argv)
    rules = args.rules
    walls: dict[str, list[float]] = {r: [] for r in rules}
    reference, steps = None, 0
    one_run(args.task, 2, args.seed, rules[0])  # start the workers (they persist)
    for _ in range(args.reps):
        for rule in rules:
            wall, scores, steps = one_run(args.task, args.generations, args.seed, rule)
            if reference is None:
                reference = scores
            elif scores != reference:
                raise SystemExit(f"{rule}: other scores than the first run: a bug")
            walls[rule].append(wall)
            print(f"{rule}: {wall:.2f} s", flush=True)
    base = statistics.median(walls[rules[0]])
    print(f"\n{args.task}, {args.generations} generations, {steps} environment steps, "
          f"median of {args.reps} interleaved runs (workers already started):")
    for rule in rules:
        wall = statistics.median(walls[rule])
        print(f"  {rule:10s} {wall:7.2f} s  {steps / wall:9,.0f} steps/s  "
              f"{base / wall:.3f}x {rules[0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
