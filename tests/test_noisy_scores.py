"""Noisy scores handled by default: the hill climbers' reevaluate="auto" scores the
starting agent twice and re-evaluates the parent each generation when the two differ."""
import json

import numpy as np
import pytest
import torch

import es_search
from es_search.strategies import AdaptiveHillClimb, HillClimb

from agents import Quadratic

KW = dict(generations=4, population=5, sigma=0.3, seed=3, n_jobs=1, progress=False)


class LuckySpikes(es_search.Agent):
    """-|w - 2|^2 plus noise that is now and then a large lucky spike (like an RL
    return that was lucky once)."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(3), requires_grad=False)

    def true_score(self):
        return -float(((self.w - 2) ** 2).sum())

    def score(self):
        lucky = np.random.rand() < 0.08
        return self.true_score() + (30.0 if lucky else float(np.random.normal(0, 0.1)))


@pytest.mark.parametrize("strategy", ["hill-climb", "adaptive-hill-climb"])
def test_noisy_scores_turn_reevaluation_on_and_the_config_says_so(strategy, tmp_path):
    result = es_search.run(LuckySpikes(), strategy=strategy, out=tmp_path, **KW)
    assert result.config["strategy"]["reevaluate"] == "auto"
    assert result.config["resolved"] == {"reevaluate": True}
    assert all(len(r["scores"]) == 5 + 1 for r in result.history)  # + the parent
    assert result.evaluations == 2 + 4 * 6
    assert json.loads((tmp_path / "config.json").read_text())["resolved"] == \
        {"reevaluate": True}


def test_deterministic_scores_leave_it_off():
    result = es_search.run(Quadratic(3), **KW)
    assert result.config["resolved"] == {"reevaluate": False}
    assert all(len(r["scores"]) == 5 for r in result.history)
    assert result.evaluations == 2 + 4 * 5


@pytest.mark.parametrize("setting, per_generation", [(True, 6), (False, 5)])
def test_true_and_false_are_honoured(setting, per_generation):
    result = es_search.run(LuckySpikes(), strategy_options={"reevaluate": setting}, **KW)
    assert "resolved" not in result.config
    assert all(len(r["scores"]) == per_generation for r in result.history)
    assert result.evaluations == 1 + 4 * per_generation


def test_auto_finds_what_a_lucky_parent_hides():
    """The final parent's true score: a parent kept for one lucky spike freezes the
    search without re-evaluation."""
    parents = {}
    for setting in ("auto", False):
        result = es_search.run(LuckySpikes(), generations=30, population=8, sigma=0.3,
                               seed=1, n_jobs=1, progress=False,
                               strategy_options={"reevaluate": setting})
        agent = LuckySpikes()
        agent.set_weights(result.center_weights)  # the final parent
        parents[setting] = agent.true_score()
    assert parents["auto"] > parents[False] + 1.0, parents


def test_resume_compares_the_setting_not_the_decision(tmp_path):
    full = es_search.run(LuckySpikes(), **KW)
    es_search.run(LuckySpikes(), out=tmp_path, **{**KW, "generations": 2})
    resumed = es_search.run(LuckySpikes(), out=tmp_path, resume=True, **KW)
    strip = lambda r: [{k: v for k, v in h.items() if k != "seconds"} for h in r.history]
    assert strip(resumed) == strip(full) and resumed.config["resolved"] == \
        {"reevaluate": True}
    with pytest.raises(es_search.CheckpointError, match="strategy.reevaluate: 'auto'"):
        es_search.run(LuckySpikes(), out=tmp_path, resume=True,
                      strategy_options={"reevaluate": True}, **{**KW, "generations": 5})


def test_the_strategy_api_alone_decides_from_two_scores():
    for cls in (HillClimb, AdaptiveHillClimb):
        strategy = cls(population=2)
        assert strategy.initial_evaluations == 2
        assert strategy.init_from(np.zeros(2), [1.0, 1.5], seed=0).reevaluate is True
        assert strategy.init_from(np.zeros(2), [1.0, 1.0], seed=0).reevaluate is False
        assert strategy.init(np.zeros(2), 1.0, seed=0).reevaluate is False
        assert cls(population=2, reevaluate=True).initial_evaluations == 1
        with pytest.raises(TypeError, match="True, False or 'auto'"):
            cls(reevaluate="sometimes")


# ------------------------------------- the re-evaluated parent's score: its fresh scores' mean
def _tell(strategy, state, candidate_scores, parent_fresh=None):
    candidates = strategy.ask(state, 0)
    scores = list(candidate_scores) + ([] if parent_fresh is None else [parent_fresh])
    vectors = {i: np.full(2, 10.0 + i) for i in range(len(candidate_scores))}
    return strategy.tell(state, 0, candidates, scores, vectors.get)


@pytest.mark.parametrize("cls", [HillClimb, AdaptiveHillClimb])
def test_the_parent_is_its_fresh_scores_mean_and_a_tie_keeps_it(cls):
    strategy = cls(population=2, sigma=1.0, reevaluate=True)
    state = strategy.init(np.zeros(2), 100.0, seed=0)  # a lucky score made it the parent
    state = _tell(strategy, state, [-5.0, -6.0], 2.0)  # dropped at its first re-evaluation
    assert (state.center_score, state.reevaluations) == (2.0, 1)
    state = _tell(strategy, state, [-5.0, -6.0], 4.0)  # then averaged: a lucky 4 counts half
    assert (state.center_score, state.reevaluations) == (3.0, 2)
    # the fresh scores 2, 4, 0 average 2: a candidate's 2 is a tie, no evidence, kept out
    tied = _tell(strategy, state, [2.0, -6.0], 0.0)
    assert np.array_equal(tied.center, np.zeros(2)) and tied.center_score == 2.0
    # above the mean it moves in, with its own (one) score, averaged from its next one on
    moved = _tell(strategy, state, [2.5, -6.0], 0.0)
    assert np.array_equal(moved.center, np.full(2, 10.0))
    assert (moved.center_score, moved.reevaluations) == (2.5, 0)
    # a failed re-evaluation makes the parent the worst, and its mean starts again
    failed = _tell(strategy, state, [float("nan")] * 2, float("nan"))
    assert (failed.center_score, failed.reevaluations) == (-np.inf, 0)
    again = _tell(strategy, failed, [-9.0, -8.0], 1.0)
    assert (again.center_score, again.reevaluations) == (1.0, 1)


@pytest.mark.parametrize("cls", [HillClimb, AdaptiveHillClimb])
def test_without_reevaluation_ties_move_as_before(cls):
    strategy = cls(population=2, sigma=1.0, reevaluate=False)
    state = _tell(strategy, strategy.init(np.zeros(2), 2.0, seed=0), [2.0, -6.0])
    assert np.array_equal(state.center, np.full(2, 10.0)) and state.reevaluations == 0


class CappedNoisy(es_search.Agent):
    """Like an episode return with a time limit: -|w - 2|^2 + 3 plus noise, capped at 0,
    so near the optimum most scores tie at the cap."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(2), requires_grad=False)

    def true_score(self):
        return -float(((self.w - 2) ** 2).sum())

    def score(self):
        return min(0.0, self.true_score() + 3.0 + float(np.random.normal(0, 3.0)))


def test_a_capped_noisy_score_keeps_a_good_parent():
    """On a capped noisy score a lucky candidate ties a good parent at the cap; the
    mean of the parent's fresh scores and strict ties keep the good one."""
    finals = []
    for seed in range(4):  # (no run folder: its writes were 9/10 of this test's time)
        result = es_search.run(CappedNoisy(), generations=40, population=8, sigma=0.5,
                               seed=seed, n_jobs=1, progress=False)
        agent = CappedNoisy()
        agent.set_weights(result.center_weights)  # the final centre
        finals.append(agent.true_score())
    assert np.median(finals) > -1.0, finals


def test_deterministic_scores_give_todays_history_with_auto():
    """"auto" on a deterministic score decides False: the same candidates, scores and
    parents as reevaluate=False (the starting agent scored once more)."""
    auto = es_search.run(Quadratic(3), **KW)
    off = es_search.run(Quadratic(3), strategy_options={"reevaluate": False}, **KW)
    assert [h["scores"] for h in auto.history] == [h["scores"] for h in off.history]
    assert auto.best_score == off.best_score and auto.evaluations == off.evaluations + 1
    assert all(torch.equal(auto.center_weights[k], off.center_weights[k])
               for k in off.center_weights)
