"""Summaries of a few runs per task, as Agarwal et al. (2021, "Deep RL at the edge of the
statistical precipice") recommend and their ``rliable`` package computes them: the
interquartile mean and a stratified-bootstrap percentile interval, with NumPy only.
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np


def iqm(values: Sequence[float]) -> float:
    """The interquartile mean: the mean of the middle 50% of ``values``, cutting
    ``floor(n / 4)`` from each end, as ``scipy.stats.trim_mean(values, 0.25)`` (what
    rliable uses); 3 values or fewer cut nothing.

    >>> iqm([1, 2, 3, 4]), iqm([0, 1, 1, 2, 100])
    (2.5, 1.3333333333333333)
    """
    x = np.sort(np.asarray(values, dtype=float).ravel())
    if x.size == 0:
        raise ValueError("iqm of no values")
    cut = x.size // 4
    return float(x[cut:x.size - cut].mean())


def bootstrap_ci(tasks: Sequence[Sequence[float]], statistic: Callable = iqm,
                 reps: int = 2000, confidence: float = 0.95,
                 seed: int = 0) -> tuple[float, float]:
    """The percentile interval of ``statistic`` over a stratified bootstrap: each of
    ``reps`` resamples draws, for every task, as many of that task's runs (seeds) as it
    has, with replacement, and applies ``statistic`` to all drawn runs together. One
    task: the ordinary bootstrap of its seeds. Seeded: the same input gives the same
    interval.
    """
    rng = np.random.default_rng(seed)
    groups = [np.asarray(t, dtype=float).ravel() for t in tasks]
    if not groups or any(g.size == 0 for g in groups):
        raise ValueError("every task needs at least one run")
    draws = np.concatenate([g[rng.integers(0, g.size, size=(reps, g.size))]
                            for g in groups], axis=1)
    values = np.array([statistic(row) for row in draws])
    tail = 100 * (1 - confidence) / 2
    low, high = np.percentile(values, [tail, 100 - tail])
    return float(low), float(high)


def summary(values: Sequence[float], threshold: float | None = None) -> dict:
    """Median, IQM and its 95% bootstrap interval of one task's per-seed values, and the
    share of seeds at or above ``threshold`` (``None`` without one)."""
    x = np.asarray(values, dtype=float)
    return {"seeds": int(x.size), "median": float(np.median(x)), "iqm": iqm(x),
            "iqm_ci": bootstrap_ci([x]),
            "success": None if threshold is None else float(np.mean(x >= threshold))}
