"""The in-process/parallel choice: a small policy fed with measurements.

Shaped like joblib's ``AutoBatchingMixin``: the engine asks :meth:`DispatchPolicy.choose`
before each generation and reports each one with :meth:`DispatchPolicy.completed`. The
choice never changes a result (every task is seeded by its index and runs with one
torch thread on either path); it only decides where the time goes.

The model: with ``t`` the seconds one task takes and ``overhead`` the cost of one round
trip to the workers, ``n`` tasks cost ``n * t`` in this process and
``ceil(n / workers) * t + overhead`` in parallel. Both figures are robust to one cold
or noisy measurement: ``t`` is the median of the recent per-task times (both paths),
``overhead`` the *smallest* recent round-trip overhead (noise and cold starts only ever
add to it). So with ~5 ms tasks, 8 candidates and 2 workers, one slow first parallel
generation does not send the run back to one core, while trivial tasks stay in this
process (a parallel round would cost more than the whole generation).
"""
from __future__ import annotations

import collections
import math
import statistics
from typing import Any

PARALLEL = "parallel"
SEQUENTIAL = "sequential"


class DispatchPolicy:
    """Decides, per generation, whether ``n`` tasks go to the workers.

    - ``n_workers``: worker processes (chunks run at once);
    - ``fallback``: False always chooses parallel (e.g. with a task timeout);
    - ``window``: how many recent measurements each estimate looks at;
    - ``reprobe_every``: after this many in-process generations in a row, one goes
      parallel again to refresh the overhead, unless parallel is predicted more than
      ``hopeless`` times slower.
    """

    def __init__(self, n_workers: int, fallback: bool = True, window: int = 5,
                 reprobe_every: int = 20, hopeless: float = 3.0):
        self.n_workers = max(1, int(n_workers))
        self.fallback = fallback
        self.reprobe_every = reprobe_every
        self.hopeless = hopeless
        self._task = collections.deque(maxlen=window)  # seconds per task
        self._overhead = collections.deque(maxlen=window)  # seconds per parallel round
        self._sequential_run = 0  # in-process generations in a row
        self.counts = {PARALLEL: 0, SEQUENTIAL: 0}
        self.last: str | None = None

    # ------------------------------------------------------------------ estimates
    @property
    def task_seconds(self) -> float | None:
        return statistics.median(self._task) if self._task else None

    @property
    def overhead_seconds(self) -> float | None:
        return min(self._overhead) if self._overhead else None

    def predict(self, path: str, n: int) -> float | None:
        """Predicted wall seconds of ``n`` tasks on ``path`` (None: not measured yet)."""
        t = self.task_seconds
        if t is None:
            return None
        if path == SEQUENTIAL:
            return n * t
        overhead = self.overhead_seconds
        if overhead is None:
            return None
        return math.ceil(n / min(n, self.n_workers)) * t + overhead

    # ------------------------------------------------------------------ the protocol
    def choose(self, n: int) -> str:
        """:data:`PARALLEL` or :data:`SEQUENTIAL` for a generation of ``n`` tasks."""
        if n <= 1 or self.n_workers <= 1:
            return SEQUENTIAL if n <= 1 or self.fallback else PARALLEL
        if not self.fallback:
            return PARALLEL
        sequential, parallel = self.predict(SEQUENTIAL, n), self.predict(PARALLEL, n)
        if sequential is None or parallel is None:
            return PARALLEL  # measure it
        if parallel < sequential:
            return PARALLEL
        if self._sequential_run >= self.reprobe_every and \
                parallel < self.hopeless * sequential:
            return PARALLEL  # now and then: the machine's load may have changed
        return SEQUENTIAL

    def completed(self, path: str, n: int, wall: float, busy: float | None = None,
                  busiest: float | None = None) -> None:
        """Report ``n`` tasks done on ``path`` in ``wall`` seconds.

        In parallel, ``busy`` is the seconds all workers spent scoring (summed) and
        ``busiest`` the largest of one chunk: the round trip's overhead is what the wall
        time adds to the busiest chunk.
        """
        if n <= 0:
            return
        if path == SEQUENTIAL:
            self._task.append(wall / n)
            if n > 1:
                self._sequential_run += 1
                self.counts[SEQUENTIAL] += 1
                self.last = SEQUENTIAL
            return
        self._task.append((wall if busy is None else busy) / n)
        self.overhead(max(0.0, wall - (busiest if busiest is not None else wall)))
        self._sequential_run = 0
        self.counts[PARALLEL] += 1
        self.last = PARALLEL

    def overhead(self, seconds: float) -> None:
        """Report the overhead of one parallel round (e.g. an empty round at start-up)."""
        self._overhead.append(seconds)

    def stats(self) -> dict[str, Any]:
        """What the engine's ``stats`` show."""
        return {"task_seconds": self.task_seconds, "overhead_seconds": self.overhead_seconds,
                "last_path": self.last, "parallel_generations": self.counts[PARALLEL],
                "sequential_generations": self.counts[SEQUENTIAL]}
