"""(1+lambda) elitist hill climbing with a fixed step size."""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Sequence

import numpy as np

from ..candidates import Candidate
from ..checks import check_int, check_positive_float
from ..scores import best_index
from .base import Rebuild, Strategy


@dataclass(frozen=True)
class HillClimbState:
    center: np.ndarray  # the parent's weights
    center_score: float  # the parent's score
    sigma: float


class HillClimb(Strategy):
    """(1+lambda) hill climbing: ``population`` jittered copies of the parent; the best
    of parent and candidates becomes the next parent.

    Each candidate is the parent after ``agent.jitter_weights(sigma)`` (Gaussian by
    default) under its task's seed, so only seeds travel to the workers. A candidate
    replaces the parent when its score is at least the parent's (ties move, which lets
    the search drift across plateaus); non-finite scores never do.

    ``reevaluate=True`` (for noisy scores such as RL returns) also scores the parent
    again each generation, as the last candidate, and compares the candidates with that
    fresh score, so one lucky score cannot freeze the search.

    Example::

        >>> import numpy as np
        >>> from es_search.strategies import HillClimb
        >>> strategy = HillClimb(population=4, sigma=0.5)
        >>> state = strategy.init(np.zeros(2), -8.0, seed=0)
        >>> [c.kind for c in strategy.ask(state, generation=0)]
        ['jitter', 'jitter', 'jitter', 'jitter']
    """

    name = "hill-climb"

    def __init__(self, population: int = 16, sigma: float = 0.1, reevaluate: bool = False):
        self.population = check_int("population", population, 1)
        self.initial_sigma = check_positive_float("sigma", sigma)
        if not isinstance(reevaluate, bool):
            raise TypeError(f"reevaluate must be True or False, got {reevaluate!r}")
        self.reevaluate = reevaluate

    def init(self, center: np.ndarray, center_score: float, seed: int) -> HillClimbState:
        return HillClimbState(np.array(center, dtype=np.float64), center_score,
                              self.initial_sigma)

    def ask(self, state: HillClimbState, generation: int) -> list[Candidate]:
        jittered = [Candidate("jitter", state.sigma)] * self.population
        return jittered + [Candidate("center")] if self.reevaluate else jittered

    def tell(self, state: HillClimbState, generation: int, candidates: Sequence[Candidate],
             scores: Sequence[float], rebuild: Rebuild) -> HillClimbState:
        if self.reevaluate:  # the parent's fresh score replaces its old, maybe lucky one
            state = replace(state, center_score=scores[-1])
            scores = scores[:-1]
        best = best_index(scores)
        if best is None:
            return state
        if math.isfinite(state.center_score) and scores[best] < state.center_score:
            return state
        return replace(state, center=rebuild(best), center_score=scores[best])

    def config(self) -> dict:
        return {"name": self.name, "population": self.population,
                "sigma": self.initial_sigma, "reevaluate": self.reevaluate}
