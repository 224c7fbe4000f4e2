"""The blog post's workflow, rewritten on es_search.

The post builds six agents, zips them with six weight dicts, and scores the pairs with
``multiprocessing.Pool.map`` and ``functools.partial(process_input, b=45, c=33)``. Here
the agent is an ``es_search.Agent``, the weights are a list of dicts, and one call scores
them on all cores, in input order, each task under its own seed (so agents that take
random actions get independent, reproducible streams).

    python scripts/blog_parallel.py --work 2000
"""
from __future__ import annotations

import argparse
import time

import torch

import es_search
from es_search.problems.blog import BlogAgent


def main(argv=None) -> list[float]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=int, default=1000,
                        help="dummy CPU loop per score (the post's 12000 is ~10 s a call)")
    parser.add_argument("--n-jobs", type=int, default=-1)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    # The post's agent and the weights it explores: [[k, k, k]] for k = 1..6.
    agent = BlogAgent([1, 1, 1], work=args.work)
    batch_w = [{"fc1.weight": torch.tensor([[k, k, k]], dtype=torch.float32)}
               for k in range(1, 7)]

    started = time.perf_counter()
    # The post's Pool.map(partial(process_input, b=45, c=33), zip(agents, weights)):
    scores = es_search.evaluate(agent, batch_w, n_jobs=args.n_jobs, seed=args.seed,
                                score_kwargs={"b": 45, "c": 33})
    elapsed = time.perf_counter() - started

    for w, s in zip(batch_w, scores):
        print(f"w: {w['fc1.weight'].tolist()}  score: {s}")
    print(f"\nSCORES:  {scores}  ({elapsed:.2f} s)")
    return scores


if __name__ == "__main__":
    from run_args import script_main  # scripts/run_args.py: bad input in one line
    script_main(main)
