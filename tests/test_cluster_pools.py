"""The cluster pools alone: Dask and Ray actors run chunks in order, keep payloads,
derive them from recipes, report lost workers, and use workers that join."""
from __future__ import annotations

import os
import time

import numpy as np
import pytest

from es_search.pools import WorkerLost
from es_search.pools.runner import Runner, Tracker, decode, encode


# ----------------------------------------------------------------- chunk functions
def pid_and_sum(payload, extra=0.0):
    return os.getpid(), float(np.sum(payload)) + extra


def sleep_then(seconds, outcome):
    time.sleep(seconds)
    if isinstance(outcome, BaseException):
        raise outcome
    return outcome


def exit_if(flag, value):
    if flag:
        os._exit(17)
    return value


def plus(base, k):
    return base + k


def on_main_thread():
    import threading
    return threading.current_thread() is threading.main_thread()


# ----------------------------------------------------------------- no cluster needed
def test_float64_that_fits_float32_travels_as_float32_bit_for_bit():
    exact = np.arange(5000, dtype=np.float32).astype(np.float64) / 7
    assert exact.dtype == np.float64
    kind, small = encode(exact.astype(np.float32).astype(np.float64))
    assert kind == "f32" and small.dtype == np.float32
    assert np.array_equal(decode((kind, small)), exact.astype(np.float32).astype(np.float64))
    precise = np.arange(5000) / 7  # not exact in float32
    assert encode(precise)[0] == "raw"
    assert encode(np.zeros(3))[0] == "raw"  # small: not worth it


def test_tracker_sends_once_derives_from_what_is_held_and_forgets_dropped():
    tracker, runner = Tracker(), Runner()
    base = tracker.put("a", np.arange(4.0))
    derived = tracker.put("b", np.arange(4.0) + 1, recipe=(plus, (base, 1.0)))

    def call(args, whole=frozenset()):
        out, sends, forget = tracker.message("w", args, whole)
        ok, value = runner.run(pid_and_sum, out, sends, forget)
        assert ok
        return value, sends

    (_, total), sends = call((base,))
    assert total == 6.0 and [s[1] for s in sends] == ["value"]
    _, sends = call((base,))
    assert sends == []  # held: not sent again
    (_, total), sends = call((derived,))
    assert total == 10.0 and [s[1] for s in sends] == ["recipe"]
    assert base.values_sent == 1 and derived.values_sent == 0 and derived.recipes_sent == 1
    replaced = tracker.put("a", np.zeros(4))  # a new "a": the old one is forgotten
    out, sends, forget = tracker.message("w", (replaced,))
    assert forget == [base.id]
    runner.run(pid_and_sum, out, sends, forget)
    assert base.id not in runner.store and replaced.id in runner.store
    # a runner that holds nothing gets the value whole, recipe or not
    _, sends, _ = tracker.message("other", (derived,))
    assert [s[1] for s in sends] == ["value"]


def test_a_recipe_that_does_not_hold_asks_for_the_value():
    tracker, runner = Tracker(), Runner()
    base = tracker.put("a", np.arange(4.0))
    wrong = tracker.put("b", np.arange(4.0) + 5, recipe=(plus, (base, 1.0)))
    out, sends, forget = tracker.message("w", (base,))
    runner.run(pid_and_sum, out, sends, forget)
    out, sends, forget = tracker.message("w", (wrong,))
    answer = runner.run(pid_and_sum, out, sends, forget)
    assert type(answer).__name__ == "Mismatch" and answer.id == wrong.id
    tracker.forget_sent("w", [wrong.id])
    out, sends, forget = tracker.message("w", (wrong,), frozenset([wrong.id]))
    assert runner.run(pid_and_sum, out, sends, forget) == (True, (os.getpid(), 26.0))


def test_a_call_that_overtakes_the_one_carrying_its_payload_asks_for_the_value():
    """Two calls of a round to one runner travel on separate connections: the second,
    which names the payload the first carries, may arrive first (it raised KeyError)."""
    tracker, runner = Tracker(), Runner()
    data = tracker.put("a", np.arange(4.0))
    first = tracker.message("w", (data,))
    second = tracker.message("w", (data,))
    assert second[1] == []  # the payload travels with the first call only
    answer = runner.run(pid_and_sum, *second)
    assert type(answer).__name__ == "Mismatch" and answer.id == data.id
    tracker.forget_sent("w", [data.id])
    assert runner.run(pid_and_sum, *tracker.message("w", (data,), frozenset([data.id]))) \
        == (True, (os.getpid(), 6.0))
    assert runner.run(pid_and_sum, *first) == (True, (os.getpid(), 6.0))


# ----------------------------------------------------------------- Dask
def _pool(kind, client=None, **kw):
    if kind == "dask":
        from es_search.pools.dask_pool import DaskPool
        return DaskPool(client, **kw)
    from es_search.pools.ray_pool import RayPool
    return RayPool(**kw)


