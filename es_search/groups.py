"""Scoring candidates a group at a time through ``Agent.score_batch``.

Groups are cut at fixed candidate indices: with group size ``G``, group ``g`` holds
candidates ``[g * G, (g + 1) * G)`` of the generation (the last one may be shorter).
Chunks sent to workers are unions of whole groups (:func:`chunk_bounds`), so a
candidate is scored with the same neighbours, in the same row, whatever ``n_jobs``,
backend or scheduling: a run with batching is identical for any worker count even when
a row's last bits depend on its group (e.g. a batched matrix product).

Each candidate is built exactly as for ``score()`` (its task seed in the global RNGs,
the centre, then its jitter or noise) and its evolved weights are stacked.

When building or ``score_batch()`` raises for a group, the group is scored again one
candidate at a time through ``score()`` (the per-candidate path), which finds the
culprit: its failure is reported per candidate, as without batching (``ScoreError`` or,
under ``on_error="worst"``, a ``TaskFailure`` scored -inf), and ``replay_task`` replays
it. If every candidate scores alone, the batch itself is at fault: ``on_error="raise"``
stops with a ``ScoreError`` naming the group's first candidate and the batch's
traceback; ``"worst"`` scores the whole group -inf with that traceback.
"""
from __future__ import annotations

import traceback
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import torch

from . import candidates as _candidates
from .batched import as_scores, group_size
from .errors import ScoreError, TaskFailure
from .seeding import preserved_global_rngs, seed_global_rngs, task_seed

__all__ = ["chunk_bounds", "group_bounds", "group_size", "score_grouped"]


def group_bounds(start: int, stop: int, size: int) -> list[tuple[int, int]]:
    """The groups (``(a, b)`` index ranges) covering ``[start, stop)``, cut at multiples
    of ``size``."""
    bounds, a = [], start
    while a < stop:
        b = min((a // size + 1) * size, stop)
        bounds.append((a, b))
        a = b
    return bounds


def chunk_bounds(n: int, parts: int, size: int) -> list[tuple[int, int]]:
    """At most ``parts`` contiguous ranges of whole groups covering ``range(n)``, as
    near-equal in groups as possible (``size`` 0 or 1: near-equal in candidates)."""
    size = max(size, 1)
    groups = -(-n // size)
    parts = max(1, min(parts, groups))
    cuts = [min(n, size * (groups * k // parts)) for k in range(parts + 1)]
    return [(cuts[k], cuts[k + 1]) for k in range(parts) if cuts[k] < cuts[k + 1]]


def stacked_candidates(agent: Any, center: np.ndarray, candidates: Sequence[Any],
                       seeds: Sequence[int], seed: int, generation: int
                       ) -> dict[str, torch.Tensor]:
    """Build each candidate as its own task would (seeded), then stack their weights."""
    rows = []
    for candidate, seed_ in zip(candidates, seeds):
        agent.task_seed = seed_
        seed_global_rngs(seed_)
        _candidates.build(agent, center, candidate, seed, generation)
        rows.append([p.detach().clone() for _, p in agent.evolved_parameters()])
    names = [name for name, _ in agent.evolved_parameters()]
    return {name: torch.stack([row[k] for row in rows]) for k, name in enumerate(names)}


def score_group(agent: Any, center: np.ndarray, candidates: Sequence[Any], seed: int,
                generation: int, start: int, score_kwargs: Mapping[str, Any]) -> list[float]:
    """One ``score_batch()`` call on candidates ``start, start + 1, ...``; raises what
    it raises. The caller holds ``preserved_global_rngs`` and ``torch.no_grad``."""
    seeds = [task_seed(seed, generation, start + k) for k in range(len(candidates))]
    try:
        params = stacked_candidates(agent, center, candidates, seeds, seed, generation)
        agent.task_seed = None
        agent.set_flat(center)
        seed_global_rngs(seeds[0])
        values = agent.score_batch(params, seeds, **score_kwargs)
    finally:
        agent.task_seed = None
    return as_scores(values, len(candidates), agent)


def score_grouped(agent: Any, center: np.ndarray, candidates: Sequence[Any], seed: int,
                  generation: int, start: int, score_kwargs: Mapping[str, Any],
                  on_error: str, one_by_one: Callable[..., list[Any]]) -> list[Any]:
    """Score ``candidates`` (indices ``start, ...``) group by group, in order.

    ``one_by_one(agent, center, candidates, seed, generation, start, score_kwargs,
    on_error)`` is the per-candidate path, used on a group that fails (see the module's
    docstring). Returns floats and, under ``on_error="worst"``, ``TaskFailure``s.
    """
    size = group_size(agent)
    scores: list[Any] = []
    with preserved_global_rngs(), torch.no_grad():
        for a, b in group_bounds(start, start + len(candidates), size):
            part = candidates[a - start:b - start]
            try:
                scores.extend(score_group(agent, center, part, seed, generation, a,
                                          score_kwargs))
                continue
            except Exception as exc:  # find the culprit one candidate at a time
                batch_error, batch_trace = exc, traceback.format_exc()
            alone = one_by_one(agent, center, part, seed, generation, a, score_kwargs,
                               on_error)
            if any(isinstance(s, TaskFailure) for s in alone):
                scores.extend(alone)
                continue
            note = (f"score_batch() raised on candidates {a}-{b - 1} of generation "
                    f"{generation}, though each of them scores alone through score():\n"
                    f"{batch_trace}")
            if on_error == "worst":
                scores.extend(TaskFailure(generation, i, task_seed(seed, generation, i),
                                          note) for i in range(a, b))
                continue
            raise ScoreError(type(agent).__name__, generation, a,
                             task_seed(seed, generation, a), note,
                             batch_error) from batch_error
    return scores
