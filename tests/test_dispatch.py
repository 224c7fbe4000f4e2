"""The in-process/parallel choice (es_search.dispatch.DispatchPolicy): what it chooses
from given measurements, and that the choice never changes a result."""
import time
from types import SimpleNamespace

import pytest
import torch

import es_search
from es_search.candidates import Candidate
from es_search.dispatch import PARALLEL, SEQUENTIAL, ChunkPolicy, DispatchPolicy
from es_search.front import Evaluator
from es_search.problems.sphere import Sphere

MS = 1e-3


class Sleeper(es_search.Agent):
    """A score that takes ``seconds`` of wall time and no CPU."""

    def __init__(self, seconds=5 * MS):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(3))
        self.seconds = seconds

    def score(self):
        time.sleep(self.seconds)
        return -float((self.w ** 2).sum())


def started(n_workers=2, task=5 * MS, probes=(1 * MS, 1.2 * MS, 0.9 * MS), fallback=True):
    """A policy after the engine's start: empty probe rounds, then the starting agent
    scored in this process (one task)."""
    policy = DispatchPolicy(n_workers, fallback)
    for seconds in probes:
        policy.overhead(seconds)
    policy.completed(SEQUENTIAL, 1, task)
    return policy


def test_5ms_scores_use_the_workers_after_a_cold_first_generation():
    """Population 8, 2 workers, ~5 ms tasks: the first parallel generation is cold (8 ms
    extra, slower workers) and later ones are noisy; every generation stays parallel."""
    policy = started()
    assert policy.choose(8) == PARALLEL
    # cold: 8 ms of start-up on top, tasks 30% slower: 4 * 6.5 + 8 + 1 = 35 ms
    policy.completed(PARALLEL, 8, wall=35 * MS, busy=52 * MS, busiest=26 * MS)
    assert policy.choose(8) == PARALLEL
    for wall, busy, busiest in [(22, 40, 20.5), (22.5, 41, 21), (21.5, 40, 20.2),
                                (45, 44, 23), (22, 40, 20.6)]:  # one noisy round
        policy.completed(PARALLEL, 8, wall * MS, busy * MS, busiest * MS)
        assert policy.choose(8) == PARALLEL
    assert policy.counts == {PARALLEL: 6, SEQUENTIAL: 0}


def test_trivial_scores_stay_in_this_process_and_are_not_reprobed():
    policy = started(task=10e-6)  # 10 us per task, 1 ms per round trip
    for _ in range(3 * policy.REPROBE_EVERY):
        assert policy.choose(16) == SEQUENTIAL
        policy.completed(SEQUENTIAL, 16, 16 * 10e-6)
    assert policy.counts[PARALLEL] == 0


def test_a_lost_parallel_path_is_retried_now_and_then_when_not_hopeless():
    policy = started(task=1 * MS, probes=(4.5 * MS,))  # 8 ms in-process, 8.5 ms parallel
    choices = []
    for _ in range(3 * policy.REPROBE_EVERY + 6):
        choice = policy.choose(8)
        choices.append(choice)
        if choice == SEQUENTIAL:
            policy.completed(SEQUENTIAL, 8, 8 * MS)
        else:
            policy.completed(PARALLEL, 8, 9 * MS, busy=8 * MS, busiest=4 * MS)
    # the winner timed twice (the start's single task is only a hint), then the loser
    # twice; a re-probe after 20 in-process generations; the next one waits twice as long
    assert [i for i, c in enumerate(choices) if c == PARALLEL] == [2, 3, 24, 65]