@pytest.fixture(params=["dask", "ray"])
def pool(request):
    if request.param == "dask":
        _, client = request.getfixturevalue("cluster")
        pool = _pool("dask", client)
    else:
        request.getfixturevalue("ray_session")
        pool = _pool("ray")
    yield pool
    pool.close()


def test_chunks_run_on_distinct_processes_and_payloads_travel_once(pool):
    assert pool.n_workers == 2 and not pool.local
    data = pool.put("data", np.ones(10_000))
    for _ in range(3):
        out = pool.run_chunks(pid_and_sum, [(data,), (data, 1.0)])
        assert [s for _, s in out] == [10_000.0, 10_001.0]
        assert len({p for p, _ in out}) == 2 and os.getpid() not in {p for p, _ in out}
    assert data.values_sent == 2  # once per worker, not per chunk
    derived = pool.put("derived", np.ones(10_000) + 1, recipe=(plus, (data, 1.0)))
    out = pool.run_chunks(pid_and_sum, [(derived,), (derived,)])
    assert [s for _, s in out] == [20_000.0] * 2
    assert derived.values_sent == 0 and derived.recipes_sent == 2


def test_first_error_in_order_is_raised_after_all_finish(pool):
    done = {}
    began = time.perf_counter()
    with pytest.raises(KeyError, match="first"):
        pool.run_chunks(sleep_then, [(0.3, KeyError("first")), (0.0, ValueError("second")),
                                     (0.0, "ok")], done)
    assert time.perf_counter() - began >= 0.3
    assert done == {2: (True, "ok")}
    assert pool.run_chunks(sleep_then, [(0.0, 1), (0.0, 2)]) == [1, 2]


def test_a_lost_worker_is_reported_and_the_pool_goes_on(pool):
    done = {}
    with pytest.raises(WorkerLost):
        pool.run_chunks(exit_if, [(False, "a"), (True, "b")], done)
    assert done == {0: (True, "a")}
    assert pool.run_chunks(exit_if, [(False, "c"), (False, "d")]) == ["c", "d"]


@pytest.mark.slow
def test_a_chunk_over_its_time_is_stopped(pool):
    began = time.perf_counter()
    with pytest.raises(TimeoutError):
        pool.run_chunks(sleep_then, [(0.0, 1), (30.0, 2)], timeout=0.5)
    assert time.perf_counter() - began < 20
    assert pool.run_chunks(sleep_then, [(0.0, 1), (0.0, 2)]) == [1, 2]


def test_dask_workers_that_join_are_used(cluster):
    _, client = cluster
    from es_search.pools.dask_pool import DaskPool
    with DaskPool(client) as pool:
        before = len(pool.run_chunks(pid_and_sum, [(np.ones(3),)] * 2))
        cluster[0].scale(before + 1)
        client.wait_for_workers(before + 1, timeout=60)
        assert pool.n_workers == before + 1  # as the engine asks, before each generation
        out = pool.run_chunks(pid_and_sum, [(np.ones(3),)] * (before + 1))
        assert [s for _, s in out] == [3.0] * (before + 1)
        assert len({p for p, _ in out}) == before + 1
    cluster[0].scale(2)


def killed_on_first_start(base: type, marker: str) -> type:
    """A subclass of the runner class ``base`` whose first instance, in whichever worker
    makes it, SIGKILLs its process (as the OOM killer kills); ``marker`` (a file) says
    it happened. A local class: the pools send it by value, the marker with it."""
    import signal

    class KilledStarting(base):
        def __init__(self):
            try:
                os.close(os.open(marker, os.O_CREAT | os.O_EXCL))
            except FileExistsError:
                return super().__init__()
            os.kill(os.getpid(), signal.SIGKILL)

    return KilledStarting


def test_dask_a_worker_killed_while_its_actor_starts_is_given_up_at_once(
        cluster, tmp_path, monkeypatch):
    """The one worker wanted (n_jobs=1) SIGKILLed while its actor is created: the pool
    takes the other at once (its actor would never start: the pool waited 2 minutes)."""
    from es_search.pools import dask_pool
    _, client = cluster
    client.wait_for_workers(2, timeout=60)
    marker = str(tmp_path / "killed")
    monkeypatch.setattr(dask_pool, "Runner", killed_on_first_start(Runner, marker))
    began = time.monotonic()
    with dask_pool.DaskPool(client, n_jobs=1) as pool:
        [(pid, _)] = pool.run_chunks(pid_and_sum, [(np.ones(3),)])
    assert os.path.exists(marker) and pid != os.getpid()
    assert time.monotonic() - began < 30  # it took 125 s
    client.wait_for_workers(2, timeout=60)  # restarted: the cluster closes cleanly
    while len(cluster[0].scheduler_info["workers"]) < 2 and time.monotonic() - began < 60:
        time.sleep(0.1)


