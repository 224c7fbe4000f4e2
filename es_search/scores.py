"""Scores: checking what ``score()`` returned, ranking with non-finite values."""
from __future__ import annotations

import math
import numbers
from typing import Any, Sequence

import numpy as np
import torch


class NotAScore(TypeError):
    """``score()`` returned something that is not a real number (a bug in the agent,
    never tolerated by ``on_error="worst"``)."""


def as_score(value: Any, agent: Any, method: str = "score") -> float:
    """``value`` as a float, or a :class:`NotAScore` (TypeError) naming the agent's class
    and the ``method`` that returned it."""
    return as_real(value, f"{type(agent).__name__}.{method}()", ", higher is better")


def as_real(value: Any, source: str, note: str = "") -> float:
    """``value`` (a number, or a one-element tensor or array) as a float, or a
    :class:`NotAScore` saying that ``source`` returned what it did."""
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        value = value.item()
    elif isinstance(value, (np.ndarray, np.generic)) and value.size == 1:
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        shown = repr(value)
        shown = shown if len(shown) <= 60 else shown[:57] + "..."
        hint = " (is a return statement missing?)" if value is None else ""
        raise NotAScore(f"{source} returned {type(value).__name__} {shown}{hint}; it must "
                        f"return a real number (a float){note}")
    return float(value)


def same_score(a: float, b: float) -> bool:
    """Whether two scores are the same: equal, or both NaN.

    >>> same_score(1.0, 1.0), same_score(float("nan"), float("nan")), same_score(0.0, 1.0)
    (True, True, False)
    """
    return a == b or (math.isnan(a) and math.isnan(b))


def best_index(scores: Sequence[float]) -> int | None:
    """Index of the highest finite score (the first on ties); None if none is finite.

    NaN and +-inf are never the best: a candidate that scored them is never kept.
    """
    best = None
    for i, s in enumerate(scores):
        if math.isfinite(s) and (best is None or s > scores[best]):
            best = i
    return best


def is_better(score: float, than: float) -> bool:
    """A finite ``score`` beats ``than`` (anything beats a non-finite ``than``)."""
    return math.isfinite(score) and (not math.isfinite(than) or score > than)


def finite_mean(scores: Sequence[float]) -> float:
    """Mean of the finite scores; NaN when there are none."""
    finite = [s for s in scores if math.isfinite(s)]
    return sum(finite) / len(finite) if finite else math.nan


def count_nonfinite(scores: Sequence[float]) -> int:
    return sum(1 for s in scores if not math.isfinite(s))
