"""Fit a small network to data with batched scoring: your own score_batch, checked, searched.

Top to bottom: the arguments (a dataclass), the data (made here, no download), the agent
(``score_batch`` with ``es_search.batched.vmap_call``: a whole group of candidates in one
forward pass), the check that each candidate's score is its own, the run, and a test of
the final centre and the best weights on held-out points.

    python scripts/fit_batched.py --generations 300
    python scripts/fit_batched.py --score-batch-size 0    # one score() per candidate
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import torch

import es_search
from es_search.checks import check_int
from run_args import RunArgs, parse, script_main  # scripts/run_args.py: --seed, --out, ...


@dataclass
class Args(RunArgs):  # and --seed, --n-jobs, --out, --no-progress
    generations: int = 300
    """generations of the search"""
    population: int = 64
    """candidates per generation (antithetic pairs)"""
    sigma: float = 0.05
    """standard deviation of the search's noise"""
    learning_rate: float = 0.03
    """openai-es's Adam step"""
    hidden: int = 16
    """hidden units of the 1-hidden-1 tanh network"""
    points: int = 256
    """data points, a quarter of them held out"""
    score_batch_size: int = 32
    """candidates per score_batch() call (0: one score() per candidate: the same result,
    scores equal to float32 rounding)"""


def parse_args(argv=None) -> Args:
    return parse(Args, __doc__.splitlines()[0], argv)  # tyro: each field's docstring is its --help


def make_data(points: int, seed: int):
    """y = sin(x) + 0.3 cos(3x) + noise on [-3, 3]: (x_train, y_train, x_test, y_test)."""
    generator = torch.Generator().manual_seed(seed)
    x = torch.rand(points, 1, generator=generator) * 6 - 3
    y = torch.sin(x) + 0.3 * torch.cos(3 * x) + 0.05 * torch.randn(points, 1,
                                                                     generator=generator)
    held_out = points // 4
    return x[held_out:], y[held_out:], x[:held_out], y[:held_out]


class Regressor(es_search.Agent):
    """A 1-``hidden``-1 tanh network scored by minus its mean squared error on ``x``, ``y``."""

    def __init__(self, x: torch.Tensor, y: torch.Tensor, hidden: int, score_batch_size: int):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(1, hidden), torch.nn.Tanh(),
                                       torch.nn.Linear(hidden, 1))
        self.x, self.y = x, y  # plain tensors: sent to each worker once, with the agent
        self.score_batch_size = score_batch_size

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def score_batch(self, params, seeds):
        # params: each evolved parameter stacked over the group, (group, ...) -> one
        # forward pass of every candidate on the data; each row depends on its own
        # weights only, so the default score() (a group of one) computes the same
        pred = es_search.batched.vmap_call(self, params, self.x)  # (group, n, 1)
        return -((pred - self.y) ** 2).mean(dim=(1, 2))

    def mse(self, x: torch.Tensor, y: torch.Tensor) -> float:
        with torch.no_grad():
            return float(((self(x) - y) ** 2).mean())


def main(argv=None) -> float:
    args = parse_args(argv)
    check_int("points", args.points, 4, " (a quarter of them are held out)")
    check_int("hidden", args.hidden, 1, " (units of the network's tanh layer)")
    x, y, x_test, y_test = make_data(args.points, args.seed)  # the run's seed makes the data
    torch.manual_seed(args.seed)  # the starting weights
    agent = Regressor(x, y, args.hidden, args.score_batch_size)

    # before a long run: is each candidate's score its own? (raises, naming the
    # candidates, if a row depends on the rest of its group)
    es_search.check_score_batch(agent, sigma=args.sigma, seed=args.seed)

    started = time.perf_counter()
    result = es_search.run(agent, generations=args.generations, strategy="openai-es",
                           population=args.population, sigma=args.sigma,
                           strategy_options={"learning_rate": args.learning_rate},
                           seed=args.seed, n_jobs=args.n_jobs, progress=args.progress,
                           out=args.out, resume=args.resume,
                           overwrite=args.overwrite)
    seconds = time.perf_counter() - started

    start_mse = agent.mse(x_test, y_test)
    center_mse = result.center_agent().mse(x_test, y_test)
    best_mse = result.best_agent().mse(x_test, y_test)
    print(f"{args.generations} generations in {seconds:.1f} s; held-out mean squared "
          f"error: {start_mse:.4f} at the start, {center_mse:.4f} for the final centre, "
          f"{best_mse:.4f} for the best weights (the run hands back: {result.chosen})")
    return center_mse


if __name__ == "__main__":
    script_main(main)