def test_trivial_scores_timed_only_in_the_workers_are_tried_here_once():
    """Figures measured on this machine (benchmarks/dispatch_choice.py --seconds 0): the
    starting agent (2 tasks) went parallel, 60 us per task in a worker (payload loading
    included), 0.44 ms per round trip; in this process a task takes 36 us."""
    policy = DispatchPolicy(2)
    for seconds in (0.5 * MS, 0.44 * MS, 0.6 * MS):
        policy.overhead(seconds)
    assert policy.choose(2) == PARALLEL  # nothing timed yet
    policy.completed(PARALLEL, 2, wall=0.6 * MS, busy=0.12 * MS, busiest=0.06 * MS)
    assert policy.choose(16) == SEQUENTIAL  # predicted close: timed once here
    policy.completed(SEQUENTIAL, 16, 16 * 0.036 * MS)
    for _ in range(3 * policy.REPROBE_EVERY):  # the workers: 1.6x slower, not re-probed
        assert policy.choose(16) == SEQUENTIAL
        policy.completed(SEQUENTIAL, 16, 16 * 0.036 * MS)


def test_a_cold_or_unlucky_in_process_measurement_is_retried():
    """Trivial scores; the first in-process generation is slow (cold, or another
    program ran): a few generations in parallel, then this process for good."""
    policy = DispatchPolicy(2)
    policy.overhead(0.44 * MS)
    policy.completed(PARALLEL, 2, wall=0.6 * MS, busy=0.12 * MS, busiest=0.06 * MS)
    seconds_here = iter([0.08 * MS] + [0.036 * MS] * 100)
    choices = []
    for _ in range(3 * policy.REPROBE_EVERY):
        choices.append(policy.choose(16))
        if choices[-1] == SEQUENTIAL:
            policy.completed(SEQUENTIAL, 16, 16 * next(seconds_here))
        else:
            policy.completed(PARALLEL, 16, 1.0 * MS, busy=0.96 * MS, busiest=0.48 * MS)
    assert choices.count(PARALLEL) <= 3
    assert choices[5:] == [SEQUENTIAL] * (len(choices) - 5)


def test_a_reprobe_replaces_round_trips_measured_long_ago():
    """Seen with 1 ms scores, population 8, 2 workers: the first parallel rounds were
    slow (5 ms each, the machine busy at start-up), so the run went in-process (8 ms a
    generation); the re-probe after 20 generations measures 0.6 ms, and the workers
    (4.6 ms a generation) take over from there, not after two more re-probes."""
    policy = started(task=1 * MS, probes=(5 * MS,) * 3)
    choices = []
    for _ in range(2 * policy.REPROBE_EVERY):
        choices.append(policy.choose(8))
        if choices[-1] == SEQUENTIAL:
            policy.completed(SEQUENTIAL, 8, 8 * MS)
        elif len(choices) < 5:  # still slow at the start
            policy.completed(PARALLEL, 8, 9 * MS, busy=8 * MS, busiest=4 * MS)
        else:
            policy.completed(PARALLEL, 8, 4.6 * MS, busy=8 * MS, busiest=4 * MS)
    first = choices.index(PARALLEL, 5)  # the re-probe
    assert first <= policy.REPROBE_EVERY + 5
    assert choices[first:] == [PARALLEL] * (len(choices) - first)


def test_one_cold_measurement_does_not_flip_a_persistent_change():
    """The overhead is the median of the recent ones: once the window is full of slow
    rounds (the machine got busy), the in-process path wins."""
    policy = started(task=2 * MS)
    assert policy.choose(8) == PARALLEL
    for _ in range(policy._overhead.maxlen):
        policy.completed(PARALLEL, 8, wall=30 * MS, busy=16 * MS, busiest=8 * MS)
    assert policy.overhead_seconds == pytest.approx(22 * MS)
    assert policy.choose(8) == SEQUENTIAL


def test_no_fallback_means_always_parallel():
    policy = started(task=1e-6, fallback=False)
    assert policy.choose(16) == PARALLEL
    assert policy.choose(1) == PARALLEL  # a run's starting agent too: none in this process


