"""OpenAI-ES: antithetic Gaussian sampling, centred ranks, weight decay and Adam."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..candidates import Candidate
from ..checks import check_number, check_positive_float
from .antithetic import Antithetic, antithetic_pairs, even_population, noise_sum
from .base import Rebuild, centered_ranks


@dataclass(frozen=True)
class OpenAIESState:
    center: np.ndarray  # theta, the mean of the search distribution
    sigma: float  # the (fixed) noise scale
    m: np.ndarray  # Adam's first moment
    v: np.ndarray  # Adam's second moment
    step: int  # Adam's step counter t
    seed: int  # the run's seed: the noise of a candidate is noise(seed, generation, key)


class OpenAIES(Antithetic):
    """OpenAI-ES: antithetic sampling, centred ranks, weight decay and Adam.

    Salimans, Ho, Chen, Sidor & Sutskever (2017, "Evolution Strategies as a Scalable
    Alternative to Reinforcement Learning"), Algorithm 2 with mirrored sampling: each
    generation asks for ``population / 2`` pairs ``theta +- sigma * eps_k`` (only seeds
    travel), then::

        u_i = centred_rank(F_i)                       # fitness shaping, in [-0.5, 0.5]
        g   = 1/N * sum_k (u_k+ - u_k-) eps_k          # N = population (their code's
                                                       # scaling; 1/sigma is in the rate)
        theta <- theta + Adam(g - weight_decay * theta)

    Adam is Kingma & Ba (2015) with bias correction (``learning_rate``, ``beta1``,
    ``beta2``, ``epsilon``); ``weight_decay`` is the L2 coefficient (the paper's 0.005).
    Non-finite scores rank last; equal scores give a zero gradient; ``sigma`` is fixed.

    Example::

        >>> import numpy as np
        >>> from es_search.strategies import OpenAIES
        >>> strategy = OpenAIES(population=4, sigma=0.1, learning_rate=0.05)
        >>> state = strategy.init(np.zeros(3), 0.0, seed=0)
        >>> [(c.sign, c.key) for c in strategy.ask(state, generation=0)]
        [(1.0, 0), (-1.0, 0), (1.0, 1), (-1.0, 1)]
        >>> state = strategy.tell(state, 0, strategy.ask(state, 0), [1.0, 0.0, 0.5, 0.5],
        ...                       rebuild=None)
        >>> state.step, bool(np.abs(state.center).max() > 0)
        (1, True)
    """

    name = "openai-es"

    def __init__(self, population: int = 32, sigma: float = 0.1,
                 learning_rate: float = 0.01, weight_decay: float = 0.005,
                 beta1: float = 0.9, beta2: float = 0.999, epsilon: float = 1e-8):
        self.population = even_population(self.name, population)
        self.initial_sigma = check_positive_float("sigma", sigma)
        self.learning_rate = check_positive_float("learning_rate", learning_rate)
        self.weight_decay = check_number("weight_decay", weight_decay, "a finite number >= 0",
                                         lambda v: math.isfinite(v) and v >= 0)
        self.beta1, self.beta2 = (check_number(name, value, "a number in [0, 1)",
                                               lambda v: 0.0 <= v < 1.0)
                                  for name, value in (("beta1", beta1), ("beta2", beta2)))
        self.epsilon = check_positive_float("epsilon", epsilon)

    def init(self, center: np.ndarray, center_score: float, seed: int) -> OpenAIESState:
        center = np.array(center, dtype=np.float64)
        return OpenAIESState(center, self.initial_sigma, np.zeros_like(center),
                             np.zeros_like(center), 0, int(seed))

    def _tell(self, state: OpenAIESState, generation: int, candidates: Sequence[Candidate],
              scores: list[float], rebuild: Rebuild) -> OpenAIESState:
        keys, plus, minus = antithetic_pairs(self.name, candidates, centered_ranks(scores))
        # sum_i u_i * sign_i * eps_key(i), over N = population
        weights = {key: plus[key] - minus[key] for key in keys}
        gradient = noise_sum(state.seed, generation, weights, state.center.size) / len(scores)
        # ascend g - weight_decay * theta with Adam (Kingma & Ba 2015, Algorithm 1)
        g = gradient - self.weight_decay * state.center
        step = state.step + 1
        m = self.beta1 * state.m + (1.0 - self.beta1) * g
        v = self.beta2 * state.v + (1.0 - self.beta2) * g * g
        a = self.learning_rate * math.sqrt(1.0 - self.beta2 ** step) / (
            1.0 - self.beta1 ** step)
        center = state.center + a * m / (np.sqrt(v) + self.epsilon)
        return OpenAIESState(center, state.sigma, m, v, step, state.seed)
