"""The one determinism matrix: the same seed gives the same run, bit for bit, for every
strategy, any n_jobs and any process backend (in the style of joblib's
test_simple_parallel).

The agent draws from all three global RNGs in jitter_weights() and score(), keeps
running statistics merged from its tasks' reports and needs the run's score_kwargs (a
tensor among them), so the matrix covers task seeding, candidate building, the shared
state and its merge order, and what every worker is sent once per run. The parallel
path is forced (sequential_fallback=False); n_jobs=1 (a plain loop in this process) is
the reference.
"""
import os
import time

import pytest
import torch

import es_search
from es_search import STRATEGIES

from agents import MatrixAgentWithKwargs

BACKENDS = ["loky", "multiprocessing", "dask"]
N_JOBS = [2, -1]
RUN = dict(generations=3, population=6, sigma=0.2, seed=13, progress=False,
           score_kwargs={"offset": torch.tensor([0.25, 0.5]), "scale": 2.0})


def comparable(result):
    """Everything in a Result that must be reproducible (wall-clock seconds are not)."""
    history = [{k: repr(v) for k, v in r.items() if k != "seconds"}
               for r in result.history]
    weights = {k: v.numpy().tobytes() for k, v in result.best_weights.items()}
    center = {k: v.numpy().tobytes() for k, v in result.center_weights.items()}
    return history, weights, center, result.evaluations, repr(result.best_score)


def search(strategy, n_jobs, backend=None):
    return comparable(es_search.run(MatrixAgentWithKwargs(), strategy=strategy,
                                    n_jobs=n_jobs, backend=backend,
                                    sequential_fallback=False, **RUN))


@pytest.fixture(scope="module")
def reference():
    cache = {}

    def get(strategy):
        if strategy not in cache:
            cache[strategy] = search(strategy, n_jobs=1)
        return cache[strategy]
    return get


@pytest.fixture(scope="module")
def dask_client():
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                  dashboard_address=":0") as cluster, \
            distributed.Client(cluster) as client:
        yield client


#: the fast run's cases, n_jobs=2: every strategy on loky and one on multiprocessing; the
#: rest of the matrix is slow (Dask's n_jobs=1 result: also tests/test_cluster_runs.py)
FAST = {("multiprocessing", "cma-es")}


def matrix():
    """(backend, strategy, n_jobs), backend outermost: every multiprocessing run forks
    before the Dask fixture starts its threads here (a fork beside a live event loop
    thread can inherit a held lock and hang: seen once in CI, at pgpe--1-multiprocessing)."""
    for backend in BACKENDS:
        for strategy in sorted(STRATEGIES):
            for n_jobs in N_JOBS:
                fast = n_jobs == 2 and (backend == "loky" or (backend, strategy) in FAST)
                yield pytest.param(backend, strategy, n_jobs,
                                   id=f"{strategy}-{n_jobs}-{backend}",
                                   marks=() if fast else pytest.mark.slow)


@pytest.mark.parametrize("backend, strategy, n_jobs", list(matrix()))
def test_same_seed_same_run(strategy, n_jobs, backend, reference, request):
    if backend == "dask":
        request.getfixturevalue("dask_client")
    assert search(strategy, n_jobs, backend) == reference(strategy)


def test_the_matrix_can_fail():
    """A different seed gives a different run: equality above is not vacuous."""
    other = comparable(es_search.run(MatrixAgentWithKwargs(), strategy="hill-climb",
                                     n_jobs=1, **{**RUN, "seed": 14}))
    assert other[0] != search("hill-climb", n_jobs=1)[0]


def test_runs_in_several_threads_give_their_sequential_results():
    """The global RNGs belong to the process: two runs scoring in this process (n_jobs=1)
    from two threads take turns a batch at a time instead of reseeding each other's
    tasks (without that, every trial here differed)."""
    import concurrent.futures
    from agents import NoisyEverywhere
    made = [NoisyEverywhere() for _ in range(4)]  # its constructor seeds torch itself

    def one(k):
        return comparable(es_search.run(made[k], generations=20, population=8, seed=k,
                                        n_jobs=1, progress=False))
    alone = [one(k) for k in range(4)]
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        assert list(pool.map(one, range(4))) == alone


@pytest.mark.slow
def test_runs_in_two_threads_with_workers_of_their_own_sizes_give_their_own_results():
    """Two threads run with n_jobs 2 and 3: loky's one executor per process is resized
    between them (loky may warn), and each run equals its plain loop. A run whose
    workers another run removed used to wait 120 s for them in its warm-up; each run
    here takes about a second (60 s: hung)."""
    import concurrent.futures
    import warnings
    from agents import NoisyEverywhere
    made = {(k, n): NoisyEverywhere() for k in range(2) for n in (1, 2, 3)}  # its
    # constructor seeds torch: built here, not in the threads

    def one(k, n_jobs):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # loky: resizing an executor
            return comparable(es_search.run(made[k, n_jobs], generations=6, population=8,
                                            seed=k, n_jobs=n_jobs, progress=False,
                                            sequential_fallback=False))
    alone = [one(k, 1) for k in range(2)]
    for _ in range(3):
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            runs = [pool.submit(one, k, n) for k, n in ((0, 2), (1, 3))]
            assert [run.result(timeout=60) for run in runs] == alone


