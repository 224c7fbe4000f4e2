"""The engine with Agent.score_batch: groups at fixed indices, any worker count."""
from __future__ import annotations

import copy
import math

import joblib
import numpy as np
import pytest
import torch

import es_search
from es_search import dispatch
from es_search.candidates import Candidate
from es_search.dispatch import ChunkPolicy, chunk_bounds
from es_search.seeding import task_seed
from es_search.worker import group_bounds

from agents import GroupSensitive, ReportsGroupSize, RowExact


def comparable(result):
    history = [{k: v for k, v in h.items() if k != "seconds"} for h in result.history]
    return history, {k: v.tolist() for k, v in result.best_weights.items()}


def test_groups_and_chunks_are_cut_at_fixed_indices():
    assert group_bounds(10, 4) == [(0, 4), (4, 8), (8, 10)]
    assert group_bounds(9, 4) == [(0, 4), (4, 9)]  # a remainder of 1 <= 4 // 4 joins
    assert group_bounds(65, 32) == [(0, 32), (32, 65)]  # 64 and a re-evaluated parent
    assert group_bounds(73, 32) == [(0, 32), (32, 64), (64, 73)]  # 9 > 32 // 4
    assert group_bounds(5, 32) == [(0, 5)] and group_bounds(0, 32) == []
    assert group_bounds(7, 2) == [(0, 2), (2, 4), (4, 6), (6, 7)]  # 2 // 4 = 0: none
    assert chunk_bounds(10, 2, 4) == [(0, 4), (4, 10)]
    assert chunk_bounds(10, 8, 4) == [(0, 4), (4, 8), (8, 10)]
    assert chunk_bounds(64, 2, 32) == [(0, 32), (32, 64)]
    assert chunk_bounds(65, 2, 32) == [(0, 32), (32, 65)]
    assert chunk_bounds(5, 2, 0) == [(0, 2), (2, 5)]  # no batching: as before
    for n in range(1, 80):
        groups = group_bounds(n, 8)
        assert groups[0][0] == 0 and groups[-1][1] == n
        assert all(b == c for (_, b), (c, _) in zip(groups, groups[1:]))
        assert all(a % 8 == 0 and 0 < b - a <= 10 for a, b in groups)
        for parts in (1, 2, 3, 7):
            chunks = chunk_bounds(n, parts, 8)
            assert chunks[0][0] == 0 and chunks[-1][1] == n
            assert all(b == c for (_, b), (c, _) in zip(chunks, chunks[1:]))
            # every chunk is a union of whole groups, near-equal in groups
            assert {a for a, _ in chunks} <= {a for a, _ in groups}
            counts = [sum(a <= g < b for g, _ in groups) for a, b in chunks]
            assert max(counts) - min(counts) <= 1


@pytest.mark.parametrize("strategy", ["hill-climb", "openai-es"])
def test_row_exact_batches_give_the_per_candidate_run(strategy):
    kwargs = dict(generations=3, population=10, sigma=0.3, seed=5, n_jobs=1,
                  progress=False, strategy=strategy)
    batched = es_search.run(RowExact(), **kwargs)
    alone = RowExact()
    alone.score_batch_size = 0  # batching off: one score() per candidate
    assert comparable(es_search.run(alone, **kwargs)) == comparable(batched)


@pytest.fixture(scope="module")
def group_sensitive_reference():
    return comparable(es_search.run(GroupSensitive(), generations=3, population=8,
                                    sigma=0.3, seed=2, n_jobs=1, progress=False))


@pytest.mark.parametrize("n_jobs", [2, -1])
def test_batched_runs_are_identical_for_any_worker_count(n_jobs, group_sensitive_reference):
    result = es_search.run(GroupSensitive(), generations=3, population=8, sigma=0.3,
                           seed=2, n_jobs=n_jobs, progress=False, sequential_fallback=False)
    assert comparable(result) == group_sensitive_reference


