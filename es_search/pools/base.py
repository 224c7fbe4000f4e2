"""What every pool of the engine is (:class:`Pool`), and what the Dask and Ray pools
share (:class:`ActorPool`)."""
from __future__ import annotations

import time
from typing import Any, Callable, Sequence

import numpy as np

from . import WorkerLost
from .runner import Mismatch, Parcel, Tracker


class Pool:
    """Where the parallel path runs a generation's chunks; one per ``Evaluator``, which
    reads what it can do from ``local``: this machine's processes, payloads as files in
    ``files``, where the workers can claim tasks from a counter; else ``put`` takes a
    recipe (:mod:`.centres`).

    ``put(name, value)``: a payload (bytes or an array) for the chunks; returns what to
    pass in their arguments; a later ``put`` of the name replaces it.
    ``run_chunks(fn, args_list, done=None, timeout=None)``: ``fn(*args)`` on the
    workers, the results in order; the first error (in order) is raised once all have
    finished; a lost worker raises a ``BrokenExecutor``, a chunk over ``timeout`` s a
    ``TimeoutError``; ``done`` receives each result by position, so a retry skips them.
    """

    n_workers = 1
    local = False

    def abort(self) -> None:
        """Stop the running chunks now (Ctrl-C)."""

    def close(self) -> None:
        """Stop the workers; free what the pool holds."""

    def __enter__(self) -> "Pool":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def same_bytes(a: np.ndarray, b: np.ndarray) -> bool:
    """Same shape, dtype and bits (``-0.0`` is not ``0.0``, a NaN equals the same NaN)."""
    def raw(x: np.ndarray) -> np.ndarray:  # a view of its bytes, no copy when contiguous
        return np.ascontiguousarray(x).reshape(-1).view(np.uint8)
    return a.shape == b.shape and a.dtype == b.dtype and (a is b or np.array_equal(raw(a),
                                                                                   raw(b)))


def in_order(done: dict, n: int) -> list:
    """The results by position; the first chunk that raised (in order) raises."""
    results = []
    for i in range(n):
        ok, value = done[i]
        if not ok:
            for j in [j for j in done if not done[j][0]]:
                del done[j]  # a retry reruns them
            raise value
        results.append(value)
    return results


#: seconds a pool waits for a worker when the cluster has none (since it first found none)
WAIT_FOR_WORKERS = 60

#: seconds for which the runners counted by ``n_workers`` serve the next ``run_chunks``
FRESH = 0.5


class ActorPool(Pool):
    """A :class:`Pool` of :class:`~.runner.Runner` actors (``_actors``: key -> handle),
    one per worker process, counted again at each call; chunks dealt round-robin.
    Subclasses define ``_runners()`` (the keys to use now, started where new, in a stable
    order), ``_submit(key, fn, args, sends, forget)`` (a call), ``_result(call,
    timeout)`` (its result; ``WorkerLost`` if the runner died, ``TimeoutError`` past
    ``timeout``) and ``_stop(keys)`` (stop those runners' processes)."""

    def __init__(self, n_jobs: int = -1):
        self.n_jobs = n_jobs
        self.tracker = Tracker()
        self._actors: dict[Any, Any] = {}
        self._running: list[Any] = []
        self._fresh: tuple[float, list[Any]] | None = None
        self._none_since: float | None = None  # when the pool found no runners

    def _forget(self, key: Any) -> None:
        self._actors.pop(key, None)
        self.tracker.held.pop(key, None)

    def _await_runners(self) -> list[Any]:
        """Runners, waiting up to :data:`WAIT_FOR_WORKERS` s since the pool found none."""
        runners = self._runners()
        if not runners and self._none_since is None:
            self._none_since = time.monotonic()
        while not runners and time.monotonic() < self._none_since + WAIT_FOR_WORKERS:
            time.sleep(0.5)
            runners = self._runners()
        if runners:
            self._none_since = None
        return runners

    @property
    def n_workers(self) -> int:
        """Runners now (asked of the cluster; the next ``run_chunks`` uses them)."""
        runners = self._runners()
        self._fresh = (time.monotonic(), runners)
        if runners:  # an outage (see _await_runners) is over
            self._none_since = None
        return max(1, len(runners))

    def put(self, name: str, value: Any, recipe: tuple | None = None) -> Parcel:
        return self.tracker.put(name, value, recipe)

    def run_chunks(self, fn: Callable, args_list: Sequence[tuple],
                   done: dict | None = None, timeout: float | None = None) -> list:
        done = {} if done is None else done
        fresh, self._fresh = self._fresh, None
        runners = ((fresh is not None and time.monotonic() - fresh[0] < FRESH and fresh[1])
                   or self._await_runners())
        if not runners:
            raise WorkerLost(f"the cluster has had no workers for {WAIT_FOR_WORKERS} s")
        todo = [i for i in range(len(args_list)) if i not in done]
        assigned = {i: runners[k % len(runners)] for k, i in enumerate(todo)}
        calls = {i: self._call(assigned[i], fn, args_list[i]) for i in todo}
        self._running = sorted(set(assigned.values()), key=runners.index)
        rounds = max((list(assigned.values()).count(r) for r in self._running), default=1)
        deadline = None if timeout is None else time.monotonic() + timeout * rounds
        errors: dict[int, BaseException] = {}
        late: list[Any] = []
        for i in todo:
            key = assigned[i]
            while True:
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                try:
                    out = self._result(calls[i], left)
                except WorkerLost as exc:
                    self._forget(key)
                    errors[i] = exc
                except TimeoutError:
                    late.append(key)
                    errors[i] = TimeoutError(f"a chunk ran over {timeout} s (on {key})")
                else:
                    if isinstance(out, Mismatch):  # the recipe did not hold there
                        self.tracker.forget_sent(key, [out.id])
                        calls[i] = self._call(key, fn, args_list[i], frozenset([out.id]))
                        continue
                    done[i] = out
                break
        self._running = []
        self._end(list(dict.fromkeys(late)))
        if errors:
            raise errors[min(errors)]
        return in_order(done, len(args_list))

    def _call(self, key: Any, fn: Callable, args: tuple,
              whole: frozenset[int] = frozenset()) -> Any:
        args, sends, forget = self.tracker.message(key, args, whole)
        return self._submit(key, fn, args, sends, forget)

    def _end(self, keys: list[Any]) -> None:
        if keys:
            self._stop(keys)
        for key in keys:
            self._forget(key)

    def abort(self) -> None:
        running, self._running = self._running, []
        self._end(running)
