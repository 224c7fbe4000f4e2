"""Argument checks that fail at the call, with a message that says how to fix it."""
from __future__ import annotations

import math
import numbers
from typing import Any


def check_int(name: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer >= {minimum}, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return int(value)


def check_positive_float(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a positive finite number, got {value!r}")
    value = float(value)
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a positive finite number, got {value}")
    return value


def check_n_jobs(value: Any) -> int:
    """joblib's meaning: -1 all cores, -2 all but one, 1 a plain loop; 0 is an error."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"n_jobs must be an integer (-1 = all cores, 1 = no parallelism), "
                        f"got {value!r}")
    if value == 0:
        raise ValueError("n_jobs=0 means no workers; use n_jobs=-1 for all cores or "
                         "n_jobs=1 for a plain loop in this process")
    return int(value)


def check_seed(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
        raise TypeError(f"seed must be a non-negative integer, got {value!r}")
    return int(value)