@pytest.mark.slow
def test_batched_runs_on_dask_give_the_same_run(group_sensitive_reference):
    distributed = pytest.importorskip("distributed")
    cluster = distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                       dashboard_address=":0")
    try:
        with distributed.Client(cluster):
            result = es_search.run(GroupSensitive(), generations=3, population=8,
                                   sigma=0.3, seed=2, n_jobs=-1, backend="dask",
                                   progress=False, sequential_fallback=False)
    finally:
        cluster.close()
    assert comparable(result) == group_sensitive_reference


@pytest.mark.parametrize("n_jobs,claimed", [(1, False), (2, False), (2, True)])
def test_a_small_remainder_joins_the_last_group_on_any_worker_count(n_jobs, claimed,
                                                                     monkeypatch):
    # 17 candidates (16 and a re-evaluated parent) in groups of 8: [0, 8) and [8, 17),
    # scored alike in one process, in chunks, or claimed by the workers (long tasks)
    rounds = []
    if claimed:  # every task counts as long: claimed from generation 1 on
        monkeypatch.setattr(ChunkPolicy, "BALANCE_FROM", 0.0)
        reset = dispatch.reset_claims
        monkeypatch.setattr(dispatch, "reset_claims",
                            lambda path: rounds.append(1) or reset(path))
    candidates = [Candidate("jitter", 0.3)] * 16 + [Candidate("center")]
    with es_search.Evaluator(ReportsGroupSize(), seed=3, n_jobs=n_jobs,
                             sequential_fallback=False) as ev:
        center = ev.local.get_flat()
        runs = []
        for generation in range(3):
            scored = ev.score(generation, center, candidates)
            runs.append((scored.scores, scored.reports))
    assert len(rounds) >= (2 if claimed else 0)  # generations 1-2
    sizes = [8] + [None] * 7 + [9] + [None] * 8
    assert all(reports == sizes for _, reports in runs)
    with es_search.Evaluator(ReportsGroupSize(), seed=3, n_jobs=1) as ev:
        assert [s for s, _ in runs] == [ev.score(g, center, candidates).scores for g in range(3)]


def test_a_failing_row_is_found_and_replayed(tmp_path):
    bad = task_seed(4, 1, 5)  # generation 1, candidate 5: in group [4, 8)
    kwargs = dict(generations=3, population=10, sigma=0.3, seed=4, progress=False)
    with pytest.raises(es_search.ScoreError) as info:
        es_search.run(RowExact(bad_seed=bad), n_jobs=2, out=tmp_path / "a",
                      sequential_fallback=False, **kwargs)
    assert (info.value.generation, info.value.index) == (1, 5)
    with pytest.raises(ValueError, match="bad candidate"):
        es_search.replay_task(RowExact(bad_seed=bad), out=tmp_path / "a", generation=1,
                              index=5)
    with pytest.warns(RuntimeWarning, match="raised on 1 candidate"):
        worst = es_search.run(RowExact(bad_seed=bad), n_jobs=1, on_error="worst", **kwargs)
    clean = es_search.run(RowExact(), n_jobs=1, **kwargs)
    scores, reference = worst.history[1]["scores"], clean.history[1]["scores"]
    assert scores[5] == -math.inf and worst.history[1]["failures"] == 1
    assert [s for i, s in enumerate(scores) if i != 5] == \
        [s for i, s in enumerate(reference) if i != 5]


def test_a_batch_that_fails_as_a_whole_is_reported_for_its_group():
    # reevaluate=False: the starting agent is scored alone (a group of one scores fine),
    # so generation 0 holds the first group of several candidates
    kwargs = dict(generations=2, population=6, sigma=0.3, seed=1, n_jobs=1, progress=False,
                  strategy_options={"reevaluate": False})
    for n_jobs in (1, 2):  # the same message from a worker
        with pytest.raises(es_search.ScoreError) as info:
            es_search.run(RowExact(batch_only_fault=True), **{**kwargs, "n_jobs": n_jobs})
        assert (info.value.generation, info.value.index, info.value.group_end) == (0, 0, 4)
        assert isinstance(info.value.__cause__, MemoryError)
        message = str(info.value)
        assert message.startswith(
            "RowExact.score_batch() failed on candidates 0-3 of generation 0 (the first's "
            "task seed ") and "though each of them scores alone through score()" in message
        assert "es_search.check_score_batch(agent)" in message and "MemoryError" in message
        assert "replay_task" not in message  # replaying one candidate reproduces nothing
    with pytest.warns(RuntimeWarning, match="raised on 6 candidate"):
        worst = es_search.run(RowExact(batch_only_fault=True), on_error="worst", **kwargs)
    assert worst.history[0]["scores"] == [-math.inf] * 6


