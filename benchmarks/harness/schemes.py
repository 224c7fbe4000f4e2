"""What the engine is compared with, and how bytes sent are counted.

- :func:`blog_generation`: the blog post's scheme, a new ``multiprocessing.Pool(n)`` per
  generation with agent objects and weight dicts pickled per task;
- :func:`joblib_generation`: a plain ``joblib.Parallel(n_jobs=n)`` over agent objects;
- :func:`ceiling`: ``n`` independent processes running the same pure-Python work side by
  side against one alone: what this machine gives ``n`` perfect workers;
- :class:`PipeCounter`: bytes this process writes to multiprocessing connections.
"""
from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import pickle
import statistics
import time
from typing import Any, Sequence

import torch

from es_search.agent import Agent
from .workloads import SIGMA, spin


class PipeCounter:
    """Counts the bytes this process writes to any multiprocessing connection."""

    def __init__(self) -> None:
        self.bytes = 0

    def __enter__(self) -> "PipeCounter":
        cls = multiprocessing.connection.Connection
        self._original = original = cls._send_bytes

        def counting(conn: Any, buf: Any) -> Any:
            self.bytes += len(buf)
            return original(conn, buf)

        cls._send_bytes = counting
        return self

    def __exit__(self, *exc_info: object) -> None:
        multiprocessing.connection.Connection._send_bytes = self._original


def process_input(aw: Any, b: Any = None, **kwargs: Any) -> float:
    """The blog post's task function (without its print)."""
    agent, weights = aw
    agent.set_weights(weights)
    return agent.score()


def _score_agent(agent: Agent) -> float:
    return agent.score()


def _jittered(parent: Agent, pop: int) -> list[Agent]:
    out = []
    for _ in range(pop):
        agent = parent.clone()
        agent.jitter_weights(SIGMA)
        out.append(agent)
    return out


def _one_thread() -> None:
    # a forked child must not enter the OpenMP pool its parent started (it hangs):
    # torch runs inline with one thread
    torch.set_num_threads(1)


def _process_pickled(blob: bytes) -> float:
    return process_input(pickle.loads(blob), b=45, c=33)


def blog_generation(parent: Agent, pop: int, n: int) -> list[float]:
    """One generation the blog post's way: agents and weights built here, a new Pool,
    each (agent, weights) pair pickled to its task.

    The pairs are pickled by value with the standard pickler, the cheaper of the two
    ways here: handed to the Pool as they are, torch's multiprocessing reductions move
    every tensor to shared memory and pass file descriptors (~25 ms a task at 10^4
    parameters on the 2-core development machine). Each worker sets torch to one
    thread: a forked child that enters its parent's OpenMP pool hangs (seen from
    ~10^5 parameters).
    """
    batch_agents = [parent.clone() for _ in range(pop)]
    batch_w = [a.get_weights() for a in _jittered(parent, pop)]
    with multiprocessing.Pool(n, initializer=_one_thread) as pool:
        return pool.map(_process_pickled,
                        [pickle.dumps(aw) for aw in zip(batch_agents, batch_w)])


def joblib_generation(parent: Agent, pop: int, n: int) -> list[float]:
    """One generation as a plain joblib loop over agent objects."""
    import joblib
    agents = _jittered(parent, pop)
    return joblib.Parallel(n_jobs=n)(joblib.delayed(_score_agent)(a) for a in agents)


def _ceiling_worker(loops: int, barrier: Any, queue: Any) -> None:
    barrier.wait()
    began = time.perf_counter()
    spin(loops)
    queue.put(time.perf_counter() - began)


def _side_by_side(n: int, loops: int) -> float:
    ctx = multiprocessing.get_context()
    barrier, queue = ctx.Barrier(n), ctx.Queue()
    procs = [ctx.Process(target=_ceiling_worker, args=(loops, barrier, queue))
             for _ in range(n)]
    for p in procs:
        p.start()
    times = [queue.get() for _ in procs]
    for p in procs:
        p.join()
    return max(times)


def ceiling(n_values: Sequence[int], loops: int, reps: int) -> dict[int, dict]:
    """Per ``n``: one process alone vs ``n`` side by side, interleaved rep by rep."""
    out = {}
    for n in n_values:
        if n == 1:
            out[n] = {"alone_s": None, "side_by_side_s": None, "efficiency": 1.0,
                      "speedup": 1.0}
            continue
        alone, together = [], []
        for _ in range(reps):
            alone.append(_side_by_side(1, loops))
            together.append(_side_by_side(n, loops))
        a, t = statistics.median(alone), statistics.median(together)
        out[n] = {"alone_s": a, "side_by_side_s": t, "efficiency": min(1.0, a / t),
                  "speedup": n * min(1.0, a / t)}
    return out
