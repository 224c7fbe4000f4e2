"""The run directory (``out=DIR``): written as the run goes, so a crash loses nothing.

- ``config.json``: what defines the run (written first);
- ``history.jsonl``: one JSON line per generation, appended and fsynced each generation;
- ``best_weights.pt``: ``torch.save`` of the best weights (a state dict), replaced
  atomically whenever the best improves;
- ``checkpoint.pkl``: everything needed to continue the run (``es_search.checkpoint``),
  replaced atomically every generation, before that generation's history line;
- ``failures/generation-<g>.pkl``: what ``es_search.replay_task`` needs to rerun the
  tasks of generation ``g`` that failed;
- ``result.json``: the summary, at the end;
- ``plot.png``: best and mean score per generation, at the end, when matplotlib is
  installed.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any, Callable

import torch

HISTORY = "history.jsonl"
CONFIG = "config.json"
BEST_WEIGHTS = "best_weights.pt"
RESULT = "result.json"
PLOT = "plot.png"


def atomic_write(path: Path, write: Callable[[Any], None], mode: str = "wb") -> None:
    """Write through a temporary file in the same folder, fsync, then ``os.replace``."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, mode) as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def to_json(value: Any) -> Any:
    """JSON-safe: non-finite floats become strings ("nan", "inf", "-inf")."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return repr(value)


def from_json(value: Any) -> Any:
    """Inverse of :func:`to_json` for floats."""
    if value in ("nan", "inf", "-inf"):
        return float(value)
    if isinstance(value, dict):
        return {k: from_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [from_json(v) for v in value]
    return value


def dump_json(path: Path, data: Any) -> None:
    text = json.dumps(to_json(data), indent=2, sort_keys=True)
    atomic_write(path, lambda f: f.write(text + "\n"), mode="w")


def read_history(path: Any) -> list[dict]:
    """The records of a ``history.jsonl`` (non-finite floats restored)."""
    with open(path) as f:
        return [from_json(json.loads(line)) for line in f if line.strip()]


class RunDirectory:
    """Writes one run's files into ``path`` as the run goes."""

    def __init__(self, path: Any, config: dict, append: bool = False):
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)
        dump_json(self.path / CONFIG, config)
        self._history = open(self.path / HISTORY, "a" if append else "w")
        self._digest = hashlib.sha256()  # of the history lines this object wrote
        self.history_lines = 0

    def record(self, record: dict, best_weights: dict | None) -> None:
        """Append one generation; save ``best_weights`` when given (the best improved)."""
        line = json.dumps(to_json(record)) + "\n"
        self._history.write(line)
        self._history.flush()
        os.fsync(self._history.fileno())
        self._digest.update(line.encode())
        self.history_lines += 1
        if best_weights is not None:
            self.save_weights(best_weights)

    def history_digest(self) -> str:
        """SHA-256 of the history lines written so far (a checkpoint holds it)."""
        return self._digest.hexdigest()

    def rewrite_history(self, lines: list[str]) -> None:
        """Replace ``history.jsonl`` with ``lines`` (atomically), then append after them."""
        self._history.close()
        text = "".join(lines)
        atomic_write(self.path / HISTORY, lambda f: f.write(text), mode="w")
        self._history = open(self.path / HISTORY, "a")
        self._digest = hashlib.sha256(text.encode())
        self.history_lines = len(lines)

    def save_weights(self, weights: dict) -> None:
        atomic_write(self.path / BEST_WEIGHTS, lambda f: torch.save(weights, f))

    def finish(self, summary: dict, history: list[dict]) -> None:
        dump_json(self.path / RESULT, summary)
        try:
            from .plotting import plot_history
            plot_history(history, self.path / PLOT)
        except ImportError:
            pass

    def close(self) -> None:
        if not self._history.closed:
            self._history.close()
