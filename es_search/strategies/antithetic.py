"""The antithetic family's base (OpenAI-ES, ARS, PGPE): pairs ``center +- sigma * eps_k``,
``eps_k = noise(seed, generation, k, n)`` drawn by workers and ``tell``."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ..candidates import Candidate, noise_vectors
from ..checks import check, check_int
from .base import Strategy


class Antithetic(Strategy):
    """A strategy that asks for ``population / 2`` pairs ``Candidate("noise", sigma, +-1,
    key=k)``; its state has ``center``, ``sigma`` and ``seed`` (the run's)."""

    def ask(self, state, generation: int) -> list[Candidate]:
        return pairs(self.population // 2, state.sigma)


def even_population(name: str, population: int) -> int:
    """``population``, checked: at least 2 and even (twice the number of pairs)."""
    value = check_int("population", population, 2)
    return check("population", value, value % 2 == 0, f"even ({name} samples antithetic "
                 f"pairs)", f"use {{population={value + 1}}}")


def pairs(count: int, sigma: float, vector: np.ndarray | None = None) -> list[Candidate]:
    """``count`` antithetic pairs, ``+`` then ``-`` for each key."""
    return [Candidate("noise", sigma, sign, key, vector=vector)
            for key in range(count) for sign in (1.0, -1.0)]


def antithetic_pairs(name: str, candidates: Sequence[Candidate], values: Sequence[float]
                     ) -> tuple[list[int], dict[int, float], dict[int, float]]:
    """``(keys, plus, minus)``: the values of antithetic ``"noise"`` pairs by sign, ``keys``
    those of complete pairs in ask order."""
    plus: dict[int, float] = {}
    minus: dict[int, float] = {}
    for candidate, value in zip(candidates, values):
        if candidate.kind != "noise":
            raise ValueError(f"{name} was told about a {candidate.kind!r} candidate; it "
                             f"only asks for antithetic 'noise' pairs")
        (plus if candidate.sign > 0 else minus)[candidate.key] = float(value)
    return [k for k in plus if k in minus], plus, minus


def noise_sum(seed: int, generation: int, weights: dict[int, float], n: int) -> np.ndarray:
    """``sum_k weights[k] * eps_k`` in ``weights``' order (a zero weight draws nothing)."""
    used = [key for key, w in weights.items() if w != 0.0]
    total = np.zeros(n)
    for key, eps in noise_vectors(seed, generation, used, n):  # eps: a fresh vector
        eps *= weights[key]
        total += eps
    return total
