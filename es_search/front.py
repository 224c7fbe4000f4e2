"""The front door: weight dicts scored for a user (:func:`evaluate`, :class:`Evaluator`)
over the run's engine (:class:`~es_search.evaluation.Engine`)."""
from __future__ import annotations

import copy
from typing import Any, Mapping, Sequence

from .agent import Agent
from .candidates import Candidate
from .checks import check_int
from .errors import ScoreError
from .evaluation import Engine

__all__ = ["Evaluator", "evaluate"]


class Evaluator(Engine):
    """The engine (its settings, its workers kept open between calls) with
    :meth:`evaluate`, which scores weight dicts."""

    _base: dict | None = None  # what evaluate() loads weights over (set at its first call)

    def evaluate(self, weights: Sequence[Mapping[str, Any]],
                 generation: int = 0) -> list[float]:
        """As :func:`evaluate`, on this evaluator's workers: in a loop, give each call its
        own ``generation``, or every call replays the same random streams::

            >>> import torch, es_search
            >>> from es_search.problems.blog import BlogAgent
            >>> agent = BlogAgent(work=0)
            >>> with es_search.Evaluator(agent, n_jobs=1) as evaluator:
            ...     for generation in range(3):
            ...         w = [{"fc1.weight": torch.full((1, 3), float(generation + k))}
            ...              for k in range(2)]
            ...         scores = evaluator.evaluate(w, generation)
            >>> scores
            [6.0, 9.0]
        """
        return self._score(*self._candidates(weights, generation))

    def _candidates(self, weights: Any, generation: Any) -> tuple[int, list[Candidate]]:
        """``generation`` and one candidate per weights dict, each tried on a copy of the
        agent first: a bad one fails here, before any scoring. Each loads over the
        agent's own values at the first call: what an earlier dict set that does not
        evolve is set back (a worker keeps its agent from one candidate to the next)."""
        weights = _weights_list(weights)
        generation = check_int("generation", generation, 0,
                               " (task i of a call runs under task_seed(seed, generation, i))")
        if self._base is None:  # before any candidate is loaded into self.local
            self._checker, self._center = copy.deepcopy(self.local), self.local.get_flat()
            evolved = {name for name, _ in self.local.evolved_parameters()}
            self._base = {name: value.detach().clone()  # buffers, frozen parameters
                          for name, value in self.local.state_dict().items()
                          if name not in evolved}
            self._reset: dict = {}  # what a dict has set of those, set back
        for w in weights:
            self._checker.set_weights(w)
            self._reset.update((name, self._base[name]) for name in w if name in self._base)
        reset = dict(sorted(self._reset.items()))
        return generation, [Candidate("weights", vector={**reset, **w}) for w in weights]

    def _score(self, generation: int, candidates: list[Candidate]) -> list[float]:
        if not candidates:
            return []
        try:
            return self.score(generation, self._center, candidates).scores
        except ScoreError as exc:  # no run folder: its message replays weights[index]
            exc.evaluate_seed, exc.evaluate_kwargs = self.seed, bool(self.score_kwargs)
            raise


def evaluate(agent: Agent, weights: Sequence[Mapping[str, Any]], *, n_jobs: int | None = -1,
             seed: int = 0, generation: int = 0, backend: Any = None,
             score_kwargs: Mapping[str, Any] | None = None,
             repeat_check: bool = True) -> list[float]:
    """Score each weights dict, loaded over a copy of ``agent``'s own weights (a subset of
    names is fine), in parallel; scores in input order. Task ``i`` runs under
    ``es_search.task_seed(seed, generation, i)``; a bad name or shape fails before any
    scoring. Workers start and stop with each call: in a loop, keep them with
    :meth:`Evaluator.evaluate`. ``repeat_check``: as ``run()``'s. A ``score()`` that
    raises stops the call with a :class:`~es_search.ScoreError` that says how to replay
    that weights dict in this process (:func:`es_search.replay_task`)."""
    evaluator = Evaluator(agent, seed=seed, n_jobs=n_jobs, backend=backend,
                          score_kwargs=score_kwargs, repeat_check=repeat_check)
    generation, candidates = evaluator._candidates(weights, generation)  # before workers
    if not candidates:
        return []
    with evaluator:
        return evaluator._score(generation, candidates)


def _weights_list(weights: Any) -> list[Mapping[str, Any]]:
    """``weights`` as a list of dicts, or a TypeError that says what was passed."""
    if isinstance(weights, Mapping) or not hasattr(weights, "__iter__"):
        raise TypeError(f"weights must be a list of weight dicts, one per candidate "
                        f"(for one agent's: [weights]), got {type(weights).__name__}")
    weights = list(weights)
    for i, w in enumerate(weights):
        if not isinstance(w, Mapping):
            raise TypeError(f"weights[{i}] must be a dict of name -> tensor, "
                            f"got {type(w).__name__}")
    return weights
