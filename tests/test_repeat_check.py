"""check_repeatable: a score that depends on what the agent scored before is named at
the start of a run (a warning), in ``es-search check`` (exit 1), and nothing else is."""
from __future__ import annotations

import random
import textwrap
import warnings

import numpy as np
import pytest
import torch

import es_search
from es_search.cli import main
from es_search.problems import load_problem

from agents import Quadratic, RunningStats


class Counts(Quadratic):
    """Adds a call counter to the score: state kept in self between calls."""

    def __init__(self):
        super().__init__(dim=3)
        self.calls = 0

    def score(self):
        self.calls += 1
        return super().score() + 0.01 * self.calls


class BatchNormed(es_search.Agent):
    """A network with BatchNorm in training mode: its running statistics change at every
    call, but its output uses the batch's own statistics, so scores are repeatable."""

    def __init__(self):
        super().__init__()
        with torch.random.fork_rng():
            torch.manual_seed(0)
            self.net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4))

    def score(self):
        return float(self.net(torch.randn(16, 3)).sum())


class UnseededEnv(es_search.Agent):
    """Holds a CartPole environment and resets it without a seed: each episode goes on
    from the environment's own stream (the blog post's warning about random actions)."""

    def __init__(self):
        super().__init__()
        import gymnasium as gym
        self.env = gym.make("CartPole-v1")
        self.w = torch.nn.Parameter(torch.zeros(4))

    def score(self):
        obs, _ = self.env.reset()
        total, done = 0.0, False
        while not done:
            action = int(float(torch.as_tensor(obs) @ self.w) > 0)
            obs, reward, terminated, truncated, _ = self.env.step(action)
            total, done = total + reward, terminated or truncated
        return total - float(obs[0])


class ResetsItsState(Quadratic):
    """Keeps a buffer in self, but clears it at the start of every score(): repeatable."""

    def __init__(self):
        super().__init__(dim=3)
        self.seen = []

    def score(self):
        self.seen = [random.random() for _ in range(3)]  # seeded per task
        return super().score() + sum(self.seen)


class LeakyReports(RunningStats):
    """Scores are repeatable, but the statistics it reports accumulate across tasks."""

    def score(self):
        value = super().score()
        self.leaked = getattr(self, "leaked", 0) + 1
        return value

    def task_report(self):
        report = super().task_report()
        return None if report is None else (report, self.leaked)


class OwnGenerator(Quadratic):
    """Draws from a generator es_search does not seed, made anew at every call."""

    def score(self):
        return super().score() + float(np.random.default_rng().random())


class Raises(Quadratic):
    def score(self):
        raise RuntimeError("broken")


def test_a_counter_is_named_and_the_fix_given():
    message = es_search.check_repeatable(Counts())
    assert message.startswith("Counts is not repeatable: scored twice in a row under the "
                              "same task seed")
    assert "Changed in the agent between the two calls: calls." in message
    assert "a run takes repeat_check=False to skip this check" in message


def test_an_environment_reset_without_a_seed_is_named():
    pytest.importorskip("gymnasium")
    message = es_search.check_repeatable(UnseededEnv())
    assert message.startswith("UnseededEnv is not repeatable")
    assert "Changed in the agent between the two calls: env." in message


def test_what_the_warning_is_about_a_stateful_agent_changes_with_n_jobs():
    """The premise: a counter makes the run depend on the worker count; a network
    whose BatchNorm statistics change but do not enter the score gives one run."""
    def best(agent, n_jobs):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", es_search.UnrepeatableScoreWarning)
            return es_search.run(agent, generations=2, population=8, n_jobs=n_jobs,
                                 progress=False, sequential_fallback=False).history
    assert best(Counts(), 1) != best(Counts(), 2)
    fixed = [best(BatchNormed(), n) for n in (1, 2)]
    assert [r["best_score"] for r in fixed[0]] == [r["best_score"] for r in fixed[1]]


def test_state_reset_in_score_and_every_built_in_pass():
    assert es_search.check_repeatable(ResetsItsState()) is None
    assert es_search.check_repeatable(RunningStats()) is None
    assert es_search.check_repeatable(BatchNormed()) is None
    pytest.importorskip("gymnasium")
    for name in ("sphere", "blog", "cartpole", "pendulum", "gym:Acrobot-v1"):
        assert es_search.check_repeatable(load_problem(name)()) is None, name


def test_randomness_from_outside_the_agent_is_named_as_such():
    message = es_search.check_repeatable(OwnGenerator())
    assert "Nothing in the agent changed between the two calls" in message
    assert "numpy.random.default_rng() without a seed" in message


def test_reports_that_accumulate_are_caught_too():
    message = es_search.check_repeatable(LeakyReports())
    assert "its task_report() differed (the scores did not)" in message
    assert "leaked" in message


def test_the_check_leaves_the_agent_and_the_global_rngs_alone():
    agent = Counts()
    random.seed(5), np.random.seed(5), torch.manual_seed(5)
    expected = (random.random(), np.random.rand(), torch.rand(1))
    random.seed(5), np.random.seed(5), torch.manual_seed(5)
    es_search.check_repeatable(agent)
    assert (random.random(), np.random.rand(), torch.rand(1)) == expected
    assert agent.calls == 0


def unrepeatable_warnings(caught) -> list:
    return [w for w in caught if w.category is es_search.UnrepeatableScoreWarning]