def test_a_non_finite_row_counts_per_candidate():
    nan = task_seed(3, 0, 2)
    with pytest.warns(RuntimeWarning, match="non-finite"):
        result = es_search.run(RowExact(nan_seed=nan), generations=2, population=6,
                               sigma=0.3, seed=3, n_jobs=1, progress=False)
    assert math.isnan(result.history[0]["scores"][2])
    assert result.history[0]["nonfinite"] == 1 and result.history[1]["nonfinite"] == 0


def test_batched_runs_resume_from_their_checkpoint(tmp_path):
    kwargs = dict(population=8, sigma=0.3, seed=9, n_jobs=1, progress=False,
                  strategy="openai-es")
    full = es_search.run(GroupSensitive(), generations=5, **kwargs)
    es_search.run(GroupSensitive(), generations=3, out=tmp_path, **kwargs)
    resumed = es_search.run(GroupSensitive(), generations=5, out=tmp_path, resume=True,
                            **kwargs)
    assert comparable(resumed) == comparable(full)
    other = GroupSensitive()
    other.score_batch_size = GroupSensitive.score_batch_size + 1  # other groups
    with pytest.raises(es_search.CheckpointError, match="score_batch_size: "):
        es_search.run(other, generations=6, out=tmp_path, resume=True, **kwargs)


def test_batched_cartpole_is_the_per_candidate_run_on_any_worker_count():
    pytest.importorskip("gymnasium")
    from es_search.problems.batched_control import CartPole
    kwargs = dict(generations=2, population=8, sigma=0.5, seed=0, progress=False)
    reference = comparable(es_search.run(CartPole(max_steps=60, score_batch_size=4),
                                         n_jobs=1, **kwargs))
    alone = CartPole(max_steps=60, score_batch_size=0)
    assert comparable(es_search.run(alone, n_jobs=1, **kwargs)) == reference
    with joblib.parallel_config(backend="loky"):
        assert comparable(es_search.run(CartPole(max_steps=60, score_batch_size=4),
                                        n_jobs=2, sequential_fallback=False,
                                        **kwargs)) == reference


@pytest.mark.parametrize("strategy", ["hill-climb", "openai-es"])
def test_batched_pendulum_is_the_per_candidate_run(strategy):
    # groups of 32 and 8, built by build_group (jitter or noise), against score() alone
    pytest.importorskip("gymnasium")
    from es_search.problems.batched_control import Pendulum
    kwargs = dict(generations=2, population=40, sigma=0.2, seed=1, progress=False,
                  n_jobs=1, strategy=strategy)
    runs = []
    for group in (32, 0):
        torch.manual_seed(0)  # the same hidden layer
        runs.append(comparable(es_search.run(Pendulum(max_steps=40, score_batch_size=group),
                                             **kwargs)))
    assert runs[0] == runs[1]


def test_shared_statistics_from_groups_are_the_same_for_any_worker_count():
    from agents import BatchedRunningStats
    kwargs = dict(generations=3, population=10, sigma=0.3, seed=5, progress=False,
                  strategy="openai-es")
    reference = es_search.run(BatchedRunningStats(), n_jobs=1, **kwargs)
    for n_jobs in (2, -1):
        result = es_search.run(BatchedRunningStats(), n_jobs=n_jobs,
                               sequential_fallback=False, **kwargs)
        assert comparable(result) == comparable(reference)
    steps = [r["steps"] for r in reference.history]
    assert all(b - a >= 3 * 10 for a, b in zip(steps, steps[1:]))  # every row counted
    assert float(reference.best_weights["count"]) > 0


def test_a_bad_group_size_fails_before_the_run():
    agent = RowExact()
    agent.score_batch_size = 2.5
    with pytest.raises(TypeError, match="score_batch_size must be an integer >= 0"):
        es_search.run(agent, generations=1, population=4, n_jobs=1, progress=False)


