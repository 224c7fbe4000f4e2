"""Scores: checking what ``score()`` and ``score_batch()`` returned, ranking with
non-finite values."""
from __future__ import annotations

import math
import numbers
from typing import Any, Mapping, Sequence

import numpy as np
import torch


class NotAScore(TypeError):
    """``score()`` returned something that is not a real number (never tolerated)."""


def as_score(value: Any, agent: Any, method: str = "score") -> float:
    """``value`` as a float, or a :class:`NotAScore` naming the agent's ``method``."""
    if type(value) is float:  # the usual answer: no message built
        return value
    return as_real(value, f"{type(agent).__name__}.{method}()", ", higher is better")


def as_real(value: Any, source: str, note: str = "") -> float:
    """``value`` (a number, or a one-element tensor or array) as a float, or a
    :class:`NotAScore` naming ``source``."""
    if type(value) is float:  # the usual answer: no abstract-class check (~1 us)
        return value
    if isinstance(value, torch.Tensor) and value.numel() == 1 or isinstance(
            value, (np.ndarray, np.generic)) and value.size == 1:
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        shown = repr(value)
        shown = shown if len(shown) <= 60 else shown[:57] + "..."
        hint = " (is a return statement missing?)" if value is None else ""
        raise NotAScore(f"{source} returned {type(value).__name__} {shown}{hint}; it must "
                        f"return a real number (a float){note}")
    return float(value)


def as_scores(values: Any, n: int, agent: Any) -> list[float]:
    """What ``score_batch`` returned as ``n`` floats (an array may be ``(n,)`` or
    ``(n, 1)``), or a :class:`NotAScore`."""
    source = f"{type(agent).__name__}.score_batch() returned"
    rule = f"one real number per candidate, in order (a list, 1-D array or tensor of " \
        f"length {n})"
    if isinstance(values, (torch.Tensor, np.ndarray)):
        shape = tuple(values.shape)
        if len(shape) > 1 and (shape[0] != n or math.prod(shape[1:]) != 1):
            raise NotAScore(f"{source} an array of shape {shape} for {n} candidates; it "
                            f"must return one real number per candidate, in order: shape "
                            f"({n},)")
        values = values.reshape(-1).tolist()  # (a tensor's tolist() detaches)
    if isinstance(values, (Mapping, set, frozenset)):  # iterable, but not in order
        raise NotAScore(f"{source} a {type(values).__name__}, which holds no order; it "
                        f"must return {rule}")
    try:
        values = list(values)
    except TypeError:
        raise NotAScore(f"{source} {type(values).__name__}; it must return {rule}") from None
    if len(values) != n:
        raise NotAScore(f"{source} {len(values)} scores for {n} candidates; it must "
                        f"return one per candidate, in order")
    return [as_score(v, agent, "score_batch") for v in values]


def same_score(a: float, b: float) -> bool:
    """Whether two scores are the same: equal, or both NaN.

    >>> same_score(1.0, 1.0), same_score(float("nan"), float("nan")), same_score(0.0, 1.0)
    (True, True, False)
    """
    return a == b or (math.isnan(a) and math.isnan(b))


def best_index(scores: Sequence[float]) -> int | None:
    """Index of the highest finite score (the first on ties); None if none is finite."""
    finite = [i for i, s in enumerate(scores) if math.isfinite(s)]
    return max(finite, key=scores.__getitem__, default=None)
