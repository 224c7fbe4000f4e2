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

import math
from typing import Mapping, Sequence

#: fields that differ between two runs with the same seed
TIMING_FIELDS = ("seconds",)


def make_record(*, generation: int, best_score: float, scores: Sequence[float],
                sigma: float, failures: int, evaluations: int, seconds: float,
                counters: Mapping[str, float]) -> dict:
    """One generation's record (see the module docstring)."""
    scores = list(scores)
    finite = [s for s in scores if math.isfinite(s)]
    record = {"generation": generation, "best_score": best_score,
              "mean_score": sum(finite) / len(finite) if finite else math.nan,
              "scores": scores, "sigma": sigma,
              "nonfinite": len(scores) - len(finite) - failures, "failures": failures,
              "evaluations": evaluations, "seconds": seconds}
    for name, value in counters.items():
        if name in record:
            raise ValueError(f"merge_reports() returned a counter named {name!r}, which is "
                             f"a field of the history record; rename it")
        record[name] = value
    return record

