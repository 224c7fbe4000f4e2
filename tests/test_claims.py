"""Work claiming on loky (es_search.dispatch): the workers take blocks of long tasks as they
come free. Who claims what must never show in a result: the run equals n_jobs=1, errors
name the lowest failing candidate, a dead worker's blocks are scored again."""
import pytest

import es_search
from es_search import dispatch
from es_search.candidates import Candidate
from es_search.dispatch import ChunkPolicy
from es_search.evaluation import Engine
from es_search.seeding import task_seed

import agents
from compare import same_history, same_weights


pytestmark = pytest.mark.skipif(not dispatch.AVAILABLE, reason="needs fcntl")
SEED = 11


@pytest.fixture
def rounds(monkeypatch):
    """Every task counts as long (claimed from the second generation on, once a task
    time is known); returns the list of claimed rounds (one entry per counter reset)."""
    monkeypatch.setattr(ChunkPolicy, "BALANCE_FROM", 0.0)
    seen = []
    reset = dispatch.reset_claims

    def counted(path):
        seen.append(path)
        reset(path)

    monkeypatch.setattr(dispatch, "reset_claims", counted)
    return seen


def _both(agent_factory, **kw):
    kw = dict(generations=4, seed=SEED, progress=False, **kw)
    alone = es_search.run(agent_factory(), n_jobs=1, **kw)
    claimed = es_search.run(agent_factory(), n_jobs=2, sequential_fallback=False, **kw)
    return alone, claimed


@pytest.mark.parametrize("pairs_from", [100_000, 0])
@pytest.mark.parametrize("strategy,population", [("hill-climb", 9), ("openai-es", 8),
                                                 ("pgpe", 10)])
def test_claimed_runs_equal_the_in_process_run(rounds, monkeypatch, strategy, population,
                                               pairs_from):
    monkeypatch.setattr(ChunkPolicy, "CLAIM_PAIRS_FROM", pairs_from)
    alone, claimed = _both(lambda: agents.MatrixAgent(dim=5), strategy=strategy,
                           population=population, sigma=0.3)
    assert len(rounds) >= 3  # generations 1-3
    assert same_history(claimed.history, alone.history)
    assert same_weights(claimed.best_weights, alone.best_weights)


@pytest.mark.parametrize("factory", [agents.RowExact, agents.GroupSensitive,
                                     agents.BatchedRunningStats])
def test_batched_groups_are_claimed_whole(rounds, factory):
    alone, claimed = _both(factory, population=10, sigma=0.3)
    assert len(rounds) >= 3
    assert same_history(claimed.history, alone.history)


@pytest.mark.parametrize("pairs_from,blocks", [(100_000, 9), (0, 5)])
def test_every_block_is_claimed_once_and_each_worker_stops_at_the_end(
        rounds, monkeypatch, pairs_from, blocks):
    # a small agent claims one task at a time; a large one (here: from 0 values) two,
    # so that an antithetic pair's noise is drawn once
    monkeypatch.setattr(ChunkPolicy, "CLAIM_PAIRS_FROM", pairs_from)
    candidates = [Candidate("jitter", 0.3)] * 9
    with Engine(agents.MatrixAgent(), seed=SEED, n_jobs=2,
                sequential_fallback=False) as ev:
        center = ev.local.get_flat()
        first = ev.score(0, center, candidates).scores  # chunks: no task time known yet
        second = ev.score(1, center, candidates).scores  # claimed
        with open(rounds[-1], "rb") as f:  # the counter file
            taken = int.from_bytes(f.read(8), "little")
    with Engine(agents.MatrixAgent(), seed=SEED, n_jobs=1) as ev:
        assert [first, second] == [ev.score(g, center, candidates).scores
                                   for g in range(2)]
    assert taken == blocks + 2  # and one empty claim per worker at the end


def test_the_lowest_failing_candidate_is_the_error(rounds):
    bad = {task_seed(SEED, 1, 3), task_seed(SEED, 1, 6)}
    messages = []
    for n_jobs in (1, 2):
        with pytest.raises(es_search.ScoreError) as info:
            es_search.run(agents.Raises(bad), generations=3, population=8,
                          sigma=0.3, seed=SEED, n_jobs=n_jobs, sequential_fallback=False,
                          progress=False)
        messages.append((info.value.generation, info.value.index))
    assert messages == [(1, 3), (1, 3)]


@pytest.mark.parametrize("generation", [0, 1])  # chunks (no task time yet), claimed
def test_the_lowest_failing_candidate_is_the_error_whatever_the_others_raise(rounds,
                                                                             generation):
    # candidate 1 raises; candidate 5, in the other worker's chunk (or claimed after the
    # other worker stopped), returns no number: the lowest is the error on every path
    agent = agents.Raises({task_seed(SEED, generation, 1)},
                          text_seeds={task_seed(SEED, generation, 5)})
    candidates = [Candidate("jitter", 0.3)] * 8
    errors = []
    for n_jobs in (1, 2):
        with Engine(agent, seed=SEED, n_jobs=n_jobs, sequential_fallback=False) as ev:
            center = ev.local.get_flat()
            for g in range(generation):
                ev.score(g, center, candidates)
            with pytest.raises(es_search.ScoreError) as info:
                ev.score(generation, center, candidates)
        errors.append((info.value.generation, info.value.index))
    assert errors == [(generation, 1), (generation, 1)]


def test_failures_scored_worst_are_the_same_when_claimed(rounds):
    bad = {task_seed(SEED, g, i) for g in (1, 2) for i in (0, 5)}
    with pytest.warns(RuntimeWarning, match="raised on 2 candidate.*of generation 1"):
        alone, claimed = _both(lambda: agents.Raises(bad), population=8,
                               sigma=0.3, on_error="worst")
    assert same_history(claimed.history, alone.history)
    assert claimed.history[1]["failures"] == 2


def test_a_worker_that_dies_while_claiming_changes_nothing(rounds, tmp_path):
    clean = es_search.run(agents.Vec(), generations=3, n_jobs=1, population=8,
                          sigma=0.3, seed=SEED, progress=False)
    agent = agents.DiesOnce(task_seed(SEED, 2, 5), str(tmp_path / "died"))
    with pytest.warns(RuntimeWarning, match="worker process died.*candidates .*5"):
        result = es_search.run(agent, generations=3, n_jobs=2, population=8, sigma=0.3,
                               seed=SEED, sequential_fallback=False, progress=False)
    assert (tmp_path / "died").exists() and len(rounds) >= 3
    assert same_history(result.history, clean.history)
    assert same_weights(result.best_weights, clean.best_weights)
