"""(1+lambda) elitist hill climbing with the 1/5th success rule on the step size."""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from ..checks import check, check_number, check_positive_float
from .hill_climb import Climber, HillClimbState


@dataclass(frozen=True)
class AdaptiveHillClimbState(HillClimbState):
    success_rate: float = 0.0  # the smoothed success probability p_succ
    damping: float = 1.0  # d, fixed at init from the dimension


class AdaptiveHillClimb(Climber):
    """(1+lambda) hill climbing whose step size follows the 1/5th success rule.

    Candidates and selection are ``"hill-climb"``'s. After each generation the step size
    follows Rechenberg's (1973) success rule in the smoothed (1+lambda) form of Igel,
    Hansen & Roth (2007, Evolutionary Computation 15(1), *updateStepSize*)::

        p_succ <- (1 - c_p) p_succ + c_p * lambda_succ / lambda
        sigma  <- sigma * exp((p_succ - p_target) / (d (1 - p_target)))

    with ``lambda_succ`` the number of candidates that would replace the parent,
    ``p_target = 1 / (5 + sqrt(lambda) / 2)``, ``c_p = p_target lambda / (2 + p_target
    lambda)`` and ``d = 1 + n / (2 lambda)`` for ``n`` evolved values; a non-finite
    score is a failure.

    Options: ``damping`` (``d``), ``target_success`` (``p_target``), ``min_sigma`` and
    ``max_sigma`` (bounds on sigma), ``reevaluate`` (as ``"hill-climb"``'s).

    Example::

        >>> import numpy as np
        >>> from es_search.strategies import AdaptiveHillClimb
        >>> strategy = AdaptiveHillClimb(population=4, sigma=0.5)
        >>> state = strategy.init(np.zeros(2), -8.0, seed=0)
        >>> built = {0: np.array([1.0, 1.0])}  # the winner's weights, as the run rebuilds them
        >>> state = strategy.tell(state, 0, strategy.ask(state, generation=0),
        ...                       [-2.0, -18.0, -20.0, -20.0], rebuild=built.get)
        >>> state.center, state.center_score, bool(state.sigma > 0.5)  # 1 in 4 > 1/6: widen
        (array([1., 1.]), -2.0, True)
    """

    name = "adaptive-hill-climb"

    def __init__(self, population: int = 10, sigma: float = 0.1,
                 reevaluate: bool | str = "auto",
                 damping: float | None = None, target_success: float | None = None,
                 min_sigma: float | None = None, max_sigma: float | None = None):
        super().__init__(population, sigma, reevaluate)
        self.damping = None if damping is None else check_positive_float("damping", damping)
        if target_success is None:
            target_success = 1.0 / (5.0 + math.sqrt(self.population) / 2.0)
        self.target_success = check_number("target_success", target_success,
                                           "a number in (0, 1)", lambda v: 0.0 < v < 1.0)
        self.min_sigma, self.max_sigma = (
            None if value is None else check_positive_float(name, value)
            for name, value in (("min_sigma", min_sigma), ("max_sigma", max_sigma)))
        check("min_sigma", self.min_sigma, (self.min_sigma or 0.0) <= (
            self.max_sigma or math.inf), f"must not exceed max_sigma ({self.max_sigma})",
            got=False)
        # c_p, the smoothing of the success rate (Igel, Hansen & Roth 2007)
        lam, p = self.population, self.target_success
        self.smoothing = p * lam / (2.0 + p * lam)

    def init(self, center: np.ndarray, center_score: float,
             seed: int) -> AdaptiveHillClimbState:
        center = np.array(center, dtype=np.float64)
        damping = self.damping if self.damping is not None else (
            1.0 + center.size / (2.0 * self.population))
        return AdaptiveHillClimbState(center, float(center_score),
                                      self._clip(self.initial_sigma), self.reevaluate is True,
                                      success_rate=self.target_success, damping=damping)

    def _adapt(self, state: AdaptiveHillClimbState, scores: list[float],
               parent: float) -> AdaptiveHillClimbState:
        successes = sum(1 for s in scores
                        if math.isfinite(s) and self._beats(state, s, parent))
        p_succ = (1.0 - self.smoothing) * state.success_rate + \
            self.smoothing * successes / len(scores)
        sigma = state.sigma * math.exp((p_succ - self.target_success)
                                       / (state.damping * (1.0 - self.target_success)))
        return replace(state, sigma=self._clip(sigma), success_rate=p_succ)

    def _clip(self, sigma: float) -> float:
        low, high = self.min_sigma or 0.0, self.max_sigma or math.inf
        return min(max(sigma, low), high)
