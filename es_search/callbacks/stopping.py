"""Stopping rules: end a run early on a target score, a plateau or a time budget.

Each rule is a :class:`~es_search.callbacks.Callback` whose ``on_generation`` returns
True once the run should stop (the run stops after that generation, with its folder
and checkpoint complete). After stopping, ``rule.reason`` says why, in one sentence.

A run stopped by a rule resumes like any other: ``run(..., out=DIR, resume=True)`` with
more ``generations`` (and without the rule, or with a looser one) continues it, and the
result equals the run that was never stopped. Rules keep no state that a resume would
lose: :class:`EarlyStopping` rebuilds its count from the history the run hands to
``on_start``; :class:`MaxTime` measures the time of the present call only.
"""
from __future__ import annotations

import math
import time
from typing import Any

from ..checks import check_choice, check_int, check_number, check_positive_float
from .base import Callback, RunInfo

#: the history fields EarlyStopping can watch (higher is better for both)
MONITORED = ("best_score", "mean_score")


def _check_real(name: str, value: Any, *, minimum: float = -math.inf) -> float:
    return check_number(name, value, "a finite number" + (
        f" >= {minimum:g}" if minimum > -math.inf else ""),
        lambda v: math.isfinite(v) and v >= minimum)


class StopAtScore(Callback):
    """Stop once the best score so far reaches ``target`` (``best_score >= target``).

    >>> rule = StopAtScore(-0.5)
    >>> rule.on_generation({"generation": 0, "best_score": -2.0})
    False
    >>> rule.on_generation({"generation": 1, "best_score": -0.25})
    True
    >>> rule.reason
    'best_score -0.25 reached the target -0.5 at generation 1'
    """

    def __init__(self, target: float):
        self.target = _check_real("StopAtScore target", target)
        self.reason: str | None = None

    def on_start(self, info: RunInfo) -> None:
        self.reason = None

    def on_generation(self, record: dict) -> bool:
        best = record["best_score"]
        if best >= self.target:  # NaN (no finite score yet) never stops
            self.reason = (f"best_score {best:g} reached the target {self.target:g} at "
                           f"generation {record['generation']}")
            return True
        return False

    def __repr__(self) -> str:
        return f"StopAtScore({self.target!r})"


class EarlyStopping(Callback):
    """Stop when ``monitor`` has not improved by more than ``min_delta`` for ``patience``
    generations in a row (as Keras' ``EarlyStopping``; higher is better).

    - ``patience``: generations without improvement to accept (an integer >= 1);
    - ``min_delta``: the least increase that counts as an improvement (>= 0); smaller
      increases do not reset the count, even when they add up;
    - ``monitor``: ``"best_score"`` (the best so far, default) or ``"mean_score"`` (the
      generation's mean).

    On a resume the count is rebuilt from the generations already done, so a resumed
    run stops where an uninterrupted run with the same rule stops.

    >>> rule = EarlyStopping(patience=2)
    >>> [rule.on_generation({"generation": g, "best_score": s})
    ...  for g, s in enumerate([1.0, 2.0, 2.0, 2.0])]
    [False, False, False, True]
    >>> print(rule.reason)  # doctest: +NORMALIZE_WHITESPACE
    best_score has not improved by more than 0 for 2 generations (best 2 at generation 1;
    stopped after generation 3)
    """

    def __init__(self, patience: int, min_delta: float = 0.0, monitor: str = "best_score"):
        self.patience = check_int("EarlyStopping patience", patience, 1,
                                  " (generations without improvement)")
        self.min_delta = _check_real("EarlyStopping min_delta", min_delta, minimum=0.0)
        self.monitor = check_choice("EarlyStopping monitor", monitor, MONITORED)
        self._reset()

    def _reset(self) -> None:
        self.best = -math.inf
        self.best_generation: int | None = None
        self.wait = 0
        self.reason: str | None = None

    def on_start(self, info: RunInfo) -> None:
        """Rebuild the count from the generations already done (a resume)."""
        self._reset()
        for record in info.history:
            self._update(record)

    def _update(self, record: dict) -> bool:
        value = record[self.monitor]
        if value > self.best + self.min_delta or (self.best_generation is None
                                                  and value == value):
            self.best, self.best_generation, self.wait = value, record["generation"], 0
            return False
        self.wait += 1
        return self.wait >= self.patience

    def on_generation(self, record: dict) -> bool:
        if self._update(record):
            self.reason = (f"{self.monitor} has not improved by more than "
                           f"{self.min_delta:g} for {self.wait} generations (best "
                           f"{self.best:g} at generation {self.best_generation}; stopped "
                           f"after generation {record['generation']})")
            return True
        return False

    def __repr__(self) -> str:
        return (f"EarlyStopping(patience={self.patience}, min_delta={self.min_delta!r}, "
                f"monitor={self.monitor!r})")


class MaxTime(Callback):
    """Stop after the first generation that ends ``seconds`` or more after the run (or
    the resume) started: a wall-clock budget for this call of ``run()``.

    The run always completes the generation under way, so it can last longer than
    ``seconds`` by up to one generation. A resume gets a fresh budget.
    """

    def __init__(self, seconds: float):
        self.seconds = check_positive_float("MaxTime seconds", seconds)
        self.started: float | None = None
        self.reason: str | None = None

    def on_start(self, info: RunInfo) -> None:
        self.started = time.monotonic()
        self.reason = None

    def on_generation(self, record: dict) -> bool:
        if self.started is None:  # on_start was not called: count from now
            self.started = time.monotonic()
        elapsed = time.monotonic() - self.started
        if elapsed >= self.seconds:
            self.reason = (f"{elapsed:.3g} s elapsed, the time budget of {self.seconds:g} "
                           f"s is spent (after generation {record['generation']})")
            return True
        return False

    def __repr__(self) -> str:
        return f"MaxTime({self.seconds!r})"
