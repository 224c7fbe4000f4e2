"""Shared statistics (Agent.task_report / merge_reports / shared_state): merged in
candidate order; part of the checkpoint and of the best weights; counters in the
history. (The same run for any n_jobs and backend: tests/test_determinism.py, whose
agent keeps such statistics.)"""
import math

import pytest
import torch

import es_search
from es_search.candidates import Candidate
from es_search.front import Evaluator

from agents import Quadratic, RunningStats

KW = dict(generations=4, population=6, sigma=0.3, seed=5, progress=False,
          strategy="openai-es")


def comparable(result):
    history = [{k: v for k, v in r.items() if k != "seconds"} for r in result.history]
    return history, {k: v.tolist() for k, v in result.best_weights.items()}


@pytest.fixture(scope="module")
def reference():
    return es_search.run(RunningStats(), n_jobs=1, **KW)


def test_statistics_are_merged_and_counted(reference):
    steps = [r["steps"] for r in reference.history]
    assert all(b - a >= 3 * 6 for a, b in zip(steps, steps[1:]))  # 3-8 per task
    weights = reference.best_weights
    assert {"count", "mean", "m2"} <= set(weights)
    assert 0 < weights["count"] < steps[-1]  # as of the best's generation, not the end
    assert torch.equal(reference.best_agent().mean, weights["mean"])


def test_best_weights_restore_what_the_best_was_scored_with(reference, tmp_path):
    result = es_search.run(RunningStats(), n_jobs=1, out=tmp_path, **KW)
    assert comparable(result) == comparable(reference)
    generation = next(r["generation"] for r in result.history
                      if r["best_score"] == result.best_score)
    index = result.history[generation]["scores"].index(result.best_score)
    agent = RunningStats()
    agent.set_weights(torch.load(tmp_path / "best_weights.pt"))
    rescored = es_search.replay_task(agent, seed=KW["seed"], generation=generation,
                                     index=index,
                                     candidate=Candidate("vector", vector=agent.get_flat()))
    assert rescored == result.best_score
    # the statistics matter: with the starting ones the same task scores otherwise
    fresh = RunningStats()
    fresh.set_flat(agent.get_flat())
    other = es_search.replay_task(fresh, seed=KW["seed"], generation=generation,
                                  index=index,
                                  candidate=Candidate("vector", vector=agent.get_flat()))
    assert other != result.best_score


def test_resume_equals_an_uninterrupted_run(reference, tmp_path):
    es_search.run(RunningStats(), n_jobs=1, out=tmp_path, **{**KW, "generations": 2})
    resumed = es_search.run(RunningStats(), n_jobs=2, out=tmp_path, resume=True, **KW)
    assert comparable(resumed) == comparable(reference)


def test_agents_without_hooks_send_no_shared_state():
    with Evaluator(Quadratic(), seed=0, n_jobs=1) as ev:
        assert not ev.hooks
        scored = ev.score(0, ev.local.get_flat(), [Candidate("jitter", 0.1)] * 3)
        assert scored.shared is None and scored.reports == [None] * 3
    result = es_search.run(Quadratic(), generations=2, population=3, n_jobs=1,
                           progress=False)
    assert "steps" not in result.history[0]


def test_failed_tasks_report_none():
    class Flaky(RunningStats):
        def score(self):
            value = super().score()
            if self.task_seed % 3 == 0:
                raise RuntimeError("flaky")
            return value

    seen = []

    class Recording(Flaky):
        def merge_reports(self, reports):
            seen.append([r is None for r in reports])
            return super().merge_reports(reports)

    with pytest.warns(RuntimeWarning, match="raised"):
        result = es_search.run(Recording(), n_jobs=1, on_error="worst", **KW)
    flat = [s for r in result.history for s in r["scores"]]
    failed = [not math.isfinite(s) for s in flat]
    assert [x for gen in seen[1:] for x in gen] == failed and any(failed)
