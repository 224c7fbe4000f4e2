"""What a generation sends to the workers: a large array once, never with every chunk,
and never left behind; the run stays what n_jobs=1 gives."""
import glob
import os
import tempfile

import numpy as np
import pytest

import es_search
from es_search import candidates as _candidates
from es_search import evaluation
from es_search.candidates import Candidate, Shared, share_vectors, take_vectors
from es_search.dispatch import ChunkPolicy
from es_search.front import Evaluator

import agents
from compare import same_history, same_weights


def test_share_vectors_puts_each_large_float64_array_once_and_take_vectors_restores():
    scale, point = np.linspace(0, 1, 9000), np.arange(9000.0).reshape(90, 100)
    small, whole = np.ones(3), np.ones(9000, dtype=np.int64)
    given = [Candidate("noise", 0.1, 1.0, 0, vector=scale),
             Candidate("noise", 0.1, -1.0, 0, vector=scale), Candidate("jitter", 0.2),
             Candidate("vector", vector=point), Candidate("vector", vector=small),
             Candidate("vector", vector=whole)]
    shared, flat = share_vectors(given)
    assert flat.shape == (18000,)  # scale once, then point
    assert shared[0].vector == shared[1].vector == Shared(0, 9000, (9000,))
    assert shared[3].vector == Shared(9000, 18000, (90, 100))
    assert shared[2:3] + shared[4:] == given[2:3] + given[4:]  # left as they were
    back = take_vectors(shared, flat)
    assert [c.kind for c in back] == [c.kind for c in given]
    for a, b in zip(back, given):
        assert (a.vector is None) == (b.vector is None)
        if a.vector is not None:
            assert np.array_equal(a.vector, b.vector) and a.vector.dtype == b.vector.dtype
    assert share_vectors(given[2:3] + given[4:]) == (given[2:3] + given[4:], None)
    half = np.linspace(-1, 1, 40000, dtype=np.float32)  # shared as float64, same values
    shared, flat = share_vectors([Candidate("vector", vector=half)])
    assert flat.dtype == np.float64 and np.array_equal(flat, half)


def test_float32_vectors_score_as_in_this_process(monkeypatch):
    """A user's strategy may describe candidates by float32 vectors: shared as float64,
    they load the same weights, bit for bit."""
    monkeypatch.setattr(_candidates, "SHARE_FROM", 8)
    rng = np.random.default_rng(0)
    agent = agents.MatrixAgent(dim=5)
    asked = [Candidate("vector", vector=rng.normal(size=5).astype(np.float32)),
             Candidate("noise", 0.0, -1.0, 3, vector=np.full(5, 0.3, dtype=np.float32))]
    center = agent.get_flat()
    with Evaluator(agent, seed=2, n_jobs=1) as here:
        expected = here.score(0, center, asked * 3).scores
    with Evaluator(agent, seed=2, n_jobs=2, sequential_fallback=False) as there:
        assert there.score(0, center, asked * 3).scores == expected


@pytest.mark.parametrize("claimed", [False, True])
@pytest.mark.parametrize("strategy", ["pgpe", "cma-es"])
def test_shared_vectors_give_the_plain_loops_run(monkeypatch, strategy, claimed):
    """PGPE's per-weight scales and CMA-ES's points travel as one shared array per
    generation (every vector counts as large here), in chunks or claimed blocks, beside
    the run's score_kwargs (sent once)."""
    if strategy == "cma-es":
        pytest.importorskip("cma")
    monkeypatch.setattr(_candidates, "SHARE_FROM", 8)
    monkeypatch.setattr(ChunkPolicy, "BALANCE_FROM", 0.0 if claimed else 1e9)
    sizes = []

    def spy(given):
        shared, flat = share_vectors(given)
        sizes.append(0 if flat is None else flat.size)
        return shared, flat

    monkeypatch.setattr(evaluation, "share_vectors", spy)
    kw = dict(generations=4, population=6, sigma=0.3, seed=3, strategy=strategy,
              progress=False, score_kwargs={"offset": np.arange(3.0), "scale": 0.5})
    alone = es_search.run(agents.MatrixAgentWithKwargs(dim=5), n_jobs=1, **kw)
    parallel = es_search.run(agents.MatrixAgentWithKwargs(dim=5), n_jobs=2,
                             sequential_fallback=False, **kw)
    assert max(sizes) > 0  # vectors were shared
    assert same_history(parallel.history, alone.history)
    assert same_weights(parallel.best_weights, alone.best_weights)


def _joblib_files() -> list[str]:
    pattern = f"joblib_memmapping_folder_{os.getpid()}_*/*"
    return [path for root in ("/dev/shm", tempfile.gettempdir())
            for path in glob.glob(os.path.join(root, pattern))]


def test_pgpe_on_a_large_agent_leaves_no_memory_maps_behind():
    """Chunks go straight to loky's executor, outside a joblib.Parallel call: a large
    array among their arguments was memory-mapped into /dev/shm by joblib and kept until
    the executor ended (PGPE's 8 MB scales on 10^6 weights: 8 MB more every
    generation)."""
    class Large(agents.Quadratic):
        def score(self):
            return -float(((self.w[:10] - 3) ** 2).sum())

    before = set(_joblib_files())
    result = es_search.run(Large(dim=200_000), generations=3, population=4, sigma=0.1,
                           strategy="pgpe", n_jobs=2, sequential_fallback=False,
                           progress=False)
    assert len(result.history) == 3
    assert set(_joblib_files()) <= before
    # nor do weights given to evaluate() as NumPy arrays
    weights = [{"w": np.full(200_000, float(i), dtype=np.float32)} for i in range(4)]
    assert es_search.evaluate(Large(dim=200_000), weights, n_jobs=2) == \
        [-90.0, -40.0, -10.0, 0.0]
    assert set(_joblib_files()) <= before


def test_shared_vectors_and_score_kwargs_on_dask(cluster, monkeypatch):
    """On a cluster the shared array and the score_kwargs travel as parcels, each sent
    to a worker once."""
    _, client = cluster
    monkeypatch.setattr(_candidates, "SHARE_FROM", 8)
    kw = dict(generations=3, population=6, sigma=0.3, seed=3, strategy="pgpe",
              progress=False, score_kwargs={"offset": np.arange(3.0), "scale": 0.5})
    alone = es_search.run(agents.MatrixAgentWithKwargs(dim=5), n_jobs=1, **kw)
    on_dask = es_search.run(agents.MatrixAgentWithKwargs(dim=5), n_jobs=2, backend=client,
                            sequential_fallback=False, **kw)
    assert same_history(on_dask.history, alone.history)