class Mixed(es_search.Agent):
    """Evolved parameters of several shapes and dtypes (sizes with and without a
    vector tail), and a non-evolved buffer."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Parameter(torch.randn(5, 3), requires_grad=False)
        self.b = torch.nn.Parameter(torch.randn(17, dtype=torch.float64),
                                    requires_grad=False)
        self.c = torch.nn.Parameter(torch.randn(1), requires_grad=False)
        self.d = torch.nn.Parameter(torch.randn(2, 2).half(), requires_grad=False)
        self.register_buffer("steps", torch.zeros(()))

    def score_batch(self, params, seeds):
        return [0.0] * len(seeds)


@pytest.mark.parametrize("agent", [Mixed(), RowExact(dim=37)],
                         ids=["mixed-dtypes", "row-exact"])
@pytest.mark.parametrize("jitter", [(0.5, 1e-3, 2.0), (0.3,) * 3])
def test_a_group_is_built_bit_for_bit_as_each_candidate_alone(agent, jitter):
    from es_search.candidates import Candidate, build_group
    from es_search.seeding import single_torch_thread
    from es_search.worker import Payload, run_task
    agent.set_flat(agent.get_flat() + np.linspace(-1, 1, agent.num_evolved()))
    center = agent.get_flat()  # exact in every dtype, so the check below can be exact
    scale = np.linspace(0.1, 2, center.size)
    candidates = [Candidate("jitter", jitter[0]), Candidate("noise", 0.3, 1.0, 4),
                  Candidate("noise", 0.3, -1.0, 4), Candidate("center"),
                  Candidate("jitter", jitter[1]), Candidate("vector", vector=center * 3),
                  Candidate("noise", 0.0, -1.0, 9, vector=scale),
                  # 4 keys or more: streams seeded at once; key 4 again, not next to its pair
                  Candidate("noise", 0.3, 1.0, 1), Candidate("noise", 0.3, 1.0, 2),
                  Candidate("noise", 0.5, -1.0, 4), Candidate("noise", 0.3, 1.0, 7),
                  Candidate("jitter", jitter[2])] + [Candidate("jitter", jitter[2])] * 30
    seed, generation, start = 3, 5, 8
    seeds = [task_seed(seed, generation, start + k) for k in range(len(candidates))]
    with torch.no_grad(), single_torch_thread():  # as in the engine
        stacked = build_group(agent, center, candidates, seeds, seed, generation)
    assert np.array_equal(agent.get_flat(), center)  # the agent holds the centre
    for k, candidate in enumerate(candidates):
        run_task(agent, Payload(center, {}), candidate, seed, generation, start + k,
                 score=False)
        for name, p in agent.evolved_parameters():
            assert stacked[name].dtype == p.dtype
            assert torch.equal(stacked[name][k], p), (k, candidate.kind, name)
    # built only in the agent: a weights candidate, or a jitter of the agent's own
    assert build_group(agent, center, [Candidate("weights", vector={})], seeds[:1],
                       seed, generation) is None
    own = copy.deepcopy(agent)
    own.jitter_weights = lambda sigma: None
    assert build_group(own, center, candidates[:2], seeds[:2], seed, generation) is None
    assert build_group(own, center, candidates[1:3], seeds[:2], seed,
                       generation) is not None

    class OwnJitter(type(agent)):
        def jitter_weights(self, sigma):
            pass
    assert build_group(OwnJitter(), center, candidates[:1], seeds[:1], seed,
                       generation) is None
    if isinstance(agent, Mixed):  # a jitter draws in a parameter's own memory order
        transposed = copy.deepcopy(agent)
        transposed.a.data = transposed.a.data.T.contiguous().T
        assert build_group(transposed, center, candidates[:1], seeds[:1], seed,
                           generation) is None
        assert build_group(transposed, center, candidates[1:2], seeds[:1], seed,
                           generation) is not None


def test_task_and_stream_seeds_are_seed_sequences():
    """``seed_sequences.spawned`` hashes the shared words once: each seed is still
    ``SeedSequence(seed, spawn_key=key)``'s."""
    from es_search.seeding import stream_seed, stream_seeds, task_seeds

    def reference(seed, *key):
        return int(np.random.SeedSequence(seed, spawn_key=key).generate_state(1, np.uint64)[0])
    for seed in (0, 7, 2 ** 32 - 1, 2 ** 32, 2 ** 64 - 1, 2 ** 64, 2 ** 130):
        for generation in (-1, 0, 3, 2 ** 32 - 1, 2 ** 33):
            for start, stop in ((0, 40), (5, 6), (2 ** 32 - 2, 2 ** 32 + 1)):
                expected = [reference(seed, generation + 1, i) for i in range(start, stop)]
                assert task_seeds(seed, generation, start, stop) == expected
                assert [task_seed(seed, generation, i) for i in range(start, stop)] == expected
        for key in ((), (3,), (1, 2 ** 40)):
            last = [0, 5, 2 ** 32 - 1, 2 ** 32]
            assert stream_seeds(seed, key, last) == [reference(seed, 0, *key, k) for k in last]
            assert stream_seed(seed, *key, 9) == reference(seed, 0, *key, 9)
    assert task_seeds(0, 0, 4, 4) == []


