"""Which fields of a history record the tracking callbacks log, and how."""
from __future__ import annotations

import json
import numbers
from typing import Iterator

from ..output import to_json

#: logged first, in this order, when present; other numeric fields follow
MAIN = ("best_score", "mean_score", "sigma", "evaluations", "seconds")


def scalars(record: dict) -> Iterator[tuple[str, float]]:
    """``(name, value)`` for each number in ``record`` but ``generation``, ``MAIN`` first."""
    names = [k for k in MAIN if k in record] + [k for k in record if k not in MAIN]
    for name in names:
        value = record[name]
        if name == "generation" or isinstance(value, bool):
            continue
        if isinstance(value, numbers.Real):
            yield name, float(value)


def flatten(config: dict, prefix: str = "") -> dict[str, str]:
    """``{"strategy": {"sigma": 0.1}}`` -> ``{"strategy.sigma": "0.1"}`` (strings)."""
    flat: dict[str, str] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            flat.update(flatten(value, name + "."))
        elif isinstance(value, str):
            flat[name] = value
        else:
            flat[name] = json.dumps(to_json(value))
    return flat


def config_text(config: dict) -> str:
    """The config as indented JSON (for text summaries)."""
    return json.dumps(to_json(config), indent=2, sort_keys=True)
