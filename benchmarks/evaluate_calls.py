"""What one call costs in a scoring loop of your own: ``es_search.evaluate()`` (workers
started and stopped by every call) against ``Evaluator.evaluate()`` on workers kept
open between calls, side by side.

    PYTHONPATH=$PWD python benchmarks/evaluate_calls.py [--n-jobs 2] [--calls 30]

Each round times one ``evaluate()`` call and one ``Evaluator.evaluate()`` call on the
same weights (the blog post's agent, ``--candidates`` weight dicts, a ``--work`` loop
per score), alternating which goes first; it prints the median milliseconds per call
of each and their ratio. The scores of both are checked equal. Run it alone (``flock
/work/coord/bench.lock`` here).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import joblib
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import es_search  # noqa: E402
from es_search.problems.blog import BlogAgent  # noqa: E402


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--n-jobs", type=int, default=2)
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--candidates", type=int, default=16)
    parser.add_argument("--work", type=int, default=50,
                        help="the blog agent's dummy loop per score (50: ~10 us)")
    args = parser.parse_args(argv)

    agent = BlogAgent([1, 1, 1], work=args.work)
    weights = [{"fc1.weight": torch.full((1, 3), float(k))} for k in range(args.candidates)]
    fresh, kept = [], []
    with es_search.Evaluator(agent, n_jobs=args.n_jobs) as evaluator:
        for call in range(args.calls):
            order = ("fresh", "kept") if call % 2 == 0 else ("kept", "fresh")
            for which in order:
                began = time.perf_counter()
                if which == "fresh":
                    scores = es_search.evaluate(agent, weights, n_jobs=args.n_jobs,
                                                generation=call)
                else:
                    kept_scores = evaluator.evaluate(weights, generation=call)
                (fresh if which == "fresh" else kept).append(time.perf_counter() - began)
            if scores != kept_scores:
                raise AssertionError(f"call {call}: {scores} != {kept_scores}")
        stats = evaluator.stats
    figures = {"evaluate_ms": statistics.median(fresh) * 1e3,
               "evaluator_ms": statistics.median(kept) * 1e3}
    figures["ratio"] = figures["evaluate_ms"] / figures["evaluator_ms"]
    print(f"{args.calls} calls of {args.candidates} candidates, n_jobs={args.n_jobs} "
          f"({joblib.cpu_count()} cores), blog agent, work={args.work}: median per call")
    print(f"  es_search.evaluate()    {figures['evaluate_ms']:8.2f} ms (workers started "
          f"each call)")
    print(f"  Evaluator.evaluate()    {figures['evaluator_ms']:8.2f} ms (workers kept; "
          f"{stats['parallel_generations']} calls on the workers, "
          f"{stats['sequential_generations']} in this process, as the dispatch chose)")
    print(f"  ratio                   {figures['ratio']:8.1f}x")
    return figures


if __name__ == "__main__":
    main()
