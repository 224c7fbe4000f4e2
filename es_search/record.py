"""The history record: one plain ``dict`` per generation (``Result.history``,
``history.jsonl``, callbacks), its fields defined here only:

- ``generation``: 0, 1, ...;
- ``best_score``: the best finite score so far (the starting agent's included);
- ``mean_score``: the mean of this generation's finite scores (NaN if none);
- ``scores``: every candidate's score, in candidate order;
- ``sigma``: the strategy's step size after this generation;
- ``nonfinite``: scores that were NaN or +-inf (not counting failures);
- ``failures``: ``score()`` calls that raised (``on_error="worst"``; scored -inf);
- ``evaluations``: ``score()`` calls so far, the starting agent's included;
- ``seconds``: wall-clock time spent, summed over resumes (``TIMING_FIELDS``);
- counters the agent's ``merge_reports()`` returns (e.g. ``steps``), cumulative.
"""
from __future__ import annotations

from typing import Mapping, Sequence

from .scores import count_nonfinite, finite_mean

#: fields that differ between two runs with the same seed
TIMING_FIELDS = ("seconds",)


def make_record(*, generation: int, best_score: float, scores: Sequence[float],
                sigma: float, failures: int, evaluations: int, seconds: float,
                counters: Mapping[str, float] | None = None) -> dict:
    """One generation's record (see the module docstring)."""
    scores = list(scores)
    record = {"generation": generation, "best_score": best_score,
              "mean_score": finite_mean(scores), "scores": scores, "sigma": sigma,
              "nonfinite": count_nonfinite(scores) - failures, "failures": failures,
              "evaluations": evaluations, "seconds": seconds}
    for name, value in (counters or {}).items():
        if name in record:
            raise ValueError(f"merge_reports() returned a counter named {name!r}, which is "
                             f"a field of the history record; rename it")
        record[name] = value
    return record


def reproducible(record: Mapping) -> dict:
    """``record`` without the fields that depend on timing."""
    return {k: v for k, v in record.items() if k not in TIMING_FIELDS}
