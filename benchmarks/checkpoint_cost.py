"""What checkpoints cost a run with a large state, thinned out by the run folder (a due one
waits while writing has taken over 5% of the run's time), and what ``checkpoint_every``
saves besides.

    PYTHONPATH=$PWD python benchmarks/checkpoint_cost.py [--generations 20] [--repeats 3]
    PYTHONPATH=$PWD python benchmarks/checkpoint_cost.py --out benchmarks/results

For each case (an agent of ``n`` weights whose score is a cheap quadratic, a strategy,
population 16, ``--n-jobs`` workers), one round runs the same search without a run
folder, with ``out=`` and a checkpoint every generation, and with
``checkpoint_every=10``, in an order that rotates between rounds; it prints the median
wall time of each over ``--repeats`` rounds (after an untimed warm-up run that starts
the workers), the checkpoint's size, the mean time of one checkpoint write and how many
the "every 1" runs wrote (``RunFolder.save_pending`` timed). The three histories are
checked equal (a checkpoint never changes a result). With ``--out DIR`` it also writes
``DIR/checkpoint_cost.md``. Run it alone (``flock /work/coord/bench.lock`` here).
"""
from __future__ import annotations

import argparse
import os
import platform
import shlex
import shutil
import statistics
import sys
import tempfile
import time

import joblib
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(HERE, ".."), HERE]

import es_search  # noqa: E402
from es_search import folder as run_folder  # noqa: E402

CASES = (("hill-climb", 1_000_000), ("pgpe", 1_000_000), ("cma-es", 2_000))
MODES = ("no out", "every 1", "every 10")


class Wide(es_search.Agent):
    """``n`` weights, maximise -|w - 1|^2: the score costs little, the state is large."""

    def __init__(self, n: int):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(n))

    def score(self) -> float:
        return -float(((self.w - 1) ** 2).sum())


def one_run(strategy: str, n: int, mode: str, generations: int, n_jobs: int,
            folder: str, costs: list) -> tuple[float, list]:
    shutil.rmtree(folder, ignore_errors=True)
    kwargs = {} if mode == "no out" else {"out": folder,
                                           "checkpoint_every": int(mode.split()[1])}
    writes = []  # the seconds of each checkpoint this run wrote
    original = run_folder.RunFolder.save_pending

    def save_pending(self):
        due, began = self._pending is not None, time.perf_counter()
        original(self)
        if due:
            writes.append(time.perf_counter() - began)

    run_folder.RunFolder.save_pending = save_pending
    try:
        began = time.perf_counter()
        result = es_search.run(Wide(n), strategy=strategy, generations=generations,
                               population=16, n_jobs=n_jobs, seed=0, progress=False, **kwargs)
        wall = time.perf_counter() - began
    finally:
        run_folder.RunFolder.save_pending = original
    if mode == "every 1":
        costs.append((writes, os.path.getsize(os.path.join(folder, "checkpoint.pkl"))))
    history = [{k: v for k, v in r.items() if k != "seconds"} for r in result.history]
    return wall, history


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--generations", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--n-jobs", type=int, default=2)
    parser.add_argument("--cases", nargs="*", default=[f"{s}:{n}" for s, n in CASES],
                        help="STRATEGY:WEIGHTS, e.g. cma-es:2000")
    parser.add_argument("--out", default=None, help="also write DIR/checkpoint_cost.md")
    args = parser.parse_args(argv)
    rows, lines = [], []

    def say(line: str) -> None:
        print(line, flush=True)
        lines.append(line)

    folder = os.path.join(tempfile.mkdtemp(prefix="es_search_ckpt_"), "run")
    say(f"{args.generations} generations, population 16, n_jobs={args.n_jobs} "
        f"({joblib.cpu_count()} cores), median of {args.repeats} rounds")
    say("")
    say("| strategy | weights | checkpoint | one write | written (every 1) | no out | every 1 "
        "| every 10 |")
    say("|---|---|---|---|---|---|---|---|")
    for case in args.cases:
        strategy, n = case.split(":")
        walls = {mode: [] for mode in MODES}
        costs: list = []
        histories = {}
        one_run(strategy, int(n), "no out", 2, args.n_jobs, folder, [])  # warm: untimed
        for round_ in range(args.repeats):
            for k in range(len(MODES)):
                mode = MODES[(k + round_) % len(MODES)]
                wall, histories[mode] = one_run(strategy, int(n), mode, args.generations,
                                                args.n_jobs, folder, costs)
                walls[mode].append(wall)
        if not histories["no out"] == histories["every 1"] == histories["every 10"]:
            raise AssertionError(f"{case}: the histories differ between modes")
        writes = [w for run_writes, _ in costs for w in run_writes]
        row = {"strategy": strategy, "weights": int(n), "size_mb": costs[-1][1] / 1e6,
               "write_ms": statistics.mean(writes) * 1e3,
               "written": statistics.median(len(w) for w, _ in costs),
               **{mode: statistics.median(walls[mode]) for mode in MODES}}
        rows.append(row)
        say(f"| {strategy} | {int(n):,} | {row['size_mb']:.1f} MB | {row['write_ms']:.0f} ms "
            f"| {row['written']:g} of {args.generations + 1} | {row['no out']:.2f} s "
            f"| {row['every 1']:.2f} s | {row['every 10']:.2f} s |")
    shutil.rmtree(os.path.dirname(folder), ignore_errors=True)
    if args.out:
        write(args.out, lines, sys.argv[1:] if argv is None else list(argv))
    return rows


def write(out: str, lines: list[str], argv: list[str]) -> None:
    from provenance import commit
    os.makedirs(out, exist_ok=True)
    header = [
        "# Checkpoint cost (benchmarks/checkpoint_cost.py)", "",
        f"`python benchmarks/checkpoint_cost.py {shlex.join(argv)}` at {commit()}, "
        f"{time.strftime('%Y-%m-%d')}, Python {platform.python_version()}, torch "
        f"{torch.__version__}, load average {os.getloadavg()[0]:.2f} at the end. An agent of "
        f"n weights with a cheap quadratic score; the same search with no run folder, with "
        f"checkpoint_every=1 (the default: thinned out past 5% of the run's time) and 10, "
        f"the three interleaved round by round (their histories checked equal). \"one "
        f"write\": the mean time of one checkpoint write (with best_weights.pt when the best "
        f"improved); \"written\": how many the default wrote, the start's and the end's "
        f"included. Single runs are noisy: compare within a row.", ""]
    with open(os.path.join(out, "checkpoint_cost.md"), "w") as f:
        f.write("\n".join(header + lines) + "\n")
    print(f"wrote {os.path.join(out, 'checkpoint_cost.md')}")


if __name__ == "__main__":
    main()
