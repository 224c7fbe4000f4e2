"""Noisy scores handled by default: the hill climbers' reevaluate="auto" scores the
starting agent twice and re-evaluates the parent each generation when the two differ."""
import json

import numpy as np
import pytest
import torch

import es_search
from es_search import checkpoint
from es_search.output import CHECKPOINT
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


def test_auto_finds_what_a_lucky_parent_hides(tmp_path):
    """The final parent's true score: a parent kept for one lucky spike freezes the
    search without re-evaluation."""
    parents = {}
    for setting in ("auto", False):
        es_search.run(LuckySpikes(), generations=30, population=8, sigma=0.3, seed=1,
                      n_jobs=1, progress=False, out=tmp_path / str(setting),
                      strategy_options={"reevaluate": setting})
        agent = LuckySpikes()
        agent.set_flat(checkpoint.load(tmp_path / str(setting) / CHECKPOINT)["state"].center)
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
