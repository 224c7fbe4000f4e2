"""(1+lambda) elitist hill climbing: the base of both hill climbers, and the fixed-step one."""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Sequence

import numpy as np

from ..candidates import Candidate
from ..checks import check, check_int, check_positive_float
from ..scores import best_index, same_score
from .base import Rebuild, Strategy


class Climber(Strategy):
    """The hill climbers' base (see :class:`HillClimb`); subclasses adapt the rest of
    their state in ``_adapt``."""

    uses_jitter_weights = True

    def __init__(self, population: int, sigma: float, reevaluate: bool | str):
        self.population = check_int("population", population, 1)
        self.initial_sigma = check_positive_float("sigma", sigma)
        self.reevaluate = check("reevaluate", reevaluate, isinstance(reevaluate, bool) or
                                reevaluate == "auto", "True, False or 'auto' (re-evaluate "
                                "when the starting agent's two scores differ)")

    @property
    def initial_evaluations(self) -> int:  # "auto": the starting agent is scored twice
        return 2 if self.reevaluate == "auto" else 1

    def max_tasks(self, n: int) -> int:
        """The population, and the parent when it may be re-evaluated."""
        return max(self.population + (self.reevaluate is not False), self.initial_evaluations)

    def init_from(self, center: np.ndarray, scores: Sequence[float], seed: int) -> Any:
        reevaluate = self.reevaluate
        if reevaluate == "auto":
            reevaluate = len(scores) > 1 and not same_score(scores[0], scores[1])
        return replace(self.init(center, scores[0], seed), reevaluate=reevaluate)

    def resolved(self, state: Any) -> dict:
        return {"reevaluate": state.reevaluate} if self.reevaluate == "auto" else {}

    def ask(self, state: Any, generation: int) -> list[Candidate]:
        jittered = [Candidate("jitter", state.sigma)] * self.population
        return jittered + [Candidate("center")] if state.reevaluate else jittered

    def _tell(self, state: Any, generation: int, candidates: Sequence[Candidate],
              scores: list[float], rebuild: Rebuild) -> Any:
        parent, count = state.center_score, 0
        if state.reevaluate:  # the mean of the parent's fresh scores (see HillClimb)
            scores, fresh = scores[:-1], scores[-1]
            count = state.reevaluations + 1 if math.isfinite(fresh) else 0
            parent = parent + (fresh - parent) / count if count > 1 else fresh
        new = self._adapt(replace(state, center_score=parent, reevaluations=count),
                          scores, parent)
        best = best_index(scores)
        if best is None or not self._beats(state, scores[best], parent):
            return new
        return replace(new, center=rebuild(best), center_score=scores[best], reevaluations=0)

    @staticmethod
    def _beats(state: Any, score: float, parent: float) -> bool:
        """Whether a finite ``score`` replaces the parent: ties move, unless re-evaluating."""
        return not math.isfinite(parent) or (
            score > parent if state.reevaluate else score >= parent)

    def _adapt(self, state: Any, scores: list[float], parent: float) -> Any:
        return state  # the state after these scores, compared with the parent's


@dataclass(frozen=True)
class HillClimbState:
    center: np.ndarray  # the parent's weights
    center_score: float  # the parent's score
    sigma: float
    reevaluate: bool = False  # "auto" resolved at init
    reevaluations: int = 0  # the parent's fresh scores averaged in center_score


class HillClimb(Climber):
    """(1+lambda) hill climbing: ``population`` jittered copies of the parent; the best
    of parent and candidates becomes the next parent.

    A candidate is the parent after ``agent.jitter_weights(sigma)`` under its task's
    seed (only seeds travel). It replaces the parent when it scores at least as well
    (ties let the search drift across plateaus); non-finite scores never do.

    ``reevaluate=True`` (noisy scores, such as RL returns) scores the parent again each
    generation (the last candidate) and keeps the mean of its fresh scores, dropping the
    lucky one that made it the parent (Hansen, Niederberger, Guzzella & Koumoutsakos
    2009, IEEE TEC 13(1)); a candidate must then score above it (under noise a tie is no
    evidence). ``"auto"`` re-evaluates when the starting agent's two scores, under two
    task seeds, differ (recorded in ``config["resolved"]``).

    Example::

        >>> import numpy as np
        >>> from es_search.strategies import HillClimb
        >>> strategy = HillClimb(population=4, sigma=0.5)
        >>> state = strategy.init(np.zeros(2), -8.0, seed=0)
        >>> [c.kind for c in strategy.ask(state, generation=0)]
        ['jitter', 'jitter', 'jitter', 'jitter']
    """

    name = "hill-climb"

    def __init__(self, population: int = 16, sigma: float = 0.1,
                 reevaluate: bool | str = "auto"):
        super().__init__(population, sigma, reevaluate)

    def init(self, center: np.ndarray, center_score: float, seed: int) -> HillClimbState:
        return HillClimbState(np.array(center, dtype=np.float64), center_score,
                              self.initial_sigma, self.reevaluate is True)
