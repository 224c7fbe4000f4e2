"""Agents shared by the tests: well-behaved ones, batched ones (score_batch) and ones that
misbehave on purpose (die, hang, raise, return non-finite scores, cannot be pickled).

conftest.py registers this module with cloudpickle by value, so worker processes need
not import ``tests``; the command line loads it by path (``tests/agents.py:Class``) in
subprocesses. (Agents that workers must import by reference: reference_agents.py.)"""
from __future__ import annotations

import math
import os
import signal
import random
import tempfile
import threading
import time

import numpy as np
import torch

import es_search


class Quadratic(es_search.Agent):
    """Maximise -|w - 3|^2 (optimum 0)."""

    def __init__(self, dim=10):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(dim), requires_grad=False)

    def score(self):
        return -float(((self.w - 3) ** 2).sum())


class NoisyEverywhere(es_search.Agent):
    """Draws from all three global RNGs in both jitter_weights() and score()."""

    def __init__(self):
        super().__init__()
        with torch.random.fork_rng():  # the same starting weights every time
            torch.manual_seed(0)
            self.fc = torch.nn.Linear(4, 2)
        self.register_buffer("counter", torch.zeros(1))

    def jitter_weights(self, sigma):
        scale = sigma * (0.5 + random.random()) * (0.5 + float(np.random.rand()))
        with torch.no_grad():
            for _, p in self.evolved_parameters():
                p.add_(torch.randn_like(p), alpha=scale)

    def score(self, **kwargs):
        x = torch.rand(4)
        noise = random.gauss(0, 0.1) + float(np.random.normal(0, 0.1))
        return float(self.fc(x).sum().detach()) + noise


class RandomScore(es_search.Agent):
    """Scores are pure draws: exposes the streams tasks get."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(2))

    def score(self):
        return random.random() + float(np.random.rand()) + float(torch.rand(()))


class EchoKwargs(es_search.Agent):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(1))

    def score(self, b=None, **kwargs):
        return float(b + kwargs["c"] + self.w.item())


class ReturnsText(es_search.Agent):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(1))

    def score(self):
        return "high"


class SometimesNaN(es_search.Agent):
    """NaN whenever w[0] > 0.5, else a deterministic score rising with w[0]."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(2))

    def score(self):
        if self.w[0] > 0.5:
            return float("nan")
        return float(self.w[0])


class SeedProbe(es_search.Agent):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(1))

    def score(self):
        return float(self.task_seed % 1000003)


class RunningStats(es_search.Agent):
    """Keeps running observation statistics the engine merges (the shared-state hooks).

    ``score()`` draws a variable number of observations from the task's RNG, normalises
    them with the statistics it was sent, and reports the count, mean and M2 of what it
    saw; ``merge_reports`` folds them in (Chan et al.), in candidate order, and counts
    ``steps``.
    """

    def __init__(self, dim=3):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(dim))
        self.register_buffer("count", torch.zeros((), dtype=torch.float64))
        self.register_buffer("mean", torch.zeros(dim, dtype=torch.float64))
        self.register_buffer("m2", torch.zeros(dim, dtype=torch.float64))
        self._seen = None

    def score(self):
        steps = int(torch.randint(3, 9, ()))
        obs = (torch.randn(steps, self.w.numel(), dtype=torch.float64) * 2 + 1
               + self.w.double())
        self._seen = (float(steps), obs.mean(0), ((obs - obs.mean(0)) ** 2).sum(0))
        std = torch.sqrt(self.m2 / self.count.clamp(min=1) + 1e-8)
        normalised = (obs - self.mean) / std
        return -float(((normalised - 0.5) ** 2).mean())

    def task_report(self):
        seen, self._seen = self._seen, None
        return seen

    def merge_reports(self, reports):
        steps = 0
        for report in reports:
            if report is None:
                continue
            n, mean, m2 = report
            total = self.count + n
            delta = mean - self.mean
            self.mean += delta * n / total
            self.m2 += m2 + delta ** 2 * self.count * n / total
            self.count += n
            steps += int(n)
        return {"steps": steps}

    def shared_state(self):
        return {"count": self.count, "mean": self.mean, "m2": self.m2}


class MatrixAgent(RunningStats):
    """The determinism matrix's agent: draws from all three global RNGs in
    ``jitter_weights()`` and ``score()``, and keeps running statistics (shared state)."""

    def jitter_weights(self, sigma):
        scale = sigma * (0.5 + random.random()) * (0.5 + float(np.random.rand()))
        with torch.no_grad():
            for _, p in self.evolved_parameters():
                p.add_(torch.randn_like(p), alpha=scale)

    def score(self):
        return super().score() + random.gauss(0, 0.1) + float(np.random.normal(0, 0.1))


class MatrixAgentWithKwargs(MatrixAgent):
    """:class:`MatrixAgent` whose ``score()`` needs the run's ``score_kwargs`` (a tensor
    among them): they must reach every worker of every backend."""

    def score(self, offset, scale):
        return float(scale) * super().score() + float(offset.sum())


class CountsUnpickling:
    """A ``score_kwargs`` value that leaves a file named after the process in ``folder``
    each time it is unpickled."""

    def __init__(self, folder):
        self.folder = str(folder)

    def __reduce__(self):
        return _unpickled, (self.folder,)


def _unpickled(folder):
    fd, _ = tempfile.mkstemp(dir=folder, prefix=f"{os.getpid()}-")
    os.close(fd)
    return CountsUnpickling(folder)


