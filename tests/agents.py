"""Agents shared by the tests (importable by worker processes)."""
import os
import random
import tempfile

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


class Raises(Quadratic):
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
