"""Train a CartPole-v1 policy that samples its actions, with es_search, on all cores.

Top to bottom: the arguments (a dataclass), the agent, the run, a test of the result.

    python scripts/train_cartpole.py --generations 40 --out runs/cartpole-script
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import es_search
from es_search.problems import GymPolicy
from run_args import RunArgs, parse, script_main  # scripts/run_args.py: --seed, --out, ...


@dataclass
class Args(RunArgs):  # and --seed, --n-jobs, --out, --no-progress
    generations: int = 40
    """generations of the search"""
    population: int = 16
    """candidates per generation"""
    sigma: float = 0.5
    """step size of the Gaussian jitter"""
    hidden: int = 0
    """hidden units of the policy (0: linear)"""
    episodes: int = 3
    """episodes averaged per score"""
    test_episodes: int = 20
    """episodes to test the policy the run hands back on, after the search (0: none)"""


def parse_args(argv=None) -> Args:
    return parse(Args, __doc__.splitlines()[0], argv)  # tyro: each field's docstring is its --help


def main(argv=None) -> float:
    args = parse_args(argv)
    agent = GymPolicy("CartPole-v1", hidden=args.hidden, episodes=args.episodes)
    result = es_search.run(agent, generations=args.generations, population=args.population,
                           sigma=args.sigma, seed=args.seed, n_jobs=args.n_jobs,
                           strategy_options={"reevaluate": True},  # returns are noisy
                           progress=args.progress, out=args.out, resume=args.resume,
                           overwrite=args.overwrite)

    # the run's answer: of the best evaluation and the centres kept over the run, the one
    # that scored best on fresh episodes at the end (result.chosen names it)
    answer = result.chosen_agent()
    returns = answer.returns(args.test_episodes, seed=10_000)  # seeded: the same each time
    test_return = float(np.mean(returns)) if len(returns) else float("nan")
    print(f"best search score {result.best_score:.1f}; handed back: {result.chosen}"
          + (f"; test return over {len(returns)} new episodes: {test_return:.1f} (max 500)"
             if len(returns) else ""))
    return test_return


if __name__ == "__main__":
    script_main(main)
