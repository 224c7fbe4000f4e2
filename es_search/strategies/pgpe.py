"""PGPE (Sehnke et al. 2010) with symmetric sampling, centred ranks and ClipUp."""
from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..candidates import Candidate, noise_vectors
from ..checks import check_number, check_positive_float
from .antithetic import Antithetic, antithetic_pairs, even_population, pairs
from .base import Rebuild, centered_ranks


@dataclass(frozen=True)
class PGPEState:
    center: np.ndarray  # mu, the mean of the search distribution
    stdev: np.ndarray  # sigma, one standard deviation per evolved value
    velocity: np.ndarray  # ClipUp's velocity v
    max_speed: float  # ClipUp's speed limit (PGPE.sized's)
    step_size: float  # ClipUp's step size alpha (PGPE.sized's)
    seed: int  # the run's seed: the noise of a candidate is noise(seed, generation, key)


class PGPE(Antithetic):
    """PGPE with symmetric sampling, centred ranks, adapted stdevs and ClipUp.

    Parameter-exploring policy gradients (Sehnke et al. 2010, Neural Networks 23(4)) as
    EvoTorch sets it up for control: symmetric sampling, centred ranks (Salimans et al.
    2017), one stdev per evolved value, and ClipUp for the mean (Toklu, Liskowski &
    Srivastava 2020, PPSN XVI). Each generation asks for ``population / 2`` pairs
    ``mu +- sigma * eps_k``; with ``u`` the centred ranks and ``N`` pairs (baseline 0)::

        g_mu    = 1/N * sum_k (u_k+ - u_k-) / 2 * sigma * eps_k
        g_sigma = 1/N * sum_k (u_k+ + u_k-) / 2 * ((sigma * eps_k)^2 - sigma^2) / sigma
        v       = clip(momentum * v + step_size * g_mu / |g_mu|, max_speed)   # ClipUp
        mu      = mu + v
        sigma   = clip(sigma + stdev_lr * g_sigma, (1 -+ stdev_max_change) * sigma)

    A zero gradient adds nothing (the velocity keeps its momentum); bounding each
    stdev's relative change (EvoTorch's and Ha's 2017 limiter) keeps it positive. The
    history's ``sigma`` is the mean stdev.

    Arguments (EvoTorch's names in brackets): ``population`` [popsize], even;
    ``sigma`` [stdev_init], every value's initial stdev (EvoTorch's radius ``r`` is
    ``sigma = r / sqrt(n)``); ``step_size`` [center_learning_rate], default
    ``max_speed / 2`` (the ClipUp paper's rule); ``max_speed``, default ``2 * step_size``
    (EvoTorch's) if that is given, else ``sigma * sqrt(n) / 15`` (the ClipUp paper's:
    a fifteenth of the initial radius); ``momentum`` (0.9); ``stdev_lr``
    [stdev_learning_rate] (0.1, EvoTorch's for its control experiments);
    ``stdev_max_change``, a stdev's largest relative change in a generation, in (0, 1).

    Example::

        >>> import numpy as np
        >>> from es_search.strategies import PGPE
        >>> strategy = PGPE(population=4, sigma=0.1, step_size=0.05)
        >>> state = strategy.init(np.zeros(3), 0.0, seed=0)
        >>> candidates = strategy.ask(state, generation=0)
        >>> state = strategy.tell(state, 0, candidates, [1.0, 0.0, 0.5, 0.5], rebuild=None)
        >>> round(float(np.linalg.norm(state.velocity)), 6)  # the first step: step_size
        0.05
    """

    name = "pgpe"

    def __init__(self, population: int = 32, sigma: float = 0.1,
                 step_size: float | None = None, max_speed: float | None = None,
                 momentum: float = 0.9, stdev_lr: float = 0.1,
                 stdev_max_change: float = 0.2):
        self.population = even_population(self.name, population)
        self.initial_sigma = check_positive_float("sigma", sigma)
        self.step_size, self.max_speed = (
            None if value is None else check_positive_float(name, value)
            for name, value in (("step_size", step_size), ("max_speed", max_speed)))
        self.momentum = check_number("momentum", momentum, "a number in [0, 1]",
                                     lambda v: 0.0 <= v <= 1.0)
        self.stdev_lr = check_positive_float("stdev_lr", stdev_lr)
        self.stdev_max_change = check_number("stdev_max_change", stdev_max_change,
                                             "a number in (0, 1)", lambda v: 0.0 < v < 1.0)

    def sized(self, n: int) -> PGPE:
        """With ClipUp's ``max_speed`` and ``step_size`` for ``n`` values, if not given."""
        sized = copy.copy(self)
        sized.max_speed = self.max_speed or (2.0 * self.step_size if self.step_size else
                                             self.initial_sigma * math.sqrt(n) / 15.0)
        sized.step_size = self.step_size or sized.max_speed / 2.0
        return sized

    def init(self, center: np.ndarray, center_score: float, seed: int) -> PGPEState:
        center, sized = np.array(center, dtype=np.float64), self.sized(np.size(center))
        return PGPEState(center, np.full(center.size, self.initial_sigma),
                         np.zeros_like(center), float(sized.max_speed),
                         float(sized.step_size), int(seed))

    def ask(self, state: PGPEState, generation: int) -> list[Candidate]:
        # one stdev array for all candidates: it pickles once per chunk of tasks
        return pairs(self.population // 2, float(state.stdev.mean()), state.stdev)

    def _tell(self, state: PGPEState, generation: int, candidates: Sequence[Candidate],
              scores: list[float], rebuild: Rebuild) -> PGPEState:
        keys, plus, minus = antithetic_pairs(self.name, candidates, centered_ranks(scores))
        n, sigma = state.center.size, state.stdev
        g_mu, g_sigma = np.zeros(n), np.zeros(n)
        used = [key for key in keys if plus[key] or minus[key]]  # u+ = u- = 0 adds nothing
        for key, eps in noise_vectors(state.seed, generation, used, n):
            difference, mean = plus[key] - minus[key], (plus[key] + minus[key]) / 2.0
            # Sehnke et al. 2010, symmetric sampling: (r+ - r-)/2 * (theta - mu) for mu,
            # ((r+ + r-)/2 - b) * ((theta - mu)^2 - sigma^2) / sigma for sigma, b = 0
            g_mu += (difference / 2.0) * (sigma * eps)
            g_sigma += mean * (sigma * (eps * eps - 1.0))
        g_mu /= max(len(keys), 1)
        g_sigma /= max(len(keys), 1)
        # ClipUp (Toklu et al. 2020): normalised gradient, momentum, clipped speed
        velocity = self.momentum * state.velocity
        norm = float(np.linalg.norm(g_mu))
        if norm > 0.0 and math.isfinite(norm):
            velocity = velocity + (state.step_size / norm) * g_mu
        speed = float(np.linalg.norm(velocity))
        if speed > state.max_speed:
            velocity = velocity * (state.max_speed / speed)
        center = state.center + velocity
        # the stdev follows its gradient, each value within +- stdev_max_change of itself
        change = self.stdev_max_change
        stdev = np.clip(sigma + self.stdev_lr * g_sigma, (1.0 - change) * sigma,
                        (1.0 + change) * sigma)
        return PGPEState(center, stdev, velocity, state.max_speed, state.step_size,
                         state.seed)

    def sigma(self, state: PGPEState) -> float:
        return float(state.stdev.mean())
