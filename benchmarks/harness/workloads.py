"""What the scaling benchmark scores: calibrated pure-Python work in a small agent.

Score costs: ``trivial`` (no work), ``1ms`` and ``10ms`` of :func:`spin` calibrated on
this machine, and ``blog``: the blog post's agent with its loop cut to ``BLOG_WORK``.
"""
from __future__ import annotations

from es_search.agent import Agent
from es_search.bench import BenchAgent, calibrate, spin  # noqa: F401 (used from here)
from es_search.problems.blog import BlogAgent

COSTS = ("trivial", "1ms", "10ms", "blog")
COST_SECONDS = {"trivial": 0.0, "1ms": 1e-3, "10ms": 1e-2}
BLOG_WORK = 1000  # the post's loop is range(12000): ~10 s a call; 1000 is ~5 ms
SIGMA = 0.1


def make_agent(cost: str, size: int, loops: dict) -> Agent:
    """The agent for one score cost; ``loops`` maps ``1ms``/``10ms`` to calibrated loops."""
    if cost == "blog":
        return BlogAgent(work=BLOG_WORK)
    return BenchAgent(size=size, loops=loops[cost])