@pytest.mark.slow
def test_dask_short_calls_run_on_the_workers_event_loop_long_ones_beside_it(cluster):
    """The event loop's own thread (the worker's main thread) when the previous call on
    that worker was short; the actor thread at first and after a long call."""
    _, client = cluster
    from es_search.pools.dask_pool import DaskPool
    with DaskPool(client) as pool:
        pool.loop_call_seconds = 0.3
        assert pool.run_chunks(on_main_thread, [()] * 2) == [False, False]  # unmeasured
        assert pool.run_chunks(on_main_thread, [()] * 2) == [True, True]
        assert pool.run_chunks(sleep_then, [(0.4, 1), (0.4, 2)]) == [1, 2]  # on the loop
        assert pool.run_chunks(on_main_thread, [()] * 2) == [False, False]  # after 0.4 s
        assert pool.run_chunks(on_main_thread, [()] * 2) == [True, True]


def test_dask_without_a_client_says_how_to_make_one(monkeypatch):
    distributed = pytest.importorskip("distributed")
    from es_search.pools.dask_pool import get_client

    def no_client():
        raise ValueError("No clients found")

    monkeypatch.setattr(distributed, "get_client", no_client)
    with pytest.raises(ValueError, match="--scheduler"):
        get_client("dask")


# ----------------------------------------------------------------- Ray
@pytest.mark.slow  # three actors started: ~6 s
def test_ray_an_actor_killed_while_it_starts_is_left_out_the_other_kept(
        ray_session, tmp_path, monkeypatch):
    """One of two actors SIGKILLed (as the OOM killer kills) while it starts: the pool
    keeps the other (it killed both), and starts a new one at the next call."""
    from es_search.pools import ray_pool
    marker = str(tmp_path / "killed")
    monkeypatch.setattr(ray_pool.RayPool, "runner",
                        killed_on_first_start(ray_pool.RayRunner, marker))
    with ray_pool.RayPool(n_jobs=2) as pool:
        assert os.path.exists(marker)
        [kept] = pool._actors.values()
        kept = ray_session.get(kept.pid.remote())
        pids = {p for p, _ in pool.run_chunks(pid_and_sum, [(np.ones(3),)] * 2)}
    assert kept in pids and len(pids) == 2


RAYLET_KILLED = r"""
import json, os, signal, sys, time
import ray
import es_search
from es_search.candidates import Candidate
from es_search.pools import base, ray_pool
from benchmarks.kill_sweep import Slow, cmdline, descendants
base.WAIT_FOR_WORKERS = ray_pool.WAIT_FOR_WORKERS = 5
# Ray marks a node dead after 5 missed health checks, 3 s apart: 1 s apart here
ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False,
         _system_config={"health_check_period_ms": 1000})
with es_search.Evaluator(Slow(), seed=0, n_jobs=2, backend="ray",
                         sequential_fallback=False) as ev:
    center = ev.local.get_flat()
    ev.score(0, center, [Candidate("jitter", 0.1)] * 4)
    for pid in descendants(os.getpid()):
        if os.path.basename(cmdline(pid).split("\0")[0]) == "raylet":
            os.kill(pid, signal.SIGKILL)
    began, out = time.monotonic(), "scored"
    try:  # the actors outlive their raylet for a moment
        for generation in range(1, 200):
            ev.score(generation, center, [Candidate("jitter", 0.1)] * 4)
    except es_search.WorkerError as exc:
        out = str(exc)
print("RESULT", json.dumps({"error": out, "seconds": time.monotonic() - began}))
"""


@pytest.mark.slow  # a local Ray of its own, its node dead: ~30 s
def test_ray_with_its_only_node_gone_fails_once_it_has_had_no_workers_for_the_wait():
    """The raylet of a local Ray SIGKILLed: once Ray marks the node dead, the pool stops
    waiting for actors that would never start and waits for CPUs (5 s here) once, not at
    each retry: the run ends with es_search's WorkerError (it took 375 s)."""
    pytest.importorskip("ray")
    import json
    import subprocess
    import sys
    from es_search.pools.ray_pool import START_TIMEOUT
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    done = subprocess.run([sys.executable, "-c", RAYLET_KILLED], capture_output=True,
                          text=True, timeout=600, cwd=root,
                          env={**os.environ, "PYTHONPATH": root})
    assert done.returncode == 0, done.stderr[-2000:]
    [out] = [json.loads(line.split(" ", 1)[1]) for line in done.stdout.splitlines()
             if line.startswith("RESULT ")]
    assert "no workers for 5 s" in out["error"] and "3 time(s)" in out["error"]
    assert out["seconds"] < START_TIMEOUT, out  # no wait for an actor to start
