"""Agents with score_batch, shared by the batching tests (sent to workers by value)."""
import numpy as np
import torch

import es_search
from agents import RunningStats


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
