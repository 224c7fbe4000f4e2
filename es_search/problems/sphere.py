"""Black-box test functions as agents: a vector ``x`` and a score of ``-f(x)``."""
from __future__ import annotations

import math

import torch

from ..agent import Agent
from ..checks import check_int, check_number


class Sphere(Agent):
    """Maximise ``-sum((x - optimum)^2)``: the known optimum is 0 at ``x = optimum``.

    >>> Sphere(dim=3, start=0.0, optimum=3.0).score()
    -27.0
    """

    default_config = {"generations": 100, "population": 16, "sigma": 0.3}

    def __init__(self, dim: int = 10, start: float = 0.0, optimum: float = 3.0):
        super().__init__()
        dim = check_int("dim", dim, 1)
        start, self.optimum = check_number("start", start), check_number("optimum", optimum)
        self.x = torch.nn.Parameter(torch.full((int(dim),), start, dtype=torch.float64),
                                    requires_grad=False)

    def score(self, **kwargs) -> float:
        return -float(((self.x - self.optimum) ** 2).sum())


class Rastrigin(Sphere):
    """Maximise ``-(10 n + sum(x^2 - 10 cos(2 pi x)))`` (optimum 0 at x = 0, a local
    optimum every unit: CMA-ES crosses the basins; extra: cma)."""

    default_config = {"generations": 300, "population": 40, "sigma": 2.0,
                      "strategy": "cma-es"}

    def __init__(self, dim: int = 10, start: float = 3.0):
        super().__init__(dim=dim, start=start, optimum=0.0)

    def score(self, **kwargs) -> float:
        x = self.x
        return -float(10 * x.numel() + (x * x - 10 * torch.cos(2 * math.pi * x)).sum())


class Rosenbrock(Sphere):
    """Maximise ``-sum(100 (x[i+1] - x[i]^2)^2 + (1 - x[i])^2)`` (optimum 0 at x = 1).
    A curved valley that a search must follow by adapting its step's shape.

    >>> Rosenbrock(dim=3, start=1.0).score()
    -0.0
    >>> Rosenbrock(dim=2, start=0.0).score()
    -1.0
    """

    default_config = {"generations": 1000, "population": 10, "sigma": 0.5}

    def __init__(self, dim: int = 10, start: float = 0.0):
        dim = check_int("dim", dim, 2, " (Rosenbrock couples neighbouring values)")
        super().__init__(dim=dim, start=start, optimum=1.0)

    def score(self, **kwargs) -> float:
        x = self.x
        return -float((100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2).sum())
