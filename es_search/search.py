"""What a run carries from one generation to the next, and one generation's step."""
from __future__ import annotations

import copy
import math
import time
from typing import Any

import numpy as np

from .agent import weights_of
from .callbacks.base import Failures, Generation
from .candidates import Candidate
from .errors import ScoreError, WorkerError
from .evaluation import Scored
from .record import make_record
from .scores import best_index
from .selection import Snapshots


class Search:
    """The strategy and its state, the best score and weights so far (with the agent's
    shared state they were scored with), the evaluation count, the counters
    ``merge_reports()`` returned, the history and the centres kept for the end's selection
    test (:class:`~es_search.selection.Snapshots`). ``start``, ``resume`` (from a
    checkpoint) and ``step`` (one generation) each hand back the outcome that ``run()``
    passes to the callbacks (:class:`~es_search.callbacks.Generation`)."""

    def __init__(self, strategy: Any, evaluator: Any):
        self.strategy, self.evaluator = strategy, evaluator
        self.snapshots = Snapshots()
        self.state: Any = None
        self.best_score = float("nan")
        self.best: dict | None = None  # its weights (and the shared state scored with)
        self.evaluations = 0
        self.counters: dict[str, float] = {}
        self.history: list[dict] = []  # one record per generation done

    def start(self, seed: int) -> Generation:
        """Score the starting agent (generation -1, as often as the strategy's
        ``initial_evaluations``, each under its own task seed) and initialise the
        strategy; the outcome (no record)."""
        self._zero = time.perf_counter()  # the clock at 0 seconds (summed over resumes)
        center = self.evaluator.local.get_flat()
        candidates = [Candidate("center")] * self.strategy.initial_evaluations
        scored = self._score(-1, center, candidates)
        self.evaluations = len(candidates)
        self.state = self.strategy.init_from(center, scored.scores, seed)
        # a non-finite start never counts as the best: NaN until a finite score comes
        first = scored.scores[0]
        self.best_score = first if math.isfinite(first) else math.nan
        self.best = weights_of(self.evaluator.local, center, scored.shared)
        self._merge(scored)
        return self._outcome({}, True, (-1, center, candidates), scored)

    def resume(self, saved: dict) -> Generation:
        """Continue from a checkpoint's contents; the outcome (no record)."""
        self.state, self.evaluations = saved["state"], saved["evaluations"]
        self.best_score, self.best = saved["best_score"], saved["best_weights"]
        self.counters = dict(saved["counters"])
        self.snapshots = saved["snapshots"]
        self.history = list(saved["history"])
        self._zero = time.perf_counter() - (self.history[-1]["seconds"] if self.history else 0.0)
        if saved["shared"]:
            self.evaluator.local.load_shared_state(saved["shared"])
        return self._outcome({}, False)

    def _outcome(self, record: dict, improved: bool, asked: tuple = (),
                 scored: Scored | None = None) -> Generation:
        """The outcome the callbacks get, with the tasks of ``asked`` (generation, centre,
        candidates) that ``scored`` tolerated (``on_error="worst"``); its ``checkpoint``:
        what continuing after the history's generations needs, as of now (the shared state
        a copy, as the tasks get it; the run folder adds the history's digest, the config)."""
        evaluator = self.evaluator
        failures = Failures(*asked, [f.index for f in scored.failures], scored.failures,
                            scored.shared) if scored and scored.failures else None
        checkpoint = {
            "generation": len(self.history), "strategy": self.strategy,
            "state": self.state, "best_score": self.best_score, "best_weights": self.best,
            "evaluations": self.evaluations, "counters": dict(self.counters),
            "snapshots": copy.copy(self.snapshots),
            "shared": evaluator.shared_state()}
        stats = evaluator.stats if scored is None else scored.stats
        return Generation(record, improved, failures, stats, checkpoint)

    def step(self) -> Generation:
        """Run the next generation (``len(history)``); its outcome."""
        generation = len(self.history)
        strategy, evaluator = self.strategy, self.evaluator
        center = strategy.center(self.state)
        candidates = strategy.ask(self.state, generation)
        scored = self._score(generation, center, candidates)
        scores = scored.scores
        self.evaluations += len(scores)

        rebuilt: dict[int, Any] = {}

        def rebuild(i: int) -> Any:  # candidate i's vector, built once
            if i not in rebuilt:
                rebuilt[i] = evaluator.rebuild(generation, center, candidates[i], i)
            return rebuilt[i]

        self.state = strategy.tell(self.state, generation, candidates, scores, rebuild)
        top, best = best_index(scores), self.best_score  # best: finite, or NaN (none yet)
        improved = top is not None and (math.isnan(best) or scores[top] > best)
        if improved:  # kept as handed back: a weights dict, made once
            self.best_score = scores[top]
            self.best = weights_of(evaluator.local, rebuild(top), scored.shared)
        self._merge(scored)
        record = make_record(
            generation=generation, best_score=self.best_score, scores=scores,
            sigma=strategy.sigma(self.state), failures=len(scored.failures),
            evaluations=self.evaluations, seconds=time.perf_counter() - self._zero,
            counters=self.counters)
        self.history.append(record)
        self.snapshots.add(generation + 1, self.center_weights)
        return self._outcome(record, improved, (generation, center, candidates), scored)

    def center_weights(self) -> dict:
        """The strategy's centre now (its mean; a hill climber's parent), with the
        agent's shared state now: what the next generation would start from."""
        local = self.evaluator.local
        return weights_of(local, self.strategy.center(self.state), local.shared_state())

    def snapshot_weights(self) -> dict[str, dict]:
        """The kept centres, the latest first, by name ``"center@G"`` (after G
        generations), with the shared state of their time."""
        return {f"center@{g}": weights
                for g, weights in sorted(self.snapshots.kept.items(), reverse=True)}

    def _score(self, generation: int, center: np.ndarray, candidates: list) -> Scored:
        """The evaluator's scores; its errors carry the :class:`Failures` to replay."""
        try:
            return self.evaluator.score(generation, center, candidates)
        except (ScoreError, WorkerError) as exc:
            failed = [exc.index] if isinstance(exc, ScoreError) else exc.indices
            exc.failures = Failures(generation, center, candidates, failed, repr(exc),
                                    self.evaluator.shared_state())
            raise

    def _merge(self, scored: Scored) -> None:
        """Fold a generation's reports into the shared state, in candidate order."""
        if not self.evaluator.hooks:
            return
        counters = self.evaluator.local.merge_reports(list(scored.reports))
        for name, value in (counters or {}).items():
            self.counters[name] = self.counters.get(name, 0) + value

