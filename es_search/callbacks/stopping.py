"""Stopping rules: end a run early on a target score, a plateau or a time budget.
``rule.reason`` says why it stopped; a stopped run resumes like any other."""
from __future__ import annotations

import math
import time

from ..checks import check_choice, check_int, check_number, check_positive_float
from .base import Callback, RunInfo


class _Rule(Callback):
    """A stopping rule: ``_why(record)`` says why the run stops now, or None; ``_ARGS``
    name its settings."""

    reason: str | None = None
    _ARGS: tuple = ()

    def on_start(self, info: RunInfo) -> None:
        self.reason = None

    def on_generation(self, record: dict) -> bool:
        self.reason = self._why(record)
        return self.reason is not None

    def __repr__(self) -> str:
        args = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._ARGS)
        return f"{type(self).__name__}({args})"


class StopAtScore(_Rule):
    """Stop once the best score so far reaches ``target`` (``best_score >= target``)."""

    _ARGS = ("target",)

    def __init__(self, target: float):
        self.target = check_number("StopAtScore target", target)

    def _why(self, record: dict) -> str | None:
        best = record["best_score"]
        if best >= self.target:  # NaN (no finite score yet) never stops
            return (f"best_score {best:g} reached the target {self.target:g} at "
                    f"generation {record['generation']}")
        return None


class EarlyStopping(_Rule):
    """Stop when ``monitor`` has not improved by more than ``min_delta`` for ``patience``
    generations in a row (as Keras' ``EarlyStopping``; higher is better).

    ``min_delta``: the least increase that counts (smaller ones do not add up);
    ``monitor``: ``"best_score"`` or ``"mean_score"``. A resume rebuilds the count."""

    _ARGS = ("patience", "min_delta", "monitor")

    def __init__(self, patience: int, min_delta: float = 0.0, monitor: str = "best_score"):
        self.patience = check_int("EarlyStopping patience", patience, 1,
                                  " (generations without improvement)")
        self.min_delta = check_number("EarlyStopping min_delta", min_delta,
                                      "a finite number >= 0", lambda v: math.isfinite(v) and v >= 0)
        self.monitor = check_choice("EarlyStopping monitor", monitor,
                                    ("best_score", "mean_score"))
        self._reset()

    def _reset(self) -> None:
        self.best, self.best_generation, self.wait = -math.inf, None, 0

    def on_start(self, info: RunInfo) -> None:
        super().on_start(info)
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

    def _why(self, record: dict) -> str | None:
        if not self._update(record):
            return None
        return (f"{self.monitor} has not improved by more than {self.min_delta:g} for "
                f"{self.wait} generations (best {self.best:g} at generation "
                f"{self.best_generation}; stopped after generation {record['generation']})")


class MaxTime(_Rule):
    """Stop after the first generation that ends ``seconds`` or more after this call of
    ``run()`` started (a resume gets a fresh budget)."""

    _ARGS = ("seconds",)

    def __init__(self, seconds: float):
        self.seconds = check_positive_float("MaxTime seconds", seconds)
        self.started: float | None = None

    def on_start(self, info: RunInfo) -> None:
        super().on_start(info)
        self.started = time.monotonic()

    def _why(self, record: dict) -> str | None:
        if self.started is None:  # on_start was not called: count from now
            self.started = time.monotonic()
        elapsed = time.monotonic() - self.started
        if elapsed < self.seconds:
            return None
        return (f"{elapsed:.3g} s elapsed, the time budget of {self.seconds:g} s is spent "
                f"(after generation {record['generation']})")