def test_seed_sequence_words_are_seed_sequences_whichever_words_vary():
    """Shared words (Python ints) and varying ones (uint32 arrays) in any position,
    fewer or more than the pool's 4: every sequence's words are SeedSequence's."""
    from es_search.seed_sequences import seed_sequence_words
    rng = np.random.default_rng(0)
    for length in range(1, 9):
        for trial in range(12):
            words = rng.integers(0, 2 ** 32, size=(length, 3), dtype=np.uint64)
            varying = rng.random(length) < (0.0 if trial == 0 else 0.4)
            entropy = [words[i].astype(np.uint32) if varying[i] else int(words[i, 0])
                       for i in range(length)]
            got = seed_sequence_words(entropy, 6)
            for j in range(3):
                column = [int(words[i, j] if varying[i] else words[i, 0])
                          for i in range(length)]
                expected = np.random.SeedSequence(
                    np.array(column, dtype=np.uint32)).generate_state(6).tolist()
                assert [int(np.asarray(w).reshape(-1)[j if np.ndim(w) else 0])
                        for w in got] == expected


def test_noise_streams_draw_each_keys_noise():
    from es_search.candidates import noise, noise_streams, noise_vectors
    for seed, generation in ((0, 0), (3, 7), (2 ** 40, 2 ** 33), (2 ** 70, 1)):
        for keys in ([5], [0, 1, 1, 2], list(range(12)), [2 ** 32 - 1, 2 ** 33, 3, 4, 4]):
            streams = noise_streams(seed, generation, keys)
            assert list(streams) == list(dict.fromkeys(keys))
            for key, stream in streams.items():
                assert np.array_equal(stream.standard_normal(6),
                                      noise(seed, generation, key, 6))
            vectors = list(noise_vectors(seed, generation, keys, 6))
            assert [k for k, _ in vectors] == list(dict.fromkeys(keys))
            assert all(np.array_equal(v, noise(seed, generation, k, 6)) for k, v in vectors)


@pytest.mark.parametrize("n_jobs", [1, 2])
def test_a_weights_dicts_shared_state_is_what_its_batched_score_sees(n_jobs):
    """A kept centre is scored with the statistics of its time, not the agent's latest:
    a dict that carries shared state scores as an agent holding that state does."""
    from agents import BatchedRunningStats
    w = torch.tensor([0.5, -1.0, 2.0])
    own = {"count": torch.tensor(50.0, dtype=torch.float64),
           "mean": torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64),
           "m2": torch.tensor([200.0, 50.0, 10.0], dtype=torch.float64)}
    holder = BatchedRunningStats()
    holder.load_state_dict({"w": torch.zeros(3), **own})
    kw = dict(n_jobs=n_jobs, seed=3, repeat_check=False)
    expected = es_search.evaluate(holder, [{"w": w}] * 3, **kw)
    carried = es_search.evaluate(BatchedRunningStats(), [{"w": w, **own}] * 3, **kw)
    plain = es_search.evaluate(BatchedRunningStats(), [{"w": w}] * 3, **kw)
    assert carried == expected != plain