def test_run_warns_at_the_start_once_and_repeat_check_false_skips_it():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        es_search.run(Counts(), generations=3, population=4, n_jobs=1, progress=False)
    (warning,) = unrepeatable_warnings(caught)  # once, not per generation
    assert "Counts is not repeatable" in str(warning.message)
    assert warning.filename == __file__  # shown at the user's line
    with warnings.catch_warnings(record=True) as caught:  # scored here all the same
        warnings.simplefilter("always")
        es_search.run(Counts(), generations=1, population=4, n_jobs=1, progress=False,
                      sequential_fallback=False)
    assert len(unrepeatable_warnings(caught)) == 1
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        es_search.run(Counts(), generations=1, population=4, n_jobs=1, progress=False,
                      repeat_check=False)
        es_search.run(Quadratic(), generations=1, population=4, n_jobs=1, progress=False)
    assert not unrepeatable_warnings(caught)
    with pytest.raises(TypeError, match="repeat_check must be True or False"):
        es_search.run(Quadratic(), generations=1, repeat_check="no")


@pytest.mark.parametrize("n_jobs", [1, 2])
def test_evaluate_and_an_evaluator_warn_once_as_they_start(n_jobs):
    weights = [{"w": torch.full((3,), float(k))} for k in range(4)]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        es_search.evaluate(Counts(), weights, n_jobs=n_jobs)
        with es_search.Evaluator(Counts(), n_jobs=n_jobs) as evaluator:
            for generation in range(3):
                evaluator.evaluate(weights, generation)
    assert [str(w.message).split(":")[0] for w in unrepeatable_warnings(caught)] == \
        ["Counts is not repeatable"] * 2
    assert {w.filename for w in unrepeatable_warnings(caught)} == {__file__}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        es_search.evaluate(Counts(), weights, n_jobs=n_jobs, repeat_check=False)
        with es_search.Evaluator(Counts(), n_jobs=n_jobs, repeat_check=False) as evaluator:
            evaluator.evaluate(weights)
        es_search.evaluate(Quadratic(dim=3), weights, n_jobs=n_jobs)
    assert not unrepeatable_warnings(caught)
    with pytest.raises(TypeError, match="repeat_check must be True or False"):
        es_search.Evaluator(Quadratic(), repeat_check=None)


def test_bad_arguments_are_named():
    with pytest.raises(TypeError, match="score_kwargs must be a dict of keyword arguments "
                                        "for score\\(\\), got 3"):
        es_search.check_repeatable(Quadratic(), score_kwargs=3)
    with pytest.raises(TypeError, match="agent must be an es_search.Agent"):
        es_search.check_repeatable(object())


def test_a_score_that_raises_propagates_and_run_leaves_it_to_its_first_task():
    with pytest.raises(RuntimeError, match="broken"):
        es_search.check_repeatable(Raises())
    with pytest.raises(es_search.ScoreError, match="broken") as info:
        es_search.run(Raises(), generations=1, n_jobs=1, progress=False)
    assert info.value.generation == -1 and info.value.index == 0  # the task, named


def test_the_command_line_check_and_flag(tmp_path, capsys):
    path = tmp_path / "stateful.py"
    path.write_text(textwrap.dedent("""
        import torch, es_search

        class Stateful(es_search.Agent):
            def __init__(self):
                super().__init__()
                self.w = torch.nn.Parameter(torch.zeros(2))
                self.episodes = 0

            def score(self):
                self.episodes += 1
                return -float((self.w ** 2).sum()) - self.episodes
    """))
    assert main(["check", f"{path}:Stateful"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("es-search check: Stateful is not repeatable")
    assert "Changed in the agent between the two calls: episodes." in err
    assert "a run takes --no-repeat-check to skip this check" in err  # es-search run's flag
    assert main(["check", "sphere"]) == 0
    assert capsys.readouterr().out == ("sphere: scored twice under one task seed, the same "
                                       "score, -90 (repeatable)\n")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main(["run", f"{path}:Stateful", "--generations", "1", "--n-jobs", "1",
                     "--no-progress", "--no-repeat-check"]) == 0
    assert not [w for w in caught if w.category is es_search.UnrepeatableScoreWarning]


def test_the_command_line_check_scores_the_starting_agent_twice_not_three_times(
        monkeypatch, capsys):
    """The score it prints is the repeat check's (task (seed, -1, 0)), not a third
    score() call of the same task."""
    from es_search.problems.sphere import Sphere
    calls = []
    score = Sphere.score

    def counted(self, **kwargs):
        calls.append(self.task_seed)
        return score(self, **kwargs)

    monkeypatch.setattr(Sphere, "score", counted)
    assert main(["check", "sphere", "--seed", "3"]) == 0
    assert calls == [es_search.task_seed(3, -1, 0)] * 2
    start = es_search.replay_task(Sphere(), seed=3, generation=-1, index=0)
    assert capsys.readouterr().out == (f"sphere: scored twice under one task seed, the "
                                       f"same score, {start:.6g} (repeatable)\n")


class CountsBatches(Quadratic):
    """score() is fine; score_batch, which a run uses, counts its calls."""

    score_batch_size = 4

    def __init__(self):
        super().__init__(dim=3)
        self.batches = 0

    def score_batch(self, params, seeds):
        self.batches += 1
        return (-((params["w"] - 3) ** 2).sum(dim=1) + self.batches).tolist()


def test_score_batch_is_checked_when_the_run_would_use_it():
    message = es_search.check_repeatable(CountsBatches())
    assert "Changed in the agent between the two calls: batches." in message
    unbatched = CountsBatches()
    unbatched.score_batch_size = 0  # the run calls score(), which keeps no state
    assert es_search.check_repeatable(unbatched) is None
