"""How a generation's candidates are cut into groups and chunks, one place for every
question: groups (:func:`group_bounds`), chunks (:func:`chunk_bounds`), how many, or
whether the workers claim tasks instead (:class:`ChunkPolicy`, from the task time and
the measured :func:`imbalance` of the workers' shares). Results never depend on the
chunks: every task is seeded by its index, and the groups depend on the generation's
size only.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Sequence


def group_bounds(n: int, size: int) -> list[tuple[int, int]]:
    """The groups of a generation of ``n`` candidates scored ``size`` at a time
    (``score_batch_size``; also the blocks workers claim): ``(start, stop)`` ranges cut
    at multiples of ``size``, except that a remainder of at most ``size // 4``
    candidates joins the last group. They depend on ``n`` and ``size`` only, never on
    the workers, so a candidate has the same neighbours on any backend.

    A remainder is most often a re-evaluated parent (a hill climber's population plus
    one): alone it would be a group of its own, as long as a whole group's longest
    episode, run after a whole group on one of the workers.

    >>> group_bounds(10, 4)
    [(0, 4), (4, 8), (8, 10)]
    >>> group_bounds(65, 32)  # 64 candidates and their parent
    [(0, 32), (32, 65)]
    """
    cuts = list(range(0, n, max(size, 1))) + [n]
    if len(cuts) > 2 and n - cuts[-2] <= size // 4:
        del cuts[-2]
    return list(zip(cuts[:-1], cuts[1:]))


def chunk_bounds(n: int, parts: int, group: int = 0) -> list[tuple[int, int]]:
    """How ``n`` candidates are cut into chunks for ``parts`` workers: contiguous,
    near-equal ``(start, stop)`` ranges covering ``range(n)``, in order.

    With batching (``group`` > 0, the agent's :func:`group_size`) chunks are unions of
    whole groups (:func:`group_bounds`), near-equal in groups, so that every group is
    scored whole. Results do not depend on the cut (every task is seeded by its index,
    the groups depend on ``n`` only); it is the one place that decides it.
    """
    starts = [a for a, _ in group_bounds(n, group)] if group > 0 else range(n)
    parts = max(1, min(parts, len(starts)))
    firsts = [starts[len(starts) * k // parts] for k in range(parts) if starts] + [n]
    return [(a, b) for a, b in zip(firsts, firsts[1:]) if a < b]


@dataclass
class ChunkPolicy:
    """How a parallel generation is handed to the workers, from what the
    :class:`~es_search.dispatch.DispatchPolicy` measured (``measured``: its ``n_workers``,
    ``task_seconds``, ``imbalance``): claimed as the workers come free, or cut into
    chunks. ``evolved``: the agent's evolved values; ``group``: its ``group_size`` (0:
    not batched); ``claims``: the pool's workers can claim; ``cap``: chunks per worker
    at most (None: any)."""
    evolved: int = 0
    group: int = 0
    claims: bool = False
    cap: int | None = None

    #: scores at least this long (seconds per task) are taken by the workers as they
    #: come free (claimed, or several chunks per worker): episodes of uneven length, or
    #: a core that another program slows, no longer hold the whole generation back
    BALANCE_FROM: ClassVar[float] = 0.002
    #: agents with this many evolved values or more claim tasks two at a time: an
    #: antithetic pair's noise (~1 ms per 10^5 values) is then drawn once, in one worker;
    #: smaller ones one at a time (the end of a generation waits for one task at most)
    CLAIM_PAIRS_FROM: ClassVar[int] = 100_000
    #: a chunk lasts at least about this long (each chunk costs one more round trip)
    MIN_CHUNK_SECONDS: ClassVar[float] = 0.005
    #: ... and only when the busiest worker's share of a generation (cut one chunk per
    #: worker) ran this much longer than the average share (median of recent ones).
    #: Finer chunks cost the workers time too (the main process handles every chunk on
    #: the same cores): 4-9% with even 10 ms tasks on 2 cores, where LunarLander's and
    #: Hopper's shares differ by ~5% (``benchmarks/chunking.py``)
    IMBALANCE_FROM: ClassVar[float] = 0.10

    def claim_unit(self, measured: Any) -> int:
        """Tasks a worker claims at a time (a whole group when batched); 0: chunks."""
        if not self.claims or (measured.task_seconds or 0) < self.BALANCE_FROM:
            return 0
        return self.group or (2 if self.evolved >= self.CLAIM_PAIRS_FROM else 1)

    def count(self, n: int, measured: Any) -> int:
        """Chunks for ``n`` candidates, a multiple of the workers: one per worker, or,
        for long tasks and uneven shares, chunks of about ``MIN_CHUNK_SECONDS`` or more,
        ``cap`` per worker at most (a generation then waits at its end for about half a
        chunk, not half a worker's share)."""
        task, uneven = measured.task_seconds, measured.imbalance
        if task is None or task < self.BALANCE_FROM or uneven is None \
                or uneven < self.IMBALANCE_FROM:
            return measured.n_workers
        per_worker = max(1, n // measured.n_workers)
        count = max(1, min(per_worker, int(per_worker * task / self.MIN_CHUNK_SECONDS)))
        return measured.n_workers * (count if self.cap is None else min(count, self.cap))

    def bounds(self, n: int, measured: Any) -> list[tuple[int, int]]:
        """The chunks of ``n`` candidates (:func:`chunk_bounds`, :meth:`count` of them)."""
        return chunk_bounds(n, self.count(n, measured), self.group)


def imbalance(bounds: Sequence[tuple[int, int]], seconds: Sequence[float], n: int,
              workers: int) -> float:
    """How much longer the busiest of ``workers`` shares (one contiguous range of the
    ``n`` tasks each, as :func:`chunk_bounds` cuts them) ran than the average share,
    from the seconds of the chunks ``bounds`` actually ran (each counted in the share
    where it starts): what cutting one chunk per worker loses, or would have.

    >>> imbalance([(0, 4), (4, 8)], [1.0, 3.0], 8, 2)  # one share took 3 s, the mean 2 s
    0.5
    >>> imbalance([(0, 2), (2, 4), (4, 6), (6, 8)], [0.5, 0.5, 0.5, 0.5], 8, 2)
    0.0
    """
    shares = chunk_bounds(n, workers)
    sums = [0.0] * len(shares)
    k = 0
    for (start, _), s in zip(bounds, seconds):
        while k + 1 < len(shares) and start >= shares[k][1]:
            k += 1
        sums[k] += s
    mean = sum(sums) / len(sums)
    return max(sums) / mean - 1.0 if mean > 0 else 0.0
