"""How a generation's candidates are cut into groups and chunks, one place for every
question: groups (:func:`group_bounds`), chunks (:func:`chunk_bounds`), how many
(:func:`chunk_count`, from the task time and the measured :func:`imbalance` of the
workers' shares). Results never depend on the chunks: every task is seeded by its index,
and the groups depend on the generation's size only.
"""
from __future__ import annotations

from typing import Sequence


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


def chunk_count(n: int, workers: int, task: float | None, cap: int | None,
                balance_from: float, min_chunk: float, imbalance: float | None = 1.0,
                imbalance_from: float = 0.0) -> int:
    """Chunks for ``n`` tasks of ``task`` seconds each on ``workers`` (see
    ``Evaluator._chunk_count``); a multiple of ``workers``. ``imbalance``: how much
    longer the busiest worker's share ran than the average one (0.1: 10%; None: not
    measured yet); below ``imbalance_from``, one chunk per worker.

    >>> chunk_count(64, 2, 0.015, None, 0.002, 0.005)  # 15 ms episodes: one per chunk
    64
    >>> chunk_count(64, 2, 0.003, None, 0.002, 0.005)  # 3 ms: chunks of about 5 ms
    38
    >>> chunk_count(64, 2, 0.015, 4, 0.002, 0.005)  # a pool that allows 4 per worker
    8
    >>> chunk_count(64, 2, 0.001, None, 0.002, 0.005)  # short tasks: one per worker
    2
    >>> chunk_count(64, 2, 0.015, 4, 0.002, 0.005, 0.04, 0.1)  # even shares: one each
    2
    """
    if task is None or task < balance_from or imbalance is None or imbalance < imbalance_from:
        return workers
    per_worker = max(1, n // workers)
    count = max(1, min(per_worker, int(per_worker * task / min_chunk)))
    return workers * (count if cap is None else min(count, cap))


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