def test_evaluators_of_other_worker_counts_open_at_once_keep_their_own_workers():
    """An Evaluator of 3 workers and, opened meanwhile in the same process, one of 2:
    each keeps its own workers (loky's are kept for the next run of as many; the 3
    are in use, so the 2 are new) and scores as n_jobs=1."""
    from agents import NoisyEverywhere
    weights = [NoisyEverywhere().get_weights() for _ in range(6)]
    expected = es_search.evaluate(NoisyEverywhere(), weights, n_jobs=1)
    with es_search.Evaluator(NoisyEverywhere(), n_jobs=3,
                             sequential_fallback=False) as three:
        with es_search.Evaluator(NoisyEverywhere(), n_jobs=2,
                                 sequential_fallback=False) as two:
            assert len(three.worker_pids) == 3 and len(two.worker_pids) == 2
            assert not three.worker_pids & two.worker_pids
            assert three.evaluate(weights, 0) == expected == two.evaluate(weights, 0)


def test_torch_runs_on_one_thread_until_the_block_ends_whatever_other_threads_do():
    """torch's thread count is the process's: a second thread's block waits, so it
    cannot set the count back in the middle of the first one's tasks."""
    import threading
    from es_search.seeding import single_torch_thread
    entered, done = threading.Event(), threading.Event()

    def other():
        with single_torch_thread():
            entered.set()
        done.set()

    with single_torch_thread():
        thread = threading.Thread(target=other)
        thread.start()
        assert not entered.wait(0.2)  # held off while this block runs
        assert torch.get_num_threads() == 1
    thread.join(10)
    assert entered.is_set() and done.is_set()


def _process_state_block():
    from es_search.seeding import preserved_global_rngs
    return preserved_global_rngs()


def _chunk_lock():
    from es_search import backends
    return backends.CHUNK_LOCK  # looked up at each use, as worker.py does


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
@pytest.mark.parametrize("block", [_process_state_block, _chunk_lock])
def test_a_child_forked_while_another_thread_holds_the_lock_can_score(block):
    """A pool may fork a worker from one of its threads while the main thread holds the
    process's lock (scoring a cheap generation in this process), or a chunk's lock (a
    worker thread of an in-process Dask cluster): the child gets a fresh lock, not one
    that no thread of it will ever release."""
    import threading
    holding, release = threading.Event(), threading.Event()

    def hold():
        with block():
            holding.set()
            release.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert holding.wait(10)
        pid = os.fork()
        if pid == 0:  # the child: its copy of the lock is fresh
            code = 1
            try:
                with block():
                    code = 0
            finally:
                os._exit(code)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            time.sleep(0.01)
        else:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            pytest.fail("the child waited on a lock held by a thread it does not have")
        assert os.waitstatus_to_exitcode(status) == 0
    finally:
        release.set()
        holder.join(10)


def test_own_python_random_blocks_in_two_threads_each_get_their_own():
    import random
    import threading

    from es_search.seeding import own_python_random
    original = random.random
    entered, release, draws = threading.Barrier(2), threading.Event(), {}

    def block(seed):
        with own_python_random():
            random.seed(seed)
            entered.wait(5)
            if seed == 1:
                release.wait(5)  # the other block ends first
            draws[seed] = [random.random() for _ in range(3)]
            if seed == 2:
                release.set()

    threads = [threading.Thread(target=block, args=(s,)) for s in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    for seed in (1, 2):
        random.seed(seed)
        assert draws[seed] == [random.random() for _ in range(3)]
    assert random.random is original  # put back when the last block ended


def test_a_non_contiguous_evolved_weight_gives_the_same_run_on_workers():
    """A transposed weight: the workers rebuild it in the main process's memory layout,
    in which jitter_weights() draws (they built it contiguous, and jittered otherwise)."""
    from agents import Transposed
    runs = [comparable(es_search.run(Transposed(), n_jobs=n_jobs, generations=2,
                                     population=4, sigma=1.0, seed=0, progress=False,
                                     sequential_fallback=False))
            for n_jobs in (1, 2)]
    assert runs[0] == runs[1]
    assert not Transposed().w.is_contiguous()


@pytest.mark.parametrize("size", [0, 8])
def test_a_group_size_set_on_the_class_in_this_process_is_the_workers(size, monkeypatch):
    """The workers import the agent's class from its module; a score_batch_size the
    main process set on the class (0: none; 8: groups of 8, the module says 4) is the
    one they cut groups with, so the run equals n_jobs=1's."""
    import reference_agents
    from reference_agents import GroupSizedByClass
    monkeypatch.setattr(GroupSizedByClass, "score_batch_size", size)
    kwargs = dict(generations=2, population=8, sigma=0.3, seed=1, progress=False,
                  sequential_fallback=False, strategy="openai-es")
    runs = [comparable(es_search.run(GroupSizedByClass(), n_jobs=n_jobs, **kwargs))
            for n_jobs in (1, 2)]
    assert runs[0] == runs[1]
    assert reference_agents.__name__ not in cloudpickle_by_value()


def cloudpickle_by_value():
    import cloudpickle
    return set(getattr(cloudpickle.cloudpickle, "_PICKLE_BY_VALUE_MODULES", ()))
