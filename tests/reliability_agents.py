"""Agents that misbehave on purpose, for the reliability tests.

Loaded by path (``tests/reliability_agents.py:Class``) in subprocesses, and registered
with cloudpickle by value in the tests, so worker processes need not import ``tests``.
"""
from __future__ import annotations

import math
import os
import signal
import threading
import time

import torch

import es_search


class Vec(es_search.Agent):
    """A 4-vector; score -|x - 1|^2 plus task-seeded noise (so seeds matter)."""

    def __init__(self, delay: float = 0.0, dim: int = 4):
        super().__init__()
        self.delay = float(delay)
        self.x = torch.nn.Parameter(torch.zeros(int(dim), dtype=torch.float64),
                                    requires_grad=False)

    def score(self, **kwargs) -> float:
        if self.delay:
            time.sleep(self.delay)
        return -float(((self.x - 1) ** 2).sum()) + 0.01 * float(torch.randn(()))


class DiesOnce(Vec):
    """The worker running task seed ``kill_seed`` dies (os._exit), the first time only:
    a marker file records that it already did."""

    def __init__(self, kill_seed: int, marker: str):
        super().__init__()
        self.kill_seed, self.marker = kill_seed, marker

    def score(self, **kwargs) -> float:
        if self.task_seed == self.kill_seed and not os.path.exists(self.marker):
            with open(self.marker, "w") as f:
                f.write(str(os.getpid()))
            os._exit(17)
        return super().score(**kwargs)


class KilledAtStart(Vec):
    """A worker process that unpickles this agent (the engine's start-up, before any
    task) is killed with SIGKILL, as the OOM killer kills: the first time only when a
    ``marker`` file is given (it records that it happened), else every time."""

    def __init__(self, marker: str | None = None):
        super().__init__()
        self.marker, self.home = marker, os.getpid()

    def __setstate__(self, state: dict) -> None:
        super().__setstate__(state)
        if os.getpid() == self.home or (self.marker and os.path.exists(self.marker)):
            return
        if self.marker:
            with open(self.marker, "w") as f:
                f.write(str(os.getpid()))
        os.kill(os.getpid(), signal.SIGKILL)


class AlwaysDies(Vec):
    """The worker running task seed ``kill_seed`` always dies."""

    def __init__(self, kill_seed: int):
        super().__init__()
        self.kill_seed = kill_seed

    def score(self, **kwargs) -> float:
        if self.task_seed == self.kill_seed:
            os._exit(17)
        return super().score(**kwargs)


class Hangs(Vec):
    """Task seed ``hang_seed`` sleeps for a minute."""

    def __init__(self, hang_seed: int):
        super().__init__()
        self.hang_seed = hang_seed

    def score(self, **kwargs) -> float:
        if self.task_seed == self.hang_seed:
            time.sleep(60)
        return super().score(**kwargs)


class Raises(Vec):
    """``score()`` raises for the tasks whose seeds are in ``fail_seeds``."""

    def __init__(self, fail_seeds=()):
        super().__init__()
        self.fail_seeds = set(fail_seeds)

    def score(self, **kwargs) -> float:
        if self.task_seed in self.fail_seeds:
            raise ValueError(f"boom at {self.x.tolist()}")
        return super().score(**kwargs)


class NonFinite(Vec):
    """Every third task (by seed) scores NaN, every fifth +inf."""

    def score(self, **kwargs) -> float:
        if self.task_seed % 3 == 0:
            return math.nan
        if self.task_seed % 5 == 0:
            return math.inf
        return super().score(**kwargs)


class Holder:
    def __init__(self):
        self.lock = threading.Lock()


class WithLock(Vec):
    def __init__(self):
        super().__init__()
        self.stuff = {"cfg": [1, 2, Holder()]}


class WithGenerator(Vec):
    def __init__(self):
        super().__init__()
        self.inner = torch.nn.Sequential(torch.nn.Linear(2, 2))
        self.inner.gen = (i for i in range(3))


class WithFile(Vec):
    def __init__(self, path: str):
        super().__init__()
        self.log = open(path, "w")


class Sleepy(Vec):
    """Every task but those seeded ``quick_seeds`` (the starting evaluation's: they
    run while the second worker may still be starting, and could all land on the
    first) writes its worker's pid into ``folder`` and sleeps for a minute."""

    def __init__(self, folder: str, quick_seeds: set):
        super().__init__()
        self.folder, self.quick_seeds = folder, set(quick_seeds)

    def score(self, **kwargs) -> float:
        if self.task_seed not in self.quick_seeds:
            with open(os.path.join(self.folder, str(os.getpid())), "w"):
                pass
            time.sleep(60)
        return super().score(**kwargs)


class SlowTest(Vec):
    """A quick search whose ``test_scores()`` (in the main process, after the run) first
    creates the file ``marker``, then sleeps for a minute."""

    def __init__(self, marker: str):
        super().__init__()
        self.marker = marker

    def test_scores(self) -> dict:
        with open(self.marker, "w"):
            pass
        time.sleep(60)
        return {"never": 0.0}


class UsesData(Raises):
    """:class:`Raises` whose score adds the sum of its ``data`` keyword (a tensor)."""

    def score(self, data, **kwargs) -> float:
        return super().score(**kwargs) + float(data.sum())


class LoopDraws(Vec):
    """Draws from Python's ``random`` after the Dask worker's event loop drew from it
    too, while this call ran in a thread beside it (as the loop's jittered heartbeats
    do): the task's seeded draws must not see the loop's."""

    def score(self, **kwargs) -> float:
        import random
        if threading.current_thread() is not threading.main_thread():  # beside the loop
            try:
                from distributed import get_worker
                loop = get_worker().loop
            except (ImportError, ValueError):
                loop = None
            if loop is not None:
                done = threading.Event()
                loop.add_callback(lambda: (random.random(), done.set()))
                done.wait(5)
        return -float(((self.x - 1) ** 2).sum()) + random.random()