class TakesData(Quadratic):
    """:class:`Quadratic` whose ``score()`` takes a ``data`` keyword."""

    def score(self, data):
        if not isinstance(data, CountsUnpickling):
            raise TypeError(f"data: {data!r}")
        return super().score()


def sweep_seed(seed, n_jobs=-1):
    """A sweep's task (run in a joblib worker by the test): one run's best score."""
    return es_search.run(Quadratic(dim=3), generations=4, seed=seed, n_jobs=n_jobs,
                         progress=False).best_score


class ConstructorRaises(Quadratic):
    """A constructor that fails with something else than a TypeError or ValueError."""

    def __init__(self, dim: int = 3):
        if dim < 0:
            raise RuntimeError(f"no dimension {dim}")
        super().__init__()


class Transposed(es_search.Agent):
    """An evolved weight that is not contiguous (a transposed view, as a module may keep
    after ``.t()`` or ``channels_last``): jitter_weights() draws in its memory order."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(3, 2).t(), requires_grad=False)

    def score(self):
        return -float(((self.w - torch.arange(6.0).reshape(2, 3)) ** 2).sum())


# ------------------------------------------------------------- batched (score_batch)
class RowExact(es_search.Agent):
    """score() computes exactly what one row of score_batch() computes: a quadratic
    plus noise from the candidate's own stream. Optional faults for the tests: a task
    seed whose row raises (``bad_seed``) or returns NaN (``nan_seed``), and a batch
    that raises whenever it holds more than one candidate (``batch_only_fault``)."""

    score_batch_size = 4

    def __init__(self, dim=5, bad_seed=None, nan_seed=None, batch_only_fault=False):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(dim), requires_grad=False)
        self.bad_seed, self.nan_seed = bad_seed, nan_seed
        self.batch_only_fault = batch_only_fault

    def _value(self, w, seed):
        if seed == self.bad_seed:
            raise ValueError(f"bad candidate (task seed {seed})")
        if seed == self.nan_seed:
            return float("nan")
        noise = np.random.default_rng(seed).standard_normal()
        return -float(((w.double() - 3) ** 2).sum()) + 0.1 * noise

    def score(self):
        return self._value(self.w, self.task_seed)

    def score_batch(self, params, seeds):
        if self.batch_only_fault and len(seeds) > 1:
            raise MemoryError("this batch is too big")
        return [self._value(params["w"][i], s) for i, s in enumerate(seeds)]


class GroupSensitive(es_search.Agent):
    """Each row's score depends (slightly) on the rest of its group: the run is still
    the same for any worker count, because groups are cut at fixed indices."""

    score_batch_size = 4  # population 8 and a re-evaluated parent: groups [0, 4), [4, 9)

    def __init__(self, dim=4):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(dim), requires_grad=False)

    def score_batch(self, params, seeds):
        w = params["w"].double()
        return -((w - 3) ** 2).sum(dim=1) + 1e-6 * w.sum() + 1e-3 * torch.rand(len(seeds))


class ReportsGroupSize(GroupSensitive):
    """GroupSensitive in groups of 8; each group reports its size."""

    score_batch_size = 8

    def score_batch(self, params, seeds):
        self.group_rows = len(seeds)
        return super().score_batch(params, seeds)

    def task_report(self):
        return self.__dict__.pop("group_rows", None)


class BatchedRunningStats(RunningStats):
    """RunningStats scored a group at a time: each row draws from its own generator
    (its task seed); the group reports the statistics of all its rows at once."""

    score_batch_size = 4

    def score_batch(self, params, seeds):
        std = torch.sqrt(self.m2 / self.count.clamp(min=1) + 1e-8)
        scores, seen = [], []
        for w, seed in zip(params["w"], seeds):
            g = torch.Generator().manual_seed(seed % 2 ** 63)
            steps = int(torch.randint(3, 9, (), generator=g))
            obs = (torch.randn(steps, w.numel(), dtype=torch.float64, generator=g) * 2 + 1
                   + w.double())
            seen.append(obs)
            scores.append(-float((((obs - self.mean) / std - 0.5) ** 2).mean()))
        obs = torch.cat(seen)
        self._seen = (float(len(obs)), obs.mean(0), ((obs - obs.mean(0)) ** 2).sum(0))
        return scores


# ------------------------------------------------- misbehaving on purpose (reliability)
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
    """``score()`` raises for the tasks whose seeds are in ``fail_seeds`` and returns
    text (no score) for those in ``text_seeds``."""

    def __init__(self, fail_seeds=(), text_seeds=()):
        super().__init__()
        self.fail_seeds, self.text_seeds = set(fail_seeds), set(text_seeds)

    def score(self, **kwargs) -> float:
        if self.task_seed in self.fail_seeds:
            raise ValueError(f"boom at {self.x.tolist()}")
        if self.task_seed in self.text_seeds:
            return "high"
        return super().score(**kwargs)


class LockedError(ValueError):
    """An exception that cannot be pickled: it holds a lock."""

    def __init__(self, message):
        super().__init__(message)
        self.lock = threading.Lock()


class RaisesLocked(Raises):
    """``score()`` raises a :class:`LockedError` for the tasks of ``fail_seeds``; those
    raised in this process are kept in ``raised``."""

    raised: list = []

    def score(self, **kwargs) -> float:
        if self.task_seed in self.fail_seeds:
            error = LockedError(f"locked boom at {self.x.tolist()}")
            RaisesLocked.raised.append(error)
            raise error
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


class Parameterless(es_search.Agent):
    """Nothing to evolve: refused by run() and es-search check alike."""

    def score(self):
        return 1.0
