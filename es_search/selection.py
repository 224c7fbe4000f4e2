"""The run's answer: of the best evaluation and the final centre, the one that tests best.

The best weights are the luckiest single evaluation: on a noisy score, not what to
deploy. At the end of a run both are scored on the same ``select_tasks`` fresh tasks
(generation ``SELECTION_GENERATION``, which no search reaches); the higher mean is
handed back (``Result.chosen``; a tie or NaN keeps the best). Nothing is tested when
the centre is the best, or the score ignores its task seed.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from .checks import check_int
from .errors import SettingError
from .scores import same_score

SELECTION_GENERATION = 2 ** 32 - 1
SELECT_TASKS = 16
BEST, CENTER = "best", "center"


def check_select_tasks(value: Any) -> int:
    """``select_tasks`` as an int: 0 (off) or 2 or more."""
    tasks = check_int("select_tasks", value, 0, " (0: off)")
    if tasks == 1:
        raise SettingError("select_tasks", value, "0 (off) or an integer >= 2: one task "
                                                  "cannot tell a score that ignores its "
                                                  "task seed")
    return tasks


def same_weights(best: dict, center: dict | None) -> bool:
    """Whether the final ``center`` is the ``best`` weights."""
    return center is not None and center.keys() == best.keys() and all(
        torch.equal(torch.as_tensor(center[k]), torch.as_tensor(best[k])) for k in best)


def select(evaluator: Any, best: dict, center: dict | None,
           tasks: int) -> tuple[str, dict | None]:
    """``(chosen, selection)``: ``"best"`` or ``"center"``, and each one's figures
    (``{"mean", "std", "n"}``; None when nothing was tested), scored on ``evaluator``."""
    if not tasks or center is None or same_weights(best, center):
        return BEST, None
    scored = {BEST: evaluator.evaluate([best] * tasks, SELECTION_GENERATION)}
    if all(same_score(s, scored[BEST][0]) for s in scored[BEST]):
        return BEST, None  # the score ignores its task seed: the search ranked it exactly
    scored[CENTER] = evaluator.evaluate([center] * tasks, SELECTION_GENERATION)
    with np.errstate(invalid="ignore"):  # a failed task's -inf: the std is NaN
        selection = {name: {"mean": float(np.mean(v)), "std": float(np.std(v)), "n": len(v)}
                     for name, v in scored.items()}
    better = selection[CENTER]["mean"] > selection[BEST]["mean"]  # NaN: False
    return (CENTER if better else BEST), selection


def describe(chosen: str, selection: dict | None) -> str:
    """One line for a person: what the run hands back and both figures.

    >>> describe("center", {"best": {"mean": 763.0, "std": 946.0, "n": 16},
    ...                     "center": {"mean": 2942.0, "std": 29.0, "n": 16}})
    'handed back: the final centre, 2942 +- 29 on 16 fresh tasks (the best evaluation: 763 +- 946)'
    """
    names = {BEST: "the best evaluation", CENTER: "the final centre"}
    if selection is None:
        return f"handed back: {names[chosen]}"
    other = CENTER if chosen == BEST else BEST
    text = {name: f"{f['mean']:.6g} +- {f['std']:.3g}" if math.isfinite(f["mean"])
            else f"{f['mean']}" for name, f in selection.items()}
    return (f"handed back: {names[chosen]}, {text[chosen]} on {selection[chosen]['n']} "
            f"fresh tasks ({names[other]}: {text[other]})")
