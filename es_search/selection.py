"""The run's answer: of the best evaluation, the final centre and the centres kept over
the run (:class:`Snapshots`), the one that tests best.

The best weights are the luckiest single evaluation: on a noisy score, not what to
deploy; and a centre can pass its best and fall back (a step too large for the end of
a run). At the end of a run each distinct candidate is scored on the same
``select_tasks`` fresh tasks (generation ``SELECTION_GENERATION``, which no search
reaches); the highest finite mean is handed back (``Result.chosen``: ``"best"``,
``"center"`` or ``"center@G"``, the centre after G generations; of equals the first of
best, final centre, the kept centres latest first). Nothing is tested when the score
ignores its task seed, or there is one candidate.
"""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np
import torch

from .scores import same_score
from .seed_sequences import SELECTION_GENERATION
SELECT_TASKS = 16
SNAPSHOTS = 8  # centres kept over a run: 4 to 8 once it is 8 generations long
BEST, CENTER = "best", "center"


class Snapshots:
    """The centre's weights (with the agent's shared state) after every ``spacing``-th
    generation, at most ``size`` of them: when one more comes, every other one goes and
    the spacing doubles, so that they span the whole run whatever its length (unknown
    under a time limit). Part of the search's checkpoint: a resumed run keeps the same."""

    def __init__(self, size: int = SNAPSHOTS):
        self.size, self.spacing = size, 1
        self.kept: dict[int, dict] = {}

    def add(self, generations: int, weights: Callable[[], dict]) -> None:
        """The centre's ``weights()`` (a new dict, in the agent's dtypes: half a float64
        vector's size for float32) after ``generations`` generations, kept if it falls on
        the spacing."""
        if generations % self.spacing:
            return
        # a new dict each time: a checkpoint's copy (copy.copy) keeps its own
        self.kept = {**self.kept, generations: weights()}
        if len(self.kept) > self.size:
            self.spacing *= 2
            self.kept = {g: kept for g, kept in self.kept.items() if g % self.spacing == 0}


def same_weights(a: dict, b: dict) -> bool:
    """Whether weights ``b`` are weights ``a``."""
    return b.keys() == a.keys() and all(
        torch.equal(torch.as_tensor(b[k]), torch.as_tensor(a[k])) for k in a)


def first_same(candidates: dict[str, dict | None]) -> dict[str, str]:
    """Each name whose weights are not None -> the first name with the same weights."""
    first: dict[str, str] = {}
    for name, weights in candidates.items():
        if weights is not None:
            first[name] = next((n for n, f in first.items() if n == f and same_weights(
                candidates[n], weights)), name)
    return first


def select(evaluator: Any, candidates: dict[str, dict | None],
           tasks: int) -> tuple[str, dict | None]:
    """``(chosen, selection)``: the name of the candidate (the first is the best weights)
    with the highest mean score on ``tasks`` fresh tasks, and each distinct one's figures
    (``{"mean", "std", "n"}``; None when nothing was tested), scored on ``evaluator``."""
    kept = {name: candidates[name] for name, f in first_same(candidates).items() if name == f}
    if not tasks or len(kept) < 2:
        return BEST, None
    scored: dict[str, list] = {}
    for name, weights in kept.items():
        scored[name] = evaluator.evaluate([weights] * tasks, SELECTION_GENERATION)
        first = scored[name][0]  # failed tasks (-inf, on_error="worst") say nothing of it
        if len(scored) == 1 < tasks and math.isfinite(first) and all(
                same_score(s, first) for s in scored[name]):
            return BEST, None  # the score ignores its task seed: the search ranked it exactly
    with np.errstate(invalid="ignore"):  # a failed task's -inf: the std is NaN
        selection = {name: {"mean": float(np.mean(v)), "std": float(np.std(v)), "n": len(v)}
                     for name, v in scored.items()}
    # a mean not finite (a failed task, an inf) never beats a finite one; of equals, the first
    chosen = max(selection, key=lambda name: selection[name]["mean"]
                 if math.isfinite(selection[name]["mean"]) else -math.inf)
    return chosen, selection


def label(name: str) -> str:
    """``"best"`` -> "the best evaluation", ``"center@40"`` -> "the centre after 40
    generations".

    >>> label("center@1")
    'the centre after 1 generation'
    """
    if name == BEST:
        return "the best evaluation"
    after = name.partition("@")[2]
    return "the final centre" if name == CENTER else \
        f"the centre after {after} generation{'s' * (after != '1')}"


def describe(chosen: str, selection: dict | None) -> str:
    """One line for a person: what the run hands back, and the others' figures: means of
    ``score()`` as the selection test runs it (``Agent.selecting``: the built-ins' true
    returns, not the search's shaped scores).

    >>> print(describe("center", {"best": {"mean": 76.0, "std": 94.0, "n": 16},
    ...                           "center": {"mean": 294.0, "std": 3.0, "n": 16}}))
    handed back: the final centre, score 294 +- 3 on 16 fresh tasks (the best evaluation: 76 +- 94)
    """
    if selection is None:
        return f"handed back: {label(chosen)}"
    text = {name: f"{f['mean']:.6g} +- {f['std']:.3g}" if math.isfinite(f["mean"])
            else f"{f['mean']}" for name, f in selection.items()}
    named = [f"{label(name)}: {text[name]}" for name in (BEST, CENTER)
             if name in selection and name != chosen]
    earlier = [f["mean"] for name, f in selection.items() if "@" in name and name != chosen]
    if earlier:
        named.append(f"{len(earlier)} earlier centres: {min(earlier):.6g} to "
                     f"{max(earlier):.6g}" if len(earlier) > 1 else
                     f"an earlier centre: {earlier[0]:.6g}")
    return (f"handed back: {label(chosen)}, score {text[chosen]} on {selection[chosen]['n']} "
            f"fresh tasks ({'; '.join(named)})")