def test_a_sleeping_agent_is_scored_by_the_workers_every_generation():
    """Sleeps cost no CPU, so the parallel path's advantage (2x with 2 workers) holds on
    a loaded machine: every generation goes to the workers."""
    with Evaluator(Sleeper(20 * MS), seed=0, n_jobs=2) as ev:
        if ev.n_workers < 2:
            pytest.skip("needs 2 worker processes")
        center = ev.local.get_flat()
        ev.score(-1, center, [Candidate("center")])
        for generation in range(4):
            ev.score(generation, center, [Candidate("jitter", 0.1)] * 8)
        assert ev.stats["parallel_generations"] == 4
        assert ev.stats["sequential_generations"] == 0


def test_the_path_does_not_change_the_scores():
    candidates = [Candidate("jitter", 0.1)] * 5 + [Candidate("center")] + \
        [Candidate("noise", 0.2, s, k) for k in range(3) for s in (1.0, -1.0)]
    with Evaluator(Sphere(dim=50), seed=3, n_jobs=2) as ev:
        center = ev.local.get_flat()
        ev.policy.choose = lambda n: SEQUENTIAL
        here = ev.score(2, center, candidates).scores
        ev.policy.choose = lambda n: PARALLEL
        there = ev.score(2, center, candidates).scores
        assert ev.stats["last_path"] == (PARALLEL if ev.pool is not None else SEQUENTIAL)
    assert here == there


def measured(task, workers=2):
    """What a DispatchPolicy measured, as the chunk policy reads it."""
    return SimpleNamespace(n_workers=workers, task_seconds=task)


def test_a_generation_goes_as_one_chunk_per_worker_or_one_task_a_chunk_when_timed():
    policy = ChunkPolicy()
    assert policy.bounds(16, measured(None)) == [(0, 8), (8, 16)]  # nothing measured yet
    # long tasks too (claimed, where pools can)
    assert policy.bounds(16, measured(0.05)) == [(0, 8), (8, 16)]
    assert policy.bounds(3, measured(0.05, 4)) == [(0, 1), (1, 2), (2, 3)]  # never more than tasks
    assert len(ChunkPolicy(timed=True).bounds(16, measured(0.05))) == 16  # each timed alone
    # batched: chunks are whole groups of 4
    assert ChunkPolicy(group=4, timed=True).bounds(16, measured(0.05)) == [
        (0, 4), (4, 8), (8, 12), (12, 16)]


def test_claims_take_long_tasks_one_two_or_a_group_at_a_time():
    claiming = ChunkPolicy(evolved=10, claims=True)
    assert claiming.claim_unit(measured(None)) == 0  # nothing measured: chunks
    assert claiming.claim_unit(measured(0.001)) == 0  # short tasks: chunks
    assert claiming.claim_unit(measured(0.05)) == 1
    assert ChunkPolicy(evolved=10**6, claims=True).claim_unit(measured(0.05)) == 2  # pairs
    assert ChunkPolicy(evolved=10**6, group=8, claims=True).claim_unit(measured(0.05)) == 8
    assert ChunkPolicy(evolved=10).claim_unit(measured(0.05)) == 0  # a pool without claims
    # under a task timeout, tasks go in chunks, each timed: never claimed
    assert ChunkPolicy(evolved=10, claims=True, timed=True).claim_unit(measured(0.05)) == 0


def test_a_cheap_start_score_does_not_send_costly_builds_back_to_this_process():
    """The start agent's score is a centre (no build): 0.3 ms, where a generation's
    candidates of a 10^6-parameter agent cost 3 ms each to build. Once one generation has
    been timed, the single task no longer stands for a generation's tasks."""
    policy = started(task=0.3 * MS)
    assert policy.choose(32) == PARALLEL
    policy.completed(PARALLEL, 32, wall=50 * MS, busy=96 * MS, busiest=48 * MS)
    for _ in range(3 * policy.REPROBE_EVERY):
        assert policy.choose(32) == PARALLEL  # 93 ms here against ~50 ms there
        policy.completed(PARALLEL, 32, wall=50 * MS, busy=96 * MS, busiest=48 * MS)
    assert policy.counts == {PARALLEL: 3 * policy.REPROBE_EVERY + 1, SEQUENTIAL: 0}
