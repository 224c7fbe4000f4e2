"""es_search's own cost per task, in this process (n_jobs=1): a trivial score, so what is
timed is the engine (seeding, building the candidate, the shared-statistics hooks).

    PYTHONPATH=. flock /work/coord/bench.lock python benchmarks/engine_overhead.py

Runs against whichever es_search is on PYTHONPATH (e.g. an older checkout, to compare).
Prints microseconds per task, the fastest of ``--repeats`` generations of ``--population``
candidates, for an agent without hooks and (when this es_search has them) one whose
hooks do the least possible.
"""
import argparse
import time

import torch

import es_search
from es_search.candidates import Candidate


class Plain(es_search.Agent):
    def __init__(self, dim=10):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(dim))

    def score(self):
        return 0.0


class Hooked(Plain):
    def __init__(self, dim=10):
        super().__init__(dim)
        self.register_buffer("count", torch.zeros(()))

    def task_report(self):
        return 1

    def merge_reports(self, reports):
        self.count += sum(r for r in reports if r is not None)
        return None

    def shared_state(self):
        return {"count": self.count}


def per_task_us(agent, population, repeats, kind):
    candidates = ([Candidate("jitter", 0.1)] if kind == "jitter" else
                  [Candidate("noise", 0.1, s, k) for k in range(population // 2)
                   for s in (1.0, -1.0)])
    candidates = (candidates * population)[:population]
    times = []
    with es_search.Evaluator(agent, seed=0, n_jobs=1) as ev:
        center = ev.local.get_flat()
        for generation in range(repeats):
            began = time.perf_counter()
            ev.score(generation, center, candidates)
            times.append((time.perf_counter() - began) / population * 1e6)
    return min(times)  # the least disturbed generation: the engine's own cost


def main():
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--population", type=int, default=64,
                        help="candidates per generation (default 64)")
    parser.add_argument("--repeats", type=int, default=200,
                        help="generations timed; the fastest counts (default 200)")
    args = parser.parse_args()
    hooks = hasattr(es_search.Agent, "task_report")
    print(f"es_search from {es_search.__file__}")
    print("per task: 'jitter' candidates (a hill climber's) and 'noise' ones (openai-es, "
          "pgpe, ars); 'plain': an agent without the shared-statistics hooks, 'hooked': "
          "one whose task_report/merge_reports/shared_state do the least possible")
    for kind in ("jitter", "noise"):
        line = f"{kind:6s} plain {per_task_us(Plain(), args.population, args.repeats, kind):7.1f} us/task"
        if hooks:
            line += f"   hooked {per_task_us(Hooked(), args.population, args.repeats, kind):7.1f} us/task"
        print(line)


if __name__ == "__main__":
    main()
