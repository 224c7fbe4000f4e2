"""How a generation's candidates are cut into chunks, one place for all three
questions: where (:func:`chunk_bounds`), how many (:func:`chunk_count`, from the task
time and the measured :func:`imbalance` of the workers' shares). Results never depend
on the cut: every task is seeded by its index, every group is cut at fixed indices.
"""
from __future__ import annotations

from typing import Sequence


def chunk_bounds(n: int, parts: int, group: int = 0) -> list[tuple[int, int]]:
    """How ``n`` candidates are cut into chunks for ``parts`` workers: contiguous,
    near-equal ``(start, stop)`` ranges covering ``range(n)``, in order.

    With batching (``group`` > 0, the agent's :func:`group_size`) chunks are unions of
    whole groups, near-equal in groups, so that every group is scored whole. Results do
    not depend on the cut (every task is seeded by its index, every group is cut at
    fixed indices); it is the one place that decides it.
    """
    group = max(group, 1)
    groups = -(-n // group)
    parts = max(1, min(parts, groups))
    bounds = [min(n, group * (groups * k // parts)) for k in range(parts + 1)]
    return [(bounds[k], bounds[k + 1]) for k in range(parts) if bounds[k] < bounds[k + 1]]


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
