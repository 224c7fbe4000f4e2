"""What the scaling benchmark scores: calibrated pure-Python work in a small agent.

Score costs: ``trivial`` (no work), ``1ms`` and ``10ms`` of :func:`spin` calibrated on
this machine, and ``blog``: the blog post's agent with its loop cut to ``BLOG_WORK``.
"""
from __future__ import annotations

import statistics
import time
from typing import Any

import torch

from ..agent import Agent
from ..problems.blog import BlogAgent

COSTS = ("trivial", "1ms", "10ms", "blog")
COST_SECONDS = {"trivial": 0.0, "1ms": 1e-3, "10ms": 1e-2}
BLOG_WORK = 1000  # the post's loop is range(12000): ~10 s a call; 1000 is ~5 ms
SIGMA = 0.1


def spin(loops: int) -> int:
    """Fixed pure-Python work (no sleeping, no clock): ``loops`` additions.

    >>> spin(4)
    6
    """
    total = 0
    for i in range(loops):
        total += i
    return total


def calibrate(seconds: float, trials: int = 7) -> dict:
    """Loops of :func:`spin` that take ``seconds`` here (median of ``trials``)."""
    probe = 200_000
    spin(probe)
    per_loop = []
    for _ in range(trials):
        began = time.perf_counter()
        spin(probe)
        per_loop.append((time.perf_counter() - began) / probe)
    ns = statistics.median(per_loop)
    loops = max(1, round(seconds / ns)) if seconds > 0 else 0
    return {"target_s": seconds, "loops": loops, "ns_per_loop": ns * 1e9,
            "spread": (max(per_loop) - min(per_loop)) / ns}


class BenchAgent(Agent):
    """``size`` float32 parameters; ``score()`` runs ``spin(loops)`` and reads one weight.

    >>> BenchAgent(size=4, loops=10).score()
    0.0
    """

    def __init__(self, size: int = 10, loops: int = 0):
        super().__init__()
        self.loops = int(loops)
        self.w = torch.nn.Parameter(torch.zeros(int(size)), requires_grad=False)

    def score(self, **kwargs: Any) -> float:
        spin(self.loops)
        return float(self.w[0])


def make_agent(cost: str, size: int, loops: dict) -> Agent:
    """The agent for one score cost; ``loops`` maps ``1ms``/``10ms`` to calibrated loops."""
    if cost == "blog":
        return BlogAgent(work=BLOG_WORK)
    return BenchAgent(size=size, loops=loops[cost])
