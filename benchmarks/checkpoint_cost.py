"""What checkpoints cost a run with a large state, and what ``checkpoint_every`` saves.

    PYTHONPATH=$PWD python benchmarks/checkpoint_cost.py [--generations 20] [--repeats 3]
    PYTHONPATH=$PWD python benchmarks/checkpoint_cost.py --out benchmarks/results

For each case (an agent of ``n`` weights whose score is a cheap quadratic, a strategy,
population 16, ``--n-jobs`` workers), one round runs the same search without a run
folder, with ``out=`` and a checkpoint every generation, and with
``checkpoint_every=10``, in an order that rotates between rounds; it prints the median
wall time of each over ``--repeats`` rounds (after an untimed warm-up run that starts
the workers), the checkpoint's size, and the mean time
of one checkpoint write (``RunFolder.checkpoint_cost``). The three histories are
checked equal (a checkpoint never changes a result). With ``--out DIR`` it also writes
``DIR/checkpoint_cost.md``. Run it alone (``flock /work/coord/bench.lock`` here).
"""
from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
import warnings

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
    seen = []
    original = run_folder.RunFolder.close

    def close(self):  # the folder's own account of its checkpoint writes
        seen.append(self.checkpoint_cost)
        original(self)

    run_folder.RunFolder.close = close
    try:
        began = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # the checkpoint notice
            result = es_search.run(Wide(n), strategy=strategy, generations=generations,
                                   population=16, n_jobs=n_jobs, seed=0, progress=False,
                                   **kwargs)
        wall = time.perf_counter() - began
    finally:
        run_folder.RunFolder.close = original
    costs.extend(seen)
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
    say("| strategy | weights | checkpoint | one write | no out | every 1 | every 10 |")
    say("|---|---|---|---|---|---|---|")
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
        every_one = [c for c in costs if c.count > args.generations // 2]
        one_write = sum(c.seconds for c in every_one) / sum(c.count for c in every_one)
        row = {"strategy": strategy, "weights": int(n), "size_mb": costs[-1].size / 1e6,
               "write_ms": one_write * 1e3,
               **{mode: statistics.median(walls[mode]) for mode in MODES}}
        rows.append(row)
        say(f"| {strategy} | {int(n):,} | {row['size_mb']:.1f} MB | {row['write_ms']:.0f} ms "
            f"| {row['no out']:.2f} s | {row['every 1']:.2f} s | {row['every 10']:.2f} s |")
    shutil.rmtree(os.path.dirname(folder), ignore_errors=True)
    if args.out:
        write(args.out, lines)
    return rows


def write(out: str, lines: list[str]) -> None:
    from provenance import commit
    os.makedirs(out, exist_ok=True)
    header = [
        "# Checkpoint cost (benchmarks/checkpoint_cost.py)", "",
        f"`python benchmarks/checkpoint_cost.py --out {out}` at {commit()}, "
        f"{time.strftime('%Y-%m-%d')}, Python {platform.python_version()}, torch "
        f"{torch.__version__}, load average {os.getloadavg()[0]:.2f} at the end. An agent of "
        f"n weights with a cheap quadratic score; the same search with no run folder, with "
        f"a checkpoint every generation, and every 10, the three interleaved round by round "
        f"(their histories checked equal). \"one write\": the mean time of one checkpoint "
        f"write (with best_weights.pt when the best improved), as the run folder measured "
        f"it. Single runs are noisy: compare within a row.", ""]
    with open(os.path.join(out, "checkpoint_cost.md"), "w") as f:
        f.write("\n".join(header + lines) + "\n")
    print(f"wrote {os.path.join(out, 'checkpoint_cost.md')}")


if __name__ == "__main__":
    main()
