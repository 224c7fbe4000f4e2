"""The strategy interface: ``init`` / ``ask`` / ``tell`` over an explicit state.

A strategy holds only its settings; what changes lives in a state that ``tell`` returns
anew (never mutated), so a checkpoint can hold it. The run's seed is given to ``init``;
candidates are described relative to a centre (:class:`es_search.candidates.Candidate`)
so that workers rebuild them from task seeds.
"""
from __future__ import annotations

import inspect
import math
from abc import ABC, abstractmethod
from typing import Any, Callable, ClassVar, Sequence

import numpy as np

from ..candidates import Candidate

#: ``rebuild(i)``: candidate ``i``'s flat weight vector, built as its worker built it
Rebuild = Callable[[int], np.ndarray]


class Strategy(ABC):
    """Base class of all strategies. Subclasses set ``name`` and ``population`` (the
    candidates ``ask`` returns each generation) and write ``init``, ``ask`` and ``_tell``."""

    name: ClassVar[str] = ""
    #: whether its candidates are the agent's own ``jitter_weights()`` moves (the hill
    #: climbers'); the others draw their own noise, and an override is not called
    uses_jitter_weights: ClassVar[bool] = False
    population: int
    #: how many times the engine scores the starting agent before ``init_from`` (each
    #: time under its own task seed: generation -1, indices 0, 1, ...)
    initial_evaluations: int = 1

    def max_tasks(self, n: int) -> int | None:
        """The most tasks one generation has for ``n`` evolved values (the start's
        included; None: no bound): a run starts no more worker processes than that."""
        return max(self.population, self.initial_evaluations)

    def sized(self, n: int) -> Strategy:
        """This strategy for ``n`` evolved values, what depends on ``n`` decided (as its
        ``config()`` records it); a ValueError when it cannot search them (``run()`` asks
        before work)."""
        return self

    @abstractmethod
    def init(self, center: np.ndarray, center_score: float, seed: int) -> Any:
        """The state before generation 0, from the starting weights and their score."""

    def init_from(self, center: np.ndarray, scores: Sequence[float], seed: int) -> Any:
        """``init`` from the starting agent's ``initial_evaluations`` scores."""
        return self.init(center, scores[0], seed)

    def resolved(self, state: Any) -> dict:
        """Settings the run decided (e.g. ``reevaluate="auto"``): ``config["resolved"]``."""
        return {}

    def tell(self, state: Any, generation: int, candidates: Sequence[Candidate],
             scores: Sequence[float], rebuild: Rebuild) -> Any:
        """The next state from the scores of ``candidates`` (in order; non-finite: -inf)."""
        if len(scores) != len(candidates):
            raise ValueError(f"got {len(scores)} scores for {len(candidates)} candidates")
        return self._tell(state, generation, candidates, cleaned(scores), rebuild)

    @abstractmethod
    def ask(self, state: Any, generation: int) -> list[Candidate]:
        """This generation's candidates, relative to ``self.center(state)``."""

    @abstractmethod
    def _tell(self, state: Any, generation: int, candidates: Sequence[Candidate],
              scores: list[float], rebuild: Rebuild) -> Any:
        """``tell`` with one score per candidate, every one finite or -inf."""

    def center(self, state: Any) -> np.ndarray:
        """The vector this generation's candidates are built around."""
        return state.center

    def sigma(self, state: Any) -> float:
        """The current step size, for the history."""
        return float(state.sigma)

    def config(self) -> dict:
        """Settings that define the search (compared on resume; written to config.json):
        ``population`` and the constructor's parameters the instance holds as attributes
        of their names (``sigma`` as ``initial_sigma``)."""
        names = ["population", *inspect.signature(type(self).__init__).parameters]
        attributes = {name: "initial_sigma" if name == "sigma" else name for name in names}
        return {"name": self.name, **{name: getattr(self, attribute)
                                      for name, attribute in attributes.items()
                                      if hasattr(self, attribute)}}

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.config().items() if k != "name")
        return f"{type(self).__name__}({args})"


def cleaned(scores: Sequence[float]) -> list[float]:
    """The scores as floats, each non-finite one (NaN, +inf, -inf) as -inf: the worst."""
    return [s if math.isfinite(s) else -math.inf for s in map(float, scores)]


def worst_finite(scores: Sequence[float]) -> list[float] | None:
    """Cleaned ``scores`` with -inf as the worst finite score of them (ranked last,
    tied), for updates that need finite numbers; None when none is finite."""
    worst = min(filter(math.isfinite, scores), default=None)
    return None if worst is None else [s if s > -math.inf else worst for s in scores]


def centered_ranks(scores: Sequence[float]) -> np.ndarray:
    """Ranks scaled to [-0.5, 0.5] (Salimans et al. 2017, fitness shaping); non-finite
    scores rank last, ties share their average rank (all equal: all zeros).

    >>> centered_ranks([3.0, 1.0, 2.0]).tolist()
    [0.5, -0.5, 0.0]
    >>> centered_ranks([1.0, float("nan"), 1.0]).tolist()
    [0.25, -0.5, 0.25]
    """
    keyed = np.asarray(cleaned(scores), dtype=np.float64)  # all non-finite: worst, tied
    if (n := keyed.size) < 2:
        return np.zeros(n)
    # the c values tied at sorted positions k..k+c-1 share their mean rank, k + (c-1)/2
    # (a half-integer: exact); distinct values have c = 1
    _, tie, counts = np.unique(keyed, return_inverse=True, return_counts=True)
    first = np.cumsum(counts) - counts
    ranks = (first + (counts - 1) / 2.0)[tie.reshape(-1)]
    return ranks / (n - 1) - 0.5
