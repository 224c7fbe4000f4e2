"""Running observation statistics through the engine: the same seed gives the same run
for any worker count, a resume equals an uninterrupted run, and the saved best weights
score exactly as they were scored."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import es_search
from es_search.problems import load_problem

pytest.importorskip("gymnasium")


def _policy():
    # short episodes: a few hundred steps a generation
    return load_problem("gym:Pendulum-v1")(hidden=(4,), max_steps=25, episodes=2,
                                          normalize="running", reward_offset=1.0)


def _run(agent, n_jobs, generations=3, **kwargs):
    return es_search.run(agent, generations=generations, strategy="ars", population=6,
                         sigma=0.3, n_jobs=n_jobs, seed=5, progress=False,
                         strategy_options={"top": 2, "step_size": 0.1}, **kwargs)


def _same(a, b):
    assert [h["scores"] for h in a.history] == [h["scores"] for h in b.history]
    assert [h["steps"] for h in a.history] == [h["steps"] for h in b.history]
    assert a.best_weights.keys() == b.best_weights.keys()
    assert all(torch.equal(a.best_weights[k], b.best_weights[k]) for k in a.best_weights)


def test_running_statistics_runs_are_identical_for_1_and_2_workers():
    agent = _policy()
    one, two = _run(agent, 1), _run(agent, 2, sequential_fallback=False)
    _same(one, two)
    # steps: the starting agent's 2 x 25, then 6 candidates x 2 episodes x 25 a generation
    assert [h["steps"] for h in one.history] == [350, 650, 950]
    assert float(one.best_weights["obs_count"]) > 0  # the statistics were merged
    assert float(agent.obs_count) == 0  # the caller's agent is not modified


def test_resume_equals_an_uninterrupted_run(tmp_path):
    agent = _policy()
    whole = _run(agent, 1, generations=4)
    _run(agent, 1, generations=2, out=tmp_path / "run")
    resumed = _run(agent, 1, generations=4, out=tmp_path / "run", resume=True)
    _same(whole, resumed)


def test_saved_best_weights_score_exactly_as_they_were_scored(tmp_path):
    out = tmp_path / "run"
    result = _run(_policy(), 2, generations=4, out=out, sequential_fallback=False)
    generation, index = next((h["generation"], h["scores"].index(result.best_score))
                             for h in result.history if result.best_score in h["scores"])
    loaded = _policy()
    loaded.set_weights(torch.load(out / "best_weights.pt"))
    assert float(loaded.obs_count) > 0 or generation == 0
    again = es_search.replay_task(loaded, generation=generation, index=index, seed=5,
                                  center=loaded.get_flat())
    assert again == result.best_score
    agent = result.best_agent()
    assert torch.equal(agent.obs_std, loaded.obs_std)
    assert es_search.replay_task(agent, generation=generation, index=index, seed=5,
                                 center=agent.get_flat()) == result.best_score
    # the test returns of the loaded policy do not depend on the search's reward_offset
    assert np.isfinite(loaded.returns(2)).all()


SEEN: list = []


class SeedLog(es_search.problems.GymPolicy):
    env_id = "Pendulum-v1"

    def score(self, **kwargs):
        SEEN.append(tuple(self.episode_seeds()))
        return super().score(**kwargs)


def test_crn_candidates_of_a_generation_play_the_same_episodes_in_a_run():
    SEEN.clear()
    es_search.run(SeedLog(max_steps=5, episodes=2, crn=True), generations=2,
                  strategy="ars", population=4, n_jobs=1, seed=1, progress=False,
                  repeat_check=False, select_tasks=0)  # their score() calls would be logged too
    first, second = SEEN[1:5], SEEN[5:]  # SEEN[0]: the starting agent
    assert len(set(first)) == 1 and len(set(second)) == 1 and first[0] != second[0]
    SEEN.clear()
    es_search.run(SeedLog(max_steps=5, episodes=2), generations=1, strategy="ars",
                  population=4, n_jobs=1, seed=1, progress=False, repeat_check=False,
                  select_tasks=0)
    assert len(set(SEEN[1:])) == 4  # without crn: one episode set per task
