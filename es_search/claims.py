"""Work claiming: the workers of one machine take a generation's tasks as they come free.

With tasks of uneven length (episodes that end early or late), cutting a generation into
one chunk per worker leaves workers idle at its end while the busiest one finishes;
cutting it into many chunks makes the main process hand out each one, and on a machine
whose cores are all busy with workers that hand-out waits for a core (4-9% of a
generation of 10 ms tasks on 2 cores). Here each worker gets one call per generation
and claims blocks of tasks itself from a counter in a shared file (``fcntl.flock``, a
few microseconds per claim), until none is left: the main process is not involved, and
a generation waits at its end for at most one block.

Results do not depend on who claimed what: every task is seeded by its index, blocks
are fixed ranges (``chunking.group_bounds``: whole groups with batched scoring), and the
main process puts the blocks back in index order; when tasks raise, the error of the
lowest index is the one raised, as with chunks. Blocks a dead worker claimed but did
not return are scored again (with the same seeds) by the engine's retry.
"""
from __future__ import annotations

import os
import time
from concurrent.futures import BrokenExecutor
from typing import Any, Callable, Sequence

from .backends import load
from .candidates import Candidate, take_vectors
from .chunking import group_bounds
from .errors import ScoreError
from .worker import chunk_context, score_tasks

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: chunks only
    fcntl = None  # type: ignore[assignment]

AVAILABLE = fcntl is not None


class Counter:
    """The main side: a file holding the next block to claim, reset before each round."""

    def __init__(self, folder: str):
        self.path = os.path.join(folder, "claims.bin")
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        self.reset()

    def reset(self) -> None:
        os.pwrite(self._fd, bytes(8), 0)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _claim(fd: int) -> int:
    """The next block number (0, 1, ...), taken under an exclusive lock."""
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        k = int.from_bytes(os.pread(fd, 8, 0), "little")
        os.pwrite(fd, (k + 1).to_bytes(8, "little"), 0)
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
    return k


def score_claimed(token: str, skeleton: Any, center: Any, shared: Any,
                  candidates: Sequence[Candidate], todo: Sequence[tuple[int, int]],
                  claims: str, seed: int, generation: int,
                  score_kwargs: Any, on_error: str = "raise", vectors: Any = None
                  ) -> tuple[list[tuple], float]:
    """A worker's part of a generation (all its ``candidates``): the blocks ``todo[k]``
    (``(start, stop)``) for each ``k`` it claims from the counter file ``claims``.
    Returns ``[(start, scores, reports, error), ...]`` and the seconds it worked; a block
    that raised has its :class:`ScoreError` as ``error`` and ends the worker's part."""
    blocks: list[tuple] = []
    fd = os.open(claims, os.O_RDWR)
    try:
        with chunk_context(token, skeleton, center, shared, score_kwargs) as (agent, payload,
                                                                              began):
            candidates = take_vectors(candidates, load(vectors))
            while True:
                k = _claim(fd)
                if k >= len(todo):
                    break
                start, stop = todo[k]
                try:
                    scores, reports = score_tasks(agent, payload, candidates[start:stop],
                                                  seed, generation, start, on_error)
                except ScoreError as exc:
                    blocks.append((start, None, None, exc))
                    break
                blocks.append((start, scores, reports, None))
            return blocks, time.perf_counter() - began
    finally:
        os.close(fd)


def merge(parts: Sequence[list[tuple]], n: int) -> tuple[list[Any], list[Any]]:
    """The scores and reports of ``n`` candidates, in index order, from the workers'
    blocks; the error of the lowest block that raised is raised."""
    blocks = sorted((b for part in parts for b in part), key=lambda b: b[0])
    errors = [b[3] for b in blocks if b[3] is not None]
    if errors:
        raise errors[0]
    scores = [s for b in blocks for s in b[1]]
    reports = [r for b in blocks for r in b[2]]
    if len(scores) != n:  # pragma: no cover - a bug, not a user's error
        raise RuntimeError(f"claimed blocks cover {len(scores)} of {n} candidates")
    return scores, reports


def run_claimed(pool: Any, counter: Counter, candidates: Sequence[Candidate], unit: int,
                head: tuple, tail: tuple,
                retrying: Callable[[Callable[[], list], Callable[[], list[int]]], list]
                ) -> tuple[list[Any], list[Any], list[float]]:
    """One :func:`score_claimed` call per worker of ``pool`` (``head``: token, skeleton,
    centre and shared references; ``tail``: seed, generation, the score_kwargs' reference,
    on_error, the shared vectors' reference),
    blocks of ``unit`` candidates (``chunking.group_bounds``: whole groups when ``unit``
    is the group size). ``retrying(call, lost)`` makes the call (the engine's
    ``Engine._retrying``): when a worker dies, the blocks not returned are claimed
    again by fresh workers. Returns the scores, the reports and each worker call's
    seconds."""
    n = len(candidates)
    todo, parts = group_bounds(n, unit), []

    def call() -> list:
        nonlocal todo
        counter.reset()
        args = (*head, candidates, todo, counter.path, *tail)
        done: dict[int, Any] = {}
        try:
            return pool.run_chunks(score_claimed, [args] * pool.n_workers, done)
        except BrokenExecutor:
            returned = [value[0] for ok, value in done.values() if ok]
            got = {block[0] for part in returned for block in part}
            parts.extend(returned)
            todo = [(a, b) for a, b in todo if a not in got]
            raise

    results = retrying(call, lambda: [i for a, b in todo for i in range(a, b)])
    parts += [part for part, _ in results]
    scores, reports = merge(parts, n)
    return scores, reports, [seconds for _, seconds in results]
