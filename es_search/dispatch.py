"""How a generation is handed out: in this process or to the workers
(:class:`DispatchPolicy`), in chunks or in blocks the workers claim from a counter file
(``fcntl.flock``) as they come free (:class:`ChunkPolicy`, :func:`run_claimed`). No
choice changes a result: every task is seeded by its index, runs with one torch thread,
and chunks and blocks are unions of whole groups (:func:`~es_search.worker.group_bounds`).

The in-process/parallel model: ``n`` tasks cost ``n * t`` here and ``ceil(n / workers)
* t + overhead`` in parallel, ``t`` the smallest of the path's last ``WINDOW`` per-task
times (the other path's until timed), ``overhead`` the median of the last ``WINDOW``
round trips. A losing path predicted within ``CLOSE`` times the winner is tried again:
at once if timed less than twice, else after ``REPROBE_EVERY`` generations on the
winner (twice as many after each try it loses).
"""
from __future__ import annotations

import collections
import functools
import itertools
import math
import os
import statistics
import time
import warnings
from concurrent.futures import BrokenExecutor
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Sequence

from . import backends
from .candidates import Candidate, take_vectors
from .seeding import single_torch_thread
from .worker import cached_payload, group_bounds, score_tasks, worker_agent

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: chunks only
    fcntl = None  # type: ignore[assignment]

#: whether the workers of this platform can claim tasks
AVAILABLE = fcntl is not None
PARALLEL = "parallel"
SEQUENTIAL = "sequential"


