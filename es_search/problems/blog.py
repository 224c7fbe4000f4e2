"""The blog post's agent: three weights, a CPU-burning score, steps in {-1, 0, +1}."""
from __future__ import annotations

import torch

from ..agent import Agent
from ..checks import check_int


class BlogAgent(Agent):
    """The blog post's 3-weight agent, its score burning CPU (-p work=N), steps in {-1, 0, 1}.

    ``fc1 = Linear(3, 1)``; the score is the sum of ``fc1.weight`` after a dummy loop of
    ``i ** i for i in range(work)`` (1000: ~5 ms). Each weight steps by ``sigma * {-1, 0, +1}``.

    >>> agent = BlogAgent([1, 1, 1], work=10)
    >>> agent.score()
    3.0
    """

    default_config = {"generations": 20, "population": 8, "sigma": 1.0}

    def __init__(self, w=(1.0, 1.0, 1.0), work: int = 1000):
        super().__init__()
        self.work = check_int("work", work, 0)
        self.fc1 = torch.nn.Linear(3, 1).requires_grad_(False)
        self.set_weights({"fc1.weight": torch.tensor([list(w)], dtype=torch.float32)})

    def evolved_parameters(self):
        return [("fc1.weight", self.fc1.weight)]

    def forward(self, x):
        return self.fc1(x)

    def score(self, **kwargs) -> float:
        for i in range(self.work):  # the post's dummy CPU load
            i ** i
        return self.fc1.weight.sum().item()

    def jitter_weights(self, sigma: float) -> None:
        with torch.no_grad():
            step = torch.randint(3, self.fc1.weight.shape, dtype=torch.float32) - 1.0
            self.fc1.weight.add_(step, alpha=sigma)
