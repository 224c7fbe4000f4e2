"""The in-process/parallel choice: a small policy fed with measurements.

Shaped like joblib's ``AutoBatchingMixin``: the engine asks :meth:`DispatchPolicy.choose`
before each generation and reports each one with :meth:`DispatchPolicy.completed`. The
choice never changes a result (every task is seeded by its index and runs with one
torch thread on either path); it only decides where the time goes.

The model: with ``t`` the seconds one task takes and ``overhead`` the cost of one round
trip to the workers, ``n`` tasks cost ``n * t`` in this process and
``ceil(n / workers) * t + overhead`` in parallel, each path with its own ``t`` (a task
in a worker also loads its payload; the other path's ``t`` stands in until a path has
been timed, and a single in-process task, such as the start agent's score, before any
generation has run). ``t`` is the smallest of the path's last ``window`` per-task times
(a cold start or another program only ever add to it), ``overhead`` the median of the last
``window`` round trips (three empty ones timed at start-up first): one cold or noisy
measurement does not move them, a lasting change does within a few generations; a
parallel generation after ``window`` or more in this process starts the round trips'
window afresh (the older ones are stale).
When the losing path is predicted within ``close`` times the winner, it is tried: at
once if it was timed less than twice (a first measurement may be cold; the winner is
timed twice first), else after ``reprobe_every`` generations in a row on the winner
(twice as many after each try it loses). So with ~5 ms tasks, 8 candidates and 2
workers, one slow first parallel generation does not send the run back to one core,
while trivial tasks stay in this process (a parallel round costs more than the whole
generation there).
"""
from __future__ import annotations

import collections
import math
import statistics
from typing import Any

PARALLEL = "parallel"
SEQUENTIAL = "sequential"


def _other(path: str) -> str:
    return SEQUENTIAL if path == PARALLEL else PARALLEL


class DispatchPolicy:
    """Decides, per generation, whether ``n`` tasks go to the workers.

    - ``n_workers``: worker processes (chunks run at once);
    - ``fallback``: False always chooses parallel (e.g. with a task timeout);
    - ``window``: how many recent measurements each estimate looks at;
    - ``reprobe_every``, ``close``: when the losing path is tried again (see the module
      docstring).
    """

    def __init__(self, n_workers: int, fallback: bool = True, window: int = 5,
                 reprobe_every: int = 20, close: float = 1.5):
        self.n_workers = max(1, int(n_workers))
        self.fallback = fallback
        self.window = window
        self.reprobe_every = reprobe_every
        self.close = close
        self._task = {SEQUENTIAL: collections.deque(maxlen=window),  # seconds per task
                      PARALLEL: collections.deque(maxlen=window)}
        self._overhead = collections.deque(maxlen=window)  # seconds per parallel round
        self._hint: float | None = None  # seconds of a single task (see ``completed``)
        self._imbalance = collections.deque(maxlen=window)  # of parallel generations
        self._run = 0  # generations in a row on ``last``
        self._interval = {SEQUENTIAL: reprobe_every, PARALLEL: reprobe_every}
        self._reprobing: str | None = None
        self.counts = {PARALLEL: 0, SEQUENTIAL: 0}
        self.last: str | None = None

    # ------------------------------------------------------------------ estimates
    def path_task_seconds(self, path: str) -> float | None:
        """Seconds per task on ``path`` (the other path's while it has not run; a single
        task's before any generation has)."""
        times = self._task[path] or self._task[_other(path)]
        return min(times) if times else self._hint

    @property
    def task_seconds(self) -> float | None:
        times = list(self._task[SEQUENTIAL]) + list(self._task[PARALLEL])
        return statistics.median(times) if times else None

    @property
    def imbalance(self) -> float | None:
        """How much longer the busiest worker's share of a generation ran than the
        average share (0.1: 10%), median of the last ``window`` parallel generations;
        None before the first. Decides how finely generations are cut into chunks."""
        return statistics.median(self._imbalance) if self._imbalance else None

    @property
    def overhead_seconds(self) -> float | None:
        return statistics.median(self._overhead) if self._overhead else None

    def predict(self, path: str, n: int) -> float | None:
        """Predicted wall seconds of ``n`` tasks on ``path`` (None: not measured yet)."""
        t = self.path_task_seconds(path)
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
        predicted = {SEQUENTIAL: self.predict(SEQUENTIAL, n),
                     PARALLEL: self.predict(PARALLEL, n)}
        if None in predicted.values():
            return PARALLEL  # measure it
        best = PARALLEL if predicted[PARALLEL] < predicted[SEQUENTIAL] else SEQUENTIAL
        other = _other(best)
        if self._reprobing is not None:  # the last generation re-probed a path
            probed, self._reprobing = self._reprobing, None
            self._interval[probed] = (self.reprobe_every if best == probed
                                      else 2 * self._interval[probed])
        ratio = predicted[other] / max(predicted[best], 1e-12)
        if ratio >= self.close:
            return best
        # a first measurement may be cold: time the winner twice, then the loser
        if len(self._task[best]) < 2:
            return best
        if len(self._task[other]) < 2:
            return other
        # now and then the other path again, when close (a measurement may have been
        # unlucky, the machine's load may have changed); each one that loses doubles
        # the wait
        if self.last == best and self._run >= self._interval[other]:
            self._reprobing = other
            return other
        return best

    def completed(self, path: str, n: int, wall: float, busy: float | None = None,
                  busiest: float | None = None, imbalance: float | None = None) -> None:
        """Report ``n`` tasks done on ``path`` in ``wall`` seconds.

        In parallel, ``busy`` is the seconds all workers spent scoring (summed) and
        ``busiest`` the largest of one chunk: the round trip's overhead is what the wall
        time adds to the busiest chunk; ``imbalance`` how much longer the busiest
        worker's share ran than the average one (see :attr:`imbalance`). A single task in this process (the start agent's
        score, a winner's re-score) is only a hint, used while no generation has been
        timed: it is usually a centre, which costs no build, and would make a generation
        of built candidates (e.g. of a 10^6-parameter agent) look cheap here.
        """
        if n <= 0:
            return
        if path == SEQUENTIAL and n == 1:
            self._hint = wall
        elif path == SEQUENTIAL:
            self._task[SEQUENTIAL].append(wall / n)
        else:
            if self.last == SEQUENTIAL and self._run >= self.window:
                # a re-probe after a while in this process: the round trips measured
                # before are stale (a cold or busy start would otherwise keep the run
                # here for re-probe after re-probe, each waiting twice as long)
                self._overhead.clear()
            self._task[PARALLEL].append((wall if busy is None else busy) / n)
            self.overhead(max(0.0, wall - (busiest if busiest is not None else wall)))
            if imbalance is not None:
                self._imbalance.append(imbalance)
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
                "imbalance": self.imbalance,
                "last_path": self.last, "parallel_generations": self.counts[PARALLEL],
                "sequential_generations": self.counts[SEQUENTIAL]}
