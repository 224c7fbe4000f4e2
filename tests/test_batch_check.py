"""es_search.check_score_batch: a row's score must not depend on the rest of its call."""
from __future__ import annotations

import random

import numpy as np
import pytest
import torch

import es_search
from agents import GroupSensitive, RowExact
from es_search.scores import NotAScore
from es_search.seeding import seed_global_rngs, task_seed
from test_batched import Line


def _built(agent, seed, index, sigma):
    """Candidate ``index`` of generation 0, built as the engine builds a jitter."""
    b = agent.clone()
    b.task_seed = task_seed(seed, 0, index)
    seed_global_rngs(b.task_seed)
    b.jitter_weights(sigma)
    return b


@pytest.mark.parametrize("cls", [RowExact, Line])
def test_row_exact_agents_pass_and_get_their_candidates_scores(cls):
    agent = cls()
    with torch.random.fork_rng():
        scores = es_search.check_score_batch(agent, population=6, sigma=0.3, seed=5,
                                             rtol=0, atol=0)
        expected = [_built(agent, 5, i, 0.3).score() for i in range(6)]
    assert scores == expected
    assert len(set(scores)) == 6  # six different candidates


def test_batched_built_ins_are_bit_identical_row_by_row():
    pytest.importorskip("gymnasium")
    from es_search.problems import load_problem
    for name in ("cartpole", "pendulum"):
        scores = es_search.check_score_batch(load_problem(name)(), population=5,
                                             rtol=0, atol=0)
        assert len(scores) == 5 and all(np.isfinite(scores))


def test_a_score_that_depends_on_the_group_is_named():
    with pytest.raises(es_search.ScoreBatchMismatch) as info:
        es_search.check_score_batch(GroupSensitive(), population=8)
    message = str(info.value)
    # candidate 0 draws the same torch.rand() in every layout (its group's first row)
    assert "GroupSensitive.score_batch() scores 7 of 8 candidates differently" in message
    assert f"candidate 1 (task seed {task_seed(0, 0, 1)})" in message
    assert "in a group of 8" in message and "in groups of 4 and 4" in message
    assert "in groups of one" in message and "... and 4 more" in message
    assert "candidate_rngs" in message  # how to fix it
    # the differences are small: a tolerance that covers them passes
    assert len(es_search.check_score_batch(GroupSensitive(), population=8, atol=1.0)) == 8