def chunk_bounds(n: int, parts: int, group: int = 0) -> list[tuple[int, int]]:
    """``n`` candidates cut into ``parts`` contiguous ``(start, stop)`` ranges, in order,
    near-equal in candidates or, with ``group`` > 0 (the agent's group size), in whole groups."""
    starts = [a for a, _ in group_bounds(n, group)]  # group 0: one candidate each
    parts = max(1, min(parts, len(starts)))
    firsts = [starts[len(starts) * k // parts] for k in range(parts) if starts] + [n]
    return [(a, b) for a, b in zip(firsts, firsts[1:]) if a < b]


@dataclass
class ChunkPolicy:
    """How a parallel generation is handed to the workers, from what a :class:`DispatchPolicy`
    measured (``measured``): long tasks claimed where the pool can (``claims``: the local
    workers), else one chunk per worker (a cluster pool deals its chunks out in turn: more
    would not balance); ``timed`` (a task timeout): one task (a group) a chunk, each timed,
    none claimed. ``evolved``, ``group``: the agent's values and group size."""
    evolved: int = 0
    group: int = 0
    claims: bool = False
    timed: bool = False

    #: tasks at least this long (seconds) are claimed as the workers come free: uneven
    #: episodes or a slowed core hold less back
    BALANCE_FROM: ClassVar[float] = 0.002
    #: agents this large claim tasks two at a time: an antithetic pair's noise (~1 ms per
    #: 10^5 values) is drawn once; smaller ones one at a time
    CLAIM_PAIRS_FROM: ClassVar[int] = 100_000

    def claim_unit(self, measured: Any) -> int:
        """Tasks a worker claims at a time (a whole group when batched); 0: chunks."""
        if not self.claims or self.timed or (measured.task_seconds or 0) < self.BALANCE_FROM:
            return 0
        return self.group or (2 if self.evolved >= self.CLAIM_PAIRS_FROM else 1)

    def bounds(self, n: int, measured: Any) -> list[tuple[int, int]]:
        """The chunks of ``n`` candidates: one per worker, or one per task when timed."""
        return chunk_bounds(n, n if self.timed else measured.n_workers, self.group)


class DispatchPolicy:
    """Decides per generation whether it goes to the ``n_workers`` workers (:meth:`choose`,
    by the module docstring's model), from the generations reported (:meth:`completed`);
    ``fallback=False`` always chooses parallel (e.g. with a task timeout)."""

    WINDOW: ClassVar[int] = 5
    REPROBE_EVERY: ClassVar[int] = 20
    CLOSE: ClassVar[float] = 1.5

    def __init__(self, n_workers: int, fallback: bool = True):
        self.n_workers = max(1, int(n_workers))
        self.fallback = fallback
        self._task = {path: collections.deque(maxlen=self.WINDOW)  # seconds per task
                      for path in (SEQUENTIAL, PARALLEL)}
        self._overhead = collections.deque(maxlen=self.WINDOW)  # seconds per parallel round
        self._hint: float | None = None  # seconds of a single task (see ``completed``)
        self._run = 0  # generations in a row on ``last``
        self._interval = {SEQUENTIAL: self.REPROBE_EVERY, PARALLEL: self.REPROBE_EVERY}
        self._reprobing: str | None = None
        self.counts = {PARALLEL: 0, SEQUENTIAL: 0}
        self.last: str | None = None

    @property
    def task_seconds(self) -> float | None:
        times = list(self._task[SEQUENTIAL]) + list(self._task[PARALLEL])
        return statistics.median(times) if times else None

    @property
    def overhead_seconds(self) -> float | None:
        return statistics.median(self._overhead) if self._overhead else None

    def predict(self, path: str, n: int) -> float | None:
        """Predicted wall seconds of ``n`` tasks on ``path`` (None: not measured yet)."""
        times = self._task[path] or self._task[_other(path)]
        t = min(times) if times else self._hint
        overhead = 0.0 if path == SEQUENTIAL else self.overhead_seconds
        if t is None or overhead is None:
            return None
        if path == SEQUENTIAL:
            return n * t
        return math.ceil(n / min(n, self.n_workers)) * t + overhead

    def choose(self, n: int) -> str:
        """:data:`PARALLEL` or :data:`SEQUENTIAL` for a generation of ``n`` tasks."""
        if not self.fallback:  # nothing of the user's scores in this process
            return PARALLEL
        if n <= 1 or self.n_workers <= 1:
            return SEQUENTIAL
        predicted = {path: self.predict(path, n) for path in (SEQUENTIAL, PARALLEL)}
        if None in predicted.values():
            return PARALLEL  # measure it
        best = PARALLEL if predicted[PARALLEL] < predicted[SEQUENTIAL] else SEQUENTIAL
        other = _other(best)
        if self._reprobing is not None:  # the last generation re-probed a path
            probed, self._reprobing = self._reprobing, None
            self._interval[probed] = (self.REPROBE_EVERY if best == probed
                                      else 2 * self._interval[probed])
        if predicted[other] / max(predicted[best], 1e-12) >= self.CLOSE:
            return best
        # a first measurement may be cold: time the winner twice, then the loser
        if len(self._task[best]) < 2:
            return best
        if len(self._task[other]) < 2:
            return other
        if self.last == best and self._run >= self._interval[other]:
            self._reprobing = other
            return other
        return best

    def completed(self, path: str, n: int, wall: float, busy: float | None = None,
                  busiest: float | None = None) -> None:
        """Report ``n`` tasks done on ``path`` in ``wall`` seconds (``busy``: the workers'
        seconds; ``busiest``: the largest chunk's). A single task here (usually a centre,
        no build) is only a hint, used while no generation has been timed."""
        if n <= 0:
            return
        if path == SEQUENTIAL and n == 1:
            self._hint = wall
        elif path == SEQUENTIAL:
            self._task[SEQUENTIAL].append(wall / n)
        else:
            if self.last == SEQUENTIAL and self._run >= self.WINDOW:
                self._overhead.clear()  # a re-probe after a while here: those are stale
            self._task[PARALLEL].append((wall if busy is None else busy) / n)
            self.overhead(max(0.0, wall - (busiest if busiest is not None else wall)))
        if n > 1 or path == PARALLEL:
            self._run = self._run + 1 if path == self.last else 1
            self.counts[path] += 1
            self.last = path

    def overhead(self, seconds: float) -> None:
        """Report the overhead of one parallel round (e.g. an empty round at start-up)."""
        self._overhead.append(seconds)

    def stats(self) -> dict[str, Any]:
        """What the engine's ``stats`` show."""
        return {"task_seconds": self.task_seconds, "overhead_seconds": self.overhead_seconds,
                "last_path": self.last, "parallel_generations": self.counts[PARALLEL],
                "sequential_generations": self.counts[SEQUENTIAL]}


def _other(path: str) -> str:
    return SEQUENTIAL if path == PARALLEL else PARALLEL


def reset_claims(path: str) -> None:
    """Set the counter file ``path`` to block 0, before each claimed round."""
    with open(path, "wb") as f:
        f.write(bytes(8))


def _claim(fd: int) -> int:
    """The next block number (0, 1, ...), taken under an exclusive lock."""
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        k = int.from_bytes(os.pread(fd, 8, 0), "little")
        os.pwrite(fd, (k + 1).to_bytes(8, "little"), 0)
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
    return k


def score_blocks(token: str, skeleton: Any, center: Any, shared: Any,
                 candidates: Sequence[Candidate], first: int, todo: Sequence[tuple[int, int]],
                 claims: str | None, seed: int, generation: int, score_kwargs: Any,
                 on_error: str, vectors: Any) -> tuple[list[tuple], float]:
    """A worker's call: the blocks ``todo`` (``candidates`` from index ``first`` on) in
    turn or, with ``claims`` (the counter file), ``todo[k]`` for each ``k`` it claims.
    Returns ``[(start, scores, reports, error), ...]`` (what a block raises ends the call:
    :func:`in_index_order` raises the lowest block's) and the seconds it worked."""
    blocks: list[tuple] = []
    fd = None if claims is None else os.open(claims, os.O_RDWR)
    claim = itertools.count().__next__ if fd is None else functools.partial(_claim, fd)
    try:
        with backends.CHUNK_LOCK:  # one call at a time per process
            began = time.perf_counter()
            agent = worker_agent(token, skeleton)
            payload = cached_payload(token, center, score_kwargs, shared)
            candidates = take_vectors(candidates, backends.load(vectors))
            with single_torch_thread(), warnings.catch_warnings():
                # the centre may be a read-only memory map; set_flat only reads it
                warnings.filterwarnings("ignore", message="The given NumPy array is not writ")
                while (k := claim()) < len(todo):
                    start, stop = todo[k]
                    try:
                        scores, reports = score_tasks(agent, payload,
                                                      candidates[start - first:stop - first],
                                                      seed, generation, start, on_error)
                    except Exception as exc:  # noqa: BLE001 - raised by in_index_order
                        blocks.append((start, None, None, exc))
                        break
                    blocks.append((start, scores, reports, None))
            return blocks, time.perf_counter() - began
    finally:
        if fd is not None:
            os.close(fd)


def in_index_order(parts: Sequence[Sequence[tuple]], n: int) -> tuple[list[Any], list[Any]]:
    """The scores and reports of the blocks of ``parts`` (:func:`score_blocks`), in index
    order; the lowest block's error raised."""
    blocks = sorted((b for part in parts for b in part), key=lambda b: b[0])
    errors = [b[3] for b in blocks if b[3] is not None]
    if errors:
        raise errors[0]
    scores = [s for b in blocks for s in b[1]]
    if len(scores) != n:  # pragma: no cover - a bug, not a user's error
        raise RuntimeError(f"the blocks returned cover {len(scores)} of {n} candidates")
    return scores, [r for b in blocks for r in b[2]]


def run_claimed(pool: Any, candidates: Sequence[Candidate], unit: int, head: tuple, tail: tuple,
                retrying: Callable[..., list]) -> tuple[list[Any], list[Any], list[float]]:
    """One :func:`score_blocks` call per worker of the local ``pool`` (``head``, ``tail``:
    its arguments around the candidates and the counter file), claiming blocks of
    ``unit`` candidates, those a dead worker did not return again (``retrying(call,
    lost)`` makes the call): the scores and reports in index order, each call's seconds."""
    todo, parts = group_bounds(len(candidates), unit), []
    claims = os.path.join(pool.files.folder, "claims.bin")

    def call() -> list:
        nonlocal todo
        reset_claims(claims)
        args = (*head, candidates, 0, todo, claims, *tail)
        done: dict[int, Any] = {}
        try:
            return pool.run_chunks(score_blocks, [args] * pool.n_workers, done)
        except BrokenExecutor:
            returned = [value[0] for ok, value in done.values() if ok]
            got = {block[0] for part in returned for block in part}
            parts.extend(returned)
            todo = [(a, b) for a, b in todo if a not in got]
            raise

    results = retrying(call, lambda: [i for a, b in todo for i in range(a, b)])
    scores, reports = in_index_order(parts + [p for p, _ in results], len(candidates))
    return scores, reports, [seconds for _, seconds in results]
