"""(1+lambda) elitist hill climbing with a fixed step size."""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Sequence

import numpy as np

from ..candidates import Candidate
from ..checks import check_int, check_positive_float
from ..errors import SettingError
from ..scores import best_index, same_score
from .base import Rebuild, Strategy


@dataclass(frozen=True)
class HillClimbState:
    center: np.ndarray  # the parent's weights
    center_score: float  # the parent's score
    sigma: float
    reevaluate: bool = False  # "auto" resolved at init


class HillClimb(Strategy):
    """(1+lambda) hill climbing: ``population`` jittered copies of the parent; the best
    of parent and candidates becomes the next parent.

    Each candidate is the parent after ``agent.jitter_weights(sigma)`` (Gaussian by
    default) under its task's seed, so only seeds travel to the workers. A candidate
    replaces the parent when its score is at least the parent's (ties move, which lets
    the search drift across plateaus); non-finite scores never do.

    ``reevaluate=True`` (for noisy scores such as RL returns) also scores the parent
    again each generation, as the last candidate, and compares the candidates with that
    fresh score, so one lucky score cannot freeze the search. The default, ``"auto"``,
    decides from the scores: ``run()`` scores the starting agent twice, under two task
    seeds, and if the two differ the parent is re-evaluated each generation (recorded
    in the run's ``config["resolved"]``); ``init()`` given one score alone does not
    re-evaluate.

    Example::

        >>> import numpy as np
        >>> from es_search.strategies import HillClimb
        >>> strategy = HillClimb(population=4, sigma=0.5)
        >>> state = strategy.init(np.zeros(2), -8.0, seed=0)
        >>> [c.kind for c in strategy.ask(state, generation=0)]
        ['jitter', 'jitter', 'jitter', 'jitter']
    """

    name = "hill-climb"
    uses_jitter_weights = True

    def __init__(self, population: int = 16, sigma: float = 0.1,
                 reevaluate: bool | str = "auto"):
        self.population = check_int("population", population, 1)
        self.initial_sigma = check_positive_float("sigma", sigma)
        self.reevaluate = check_reevaluate(reevaluate)

    @property
    def initial_evaluations(self) -> int:
        """Two with ``reevaluate="auto"`` (the starting agent is scored twice), else one."""
        return 2 if self.reevaluate == "auto" else 1

    def max_tasks(self, n: int) -> int:
        """The population, and the parent when it may be re-evaluated."""
        return max(self.population + (self.reevaluate is not False), self.initial_evaluations)

    def init(self, center: np.ndarray, center_score: float, seed: int) -> HillClimbState:
        return HillClimbState(np.array(center, dtype=np.float64), center_score,
                              self.initial_sigma, self.reevaluate is True)

    def init_from(self, center: np.ndarray, scores: Sequence[float],
                  seed: int) -> HillClimbState:
        return replace(self.init(center, scores[0], seed),
                       reevaluate=resolve_reevaluate(self.reevaluate, scores))

    def resolved(self, state: HillClimbState) -> dict:
        return {"reevaluate": state.reevaluate} if self.reevaluate == "auto" else {}

    def ask(self, state: HillClimbState, generation: int) -> list[Candidate]:
        return jittered_candidates(self.population, state.sigma, state.reevaluate)

    def tell(self, state: HillClimbState, generation: int, candidates: Sequence[Candidate],
             scores: Sequence[float], rebuild: Rebuild) -> HillClimbState:
        scores, parent_score = split_parent(scores, state.center_score, state.reevaluate)
        state = replace(state, center_score=parent_score)
        best = elitist_choice(scores, parent_score)
        if best is None:
            return state
        return replace(state, center=rebuild(best), center_score=scores[best])

    def config(self) -> dict:
        return {"name": self.name, "population": self.population,
                "sigma": self.initial_sigma, "reevaluate": self.reevaluate}


# ------------------------------------------------- shared by the (1+lambda) hill climbers
def check_reevaluate(value: Any) -> bool | str:
    if not isinstance(value, bool) and value != "auto":
        raise SettingError("reevaluate", value, "True, False or 'auto' (re-evaluate when "
                           "the starting agent's two scores differ)")
    return value


def resolve_reevaluate(setting: bool | str, scores: Sequence[float]) -> bool:
    """``reevaluate`` for the run: ``"auto"`` is True when the starting agent's scores
    (under different task seeds) differ, i.e. scores are noisy."""
    if setting != "auto":
        return bool(setting)
    if len(scores) < 2:
        return False
    return not same_score(scores[0], scores[1])


def jittered_candidates(population: int, sigma: float, reevaluate: bool) -> list[Candidate]:
    """``population`` jittered copies of the parent, then the parent itself when it is
    re-evaluated."""
    jittered = [Candidate("jitter", sigma)] * population
    return jittered + [Candidate("center")] if reevaluate else jittered


def split_parent(scores: Sequence[float], parent_score: float,
                 reevaluate: bool) -> tuple[list[float], float]:
    """The candidates' scores and the parent's score to compare them with: with
    ``reevaluate`` the parent's fresh score (the last one) replaces its old, maybe lucky
    one."""
    scores = list(scores)
    if reevaluate:
        return scores[:-1], scores[-1]
    return scores, parent_score


def elitist_choice(scores: Sequence[float], parent_score: float) -> int | None:
    """The candidate that replaces the parent: the best finite score, if it is at least
    the parent's (ties move); None to keep the parent."""
    best = best_index(scores)
    if best is None or (math.isfinite(parent_score) and scores[best] < parent_score):
        return None
    return best