class SharedStream(es_search.Agent):
    """Draws its noise from the global RNG, seeded once per group (no score() of its
    own)."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(3), requires_grad=False)

    def score_batch(self, params, seeds):
        w = params["w"].double()
        return (-((w - 3) ** 2).sum(dim=1) + torch.rand(len(seeds), dtype=torch.float64)).tolist()


class ScoreDisagrees(RowExact):
    """score_batch is row-exact, but score() computes something else."""

    def score(self):
        return super().score() + 1.0


def test_a_shared_stream_is_caught_but_not_at_the_groups_first_row():
    with pytest.raises(es_search.ScoreBatchMismatch) as info:
        es_search.check_score_batch(SharedStream(), population=4)
    message = str(info.value)
    assert "scores 3 of 4 candidates" in message  # candidate 0 draws what it drew alone
    assert "candidate 0 " not in message and "candidate 1 " in message


def test_score_must_compute_what_a_row_computes():
    with pytest.raises(es_search.ScoreBatchMismatch, match=r"in score\(\)") as info:
        es_search.check_score_batch(ScoreDisagrees(), population=4)
    # every grouping agrees: the message says score() is the odd one out, not the groups
    assert "score_batch() and its score() disagree on 4 of 4 candidates" in str(info.value)
    assert "depending on the rest of the call" not in str(info.value)
    assert "Make score() compute what score_batch() computes for one row" in str(info.value)


def test_the_agent_and_the_global_rngs_are_left_alone():
    agent = RowExact()
    agent.jitter_weights(1.0)
    before = agent.get_flat().copy()
    def draws():
        return random.random(), np.random.random(), torch.rand(1).item()

    seed_global_rngs(1)
    expected = draws()
    seed_global_rngs(1)
    es_search.check_score_batch(agent, population=4)
    assert draws() == expected
    assert np.array_equal(agent.get_flat(), before)
    assert agent.task_seed is None and agent.generation_seed is None


class NoBatch(es_search.Agent):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(2))

    def score(self):
        return 0.0


@pytest.mark.parametrize("kwargs, error, match", [
    ({"population": 1}, ValueError, "population must be an integer >= 2"),
    ({"sigma": 0}, ValueError, "sigma must be a positive"),
    ({"rtol": -1}, ValueError, "rtol must be a number >= 0"),
    ({"atol": float("nan")}, ValueError, "atol must be a number >= 0"),
    ({"seed": -1}, ValueError, "seed must be a non-negative integer"),
    ({"score_kwargs": {"k": 1}}, TypeError, r"RowExact.score\(\): got an unexpected keyword"),
])
def test_bad_arguments_fail_before_any_scoring(kwargs, error, match):
    with pytest.raises(error, match=match):
        es_search.check_score_batch(RowExact(bad_seed=task_seed(0, 0, 0)), **kwargs)


def test_agents_without_score_batch_are_refused():
    with pytest.raises(TypeError, match="NoBatch does not define score_batch"):
        es_search.check_score_batch(NoBatch())
    with pytest.raises(TypeError, match="must be an es_search.Agent"):
        es_search.check_score_batch(torch.nn.Linear(2, 2))


def test_a_row_that_raises_is_named_and_unordered_returns_are_refused():
    class RaisesOnSomeRows(es_search.Agent):
        score_batch_size = 8

        def __init__(self):
            super().__init__()
            self.x = torch.nn.Parameter(torch.zeros(2))

        def score_batch(self, params, seeds):
            if (params["x"][:, 0] > 0.0).any():
                raise ValueError("bad row")
            return (-(params["x"] ** 2).sum(-1)).tolist()

    with pytest.raises(es_search.ScoreBatchMismatch,
                       match=r"raised \(ValueError: bad row\) in a group of 8; alone, "
                             r"candidates? \d+ \(task seed \d+\)") as info:
        es_search.check_score_batch(RaisesOnSomeRows())
    assert isinstance(info.value.__cause__, ValueError)

    class ReturnsADict(RaisesOnSomeRows):
        def score_batch(self, params, seeds):
            return {i: 0.0 for i in range(len(seeds))}

    class ReturnsASet(RaisesOnSomeRows):
        def score_batch(self, params, seeds):
            return set(range(len(seeds)))

    for cls, kind in ((ReturnsADict, "dict"), (ReturnsASet, "set")):
        with pytest.raises(NotAScore, match=f"returned a {kind}, which holds no order"):
            es_search.check_score_batch(cls())
    bad = RaisesOnSomeRows()
    bad.score_batch_size = -1
    with pytest.raises(ValueError, match="score_batch_size must be an integer >= 0"):
        es_search.check_score_batch(bad)


class JitterSetsABuffer(es_search.Agent):
    """jitter_weights() also moves a buffer, which score_batch's params cannot carry."""

    score_batch_size = 8

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(2), requires_grad=False)
        self.register_buffer("b", torch.zeros(()))

    def jitter_weights(self, sigma):
        super().jitter_weights(sigma)
        self.b += float(self.w.sum())

    def score_batch(self, params, seeds):
        return (-(params["w"] ** 2).sum(dim=1) + self.b).tolist()


def test_a_jitter_weights_that_changes_more_than_the_evolved_weights_is_named():
    with pytest.raises(es_search.ScoreBatchMismatch) as info:
        es_search.check_score_batch(JitterSetsABuffer(), population=4)
    assert "overrides jitter_weights()" in str(info.value)
    assert "score_batch_size = 0" in str(info.value)
    with pytest.raises(es_search.ScoreBatchMismatch) as info:  # no override: no such note
        es_search.check_score_batch(GroupSensitive(), population=4)
    assert "jitter_weights" not in str(info.value)
