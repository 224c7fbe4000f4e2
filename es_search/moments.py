"""Count, mean and M2 (sum of squared deviations) of vectors, merged in order with the
parallel-variance formula of Chan, Golub and LeVeque (1979): running observation
statistics that depend on candidate order only, never on which worker ran what.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np


class Moments(NamedTuple):
    """``count`` vectors with mean ``mean`` and sum of squared deviations ``m2``."""

    count: float
    mean: np.ndarray
    m2: np.ndarray

    @classmethod
    def empty(cls, dim: int) -> "Moments":
        return cls(0.0, np.zeros(dim), np.zeros(dim))

    @classmethod
    def of(cls, batch: np.ndarray) -> "Moments":
        """The moments of the rows of ``batch`` (shape ``(n, dim)``)."""
        batch = np.asarray(batch, dtype=np.float64)
        if len(batch) == 0:
            return cls.empty(batch.shape[1])
        mean = batch.mean(axis=0)
        return cls(float(len(batch)), mean, ((batch - mean) ** 2).sum(axis=0))

    def merge(self, other: "Moments") -> "Moments":
        """The moments of this set followed by ``other`` (Chan et al.'s formula)."""
        if other.count == 0:
            return self
        count = float(self.count + other.count)
        delta = np.asarray(other.mean, dtype=np.float64) - self.mean
        mean = self.mean + delta * (other.count / count)
        m2 = self.m2 + other.m2 + delta ** 2 * (self.count * other.count / count)
        return Moments(count, mean, m2)

    def std(self, floor: float = 1e-2) -> np.ndarray:
        """Standard deviation for normalising: 1 until two vectors are counted, then
        the population's ``sqrt(m2 / count)`` no lower than ``floor``."""
        if self.count < 2:
            return np.ones_like(self.m2)
        return np.maximum(np.sqrt(self.m2 / self.count), floor)
