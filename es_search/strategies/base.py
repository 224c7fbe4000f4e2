"""The strategy interface: ``init`` / ``ask`` / ``tell`` over an explicit state.

A strategy holds only its static settings; everything that changes lives in a state
object that ``tell`` returns anew (never mutated in place), so a checkpoint can hold it
and a run can continue from it. Randomness comes in explicitly: the run's seed is given
to ``init``, and candidates are described relative to a centre vector (see
:class:`es_search.candidates.Candidate`) so that workers rebuild them from task seeds.
"""
from __future__ import annotations

from typing import Any, Callable, ClassVar, Sequence

import numpy as np

from ..candidates import Candidate

#: ``rebuild(i)`` returns candidate ``i``'s flat weight vector, built exactly as the
#: worker that scored it built it.
Rebuild = Callable[[int], np.ndarray]


class Strategy:
    """Base class of all strategies. Subclasses set ``name`` and write the four methods.

    ``population`` is the number of candidates ``ask`` returns each generation.
    """

    name: ClassVar[str] = ""
    #: whether its candidates are the agent's own ``jitter_weights()`` moves (the hill
    #: climbers'); the others draw their own noise, and an override is not called
    uses_jitter_weights: ClassVar[bool] = False
    population: int

    def max_tasks(self, n: int) -> int | None:
        """The most candidates one generation scores for ``n`` evolved values (the
        starting agent's evaluations included), or None when there is no bound: a run
        starts no more worker processes than that."""
        return max(self.population, self.initial_evaluations)

    def check_size(self, n: int) -> None:
        """Raise a ValueError when this strategy cannot search ``n`` evolved values;
        ``run()`` calls it before any work."""

    def init(self, center: np.ndarray, center_score: float, seed: int) -> Any:
        """The state before generation 0, from the starting weights and their score."""
        raise NotImplementedError

    #: how many times the engine scores the starting agent before ``init_from`` (each
    #: time under its own task seed: generation -1, indices 0, 1, ...)
    initial_evaluations: int = 1

    def init_from(self, center: np.ndarray, scores: Sequence[float], seed: int) -> Any:
        """The state before generation 0 from the starting agent's ``scores`` (as many
        as ``initial_evaluations``); by default ``init(center, scores[0], seed)``."""
        return self.init(center, scores[0], seed)

    def resolved(self, state: Any) -> dict:
        """Settings decided during the run (e.g. ``reevaluate="auto"``), for the record
        (``config["resolved"]``); {} when there are none."""
        return {}

    def ask(self, state: Any, generation: int) -> list[Candidate]:
        """This generation's candidates, relative to ``self.center(state)``."""
        raise NotImplementedError

    def tell(self, state: Any, generation: int, candidates: Sequence[Candidate],
             scores: Sequence[float], rebuild: Rebuild) -> Any:
        """The next state, given the scores of ``candidates`` (in order)."""
        raise NotImplementedError

    def center(self, state: Any) -> np.ndarray:
        """The vector this generation's candidates are built around."""
        return state.center

    def sigma(self, state: Any) -> float:
        """The current step size, for the history."""
        return float(state.sigma)

    def config(self) -> dict:
        """Settings that define the search (compared on resume; written to config.json)."""
        return {"name": self.name, "population": self.population}

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.config().items() if k != "name")
        return f"{type(self).__name__}({args})"


def antithetic_pairs(name: str, candidates: Sequence[Candidate], values: Sequence[float]
                     ) -> tuple[list[int], dict[int, float], dict[int, float]]:
    """Split the values of antithetic ``"noise"`` pairs by sign: ``(keys, plus, minus)``,
    ``keys`` the noise keys of complete pairs in ask order (for ``tell`` of the
    strategy ``name``, which asks only for such pairs)."""
    plus: dict[int, float] = {}
    minus: dict[int, float] = {}
    for candidate, value in zip(candidates, values):
        if candidate.kind != "noise":
            raise ValueError(f"{name} was told about a {candidate.kind!r} candidate; it "
                             f"only asks for antithetic 'noise' pairs")
        (plus if candidate.sign > 0 else minus)[candidate.key] = float(value)
    return [k for k in plus if k in minus], plus, minus
