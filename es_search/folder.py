"""The run folder (``out=DIR``): the names of its files, and :class:`RunDir`, through which
every reader opens it (:class:`~es_search.output.RunFolder`, a subclass, writes it)."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import torch

from . import checkpoint as _checkpoint
from .files import from_json
from .settings import has_digest

CONFIG = "config.json"  # the run's spec (es_search.spec) and what run() recorded
HISTORY = "history.jsonl"  # one record per generation (es_search.record), fsynced
CHECKPOINT = "checkpoint.pkl"  # es_search.checkpoint's, and the best weights (with their
BEST_WEIGHTS = "best_weights.pt"  # shared state), replaced together every checkpoint_every
FAILURES = "failures"  # generation-<g>.pkl: what replay_task needs to rerun failed tasks
SCORE_KWARGS = "score_kwargs.pkl"  # the run's score_kwargs (the config holds digests)
LOCK = ".lock"  # held while a run writes the folder (es_search.lock)
RESULT = "result.json"  # AT_THE_END: written when the run ends, removed when it goes on
CENTER_WEIGHTS = "center_weights.pt"
CHOSEN_WEIGHTS = "chosen_weights.pt"  # es_search.selection's choice
PLOT = "plot.png"
TEST = "test.json"  # es-search run and test
AT_THE_END = (RESULT, CENTER_WEIGHTS, CHOSEN_WEIGHTS, PLOT, TEST)


class OutFolderError(ValueError):
    """The out folder cannot be created or written, is in use, or holds a run."""


class RunDir:
    """The run saved in folder ``path``, read."""

    def __init__(self, path: Any):
        self.path = Path(path).expanduser()

    def _json(self, name: str) -> dict:
        """The JSON object in file ``name`` (non-finite floats restored), or {}."""
        try:
            value = from_json(json.loads((self.path / name).read_text()))
        except (OSError, ValueError):
            return {}
        return value if isinstance(value, dict) else {}

    @property
    def config(self) -> dict:
        return self._json(CONFIG)

    def end(self) -> dict:
        """``result.json``, written at the run's end, or {}."""
        return self._json(RESULT)

    def test(self, center: bool) -> dict | None:
        """``test.json``'s figures, or None when missing or lacking the centre's (``center``)."""
        figures = self._json(TEST)
        if isinstance(figures.get("best"), dict) and (
                not center or isinstance(figures.get("center"), dict)):
            return figures
        return None

    def check_agent(self, agent: Any, recorded: str, n: int) -> None:
        """Refuse an agent other than the run's (class path ``recorded``, ``n`` values)."""
        if not recorded.endswith("." + type(agent).__qualname__) or agent.num_evolved() != n:
            raise ValueError(f"the run in {self.path} evolved {recorded} ({n} evolved "
                             f"values); the agent given is {type(agent).__module__}."
                             f"{type(agent).__qualname__} ({agent.num_evolved()}): pass an "
                             f"agent built as the run's was")

    def spec(self) -> dict:
        """``config.json``'s spec; :class:`OutFolderError` if ``es-search run`` did not
        write the folder."""
        if not self.path.is_dir():
            raise OutFolderError(f"no such run folder: {self.path}" if not self.path.exists()
                                 else f"{self.path} is not a folder (pass the run's --out DIR)")
        config = self.config
        if not config.get("spec"):
            raise OutFolderError(
                f"{self.path} has no {CONFIG} with a problem: it was not written by "
                f"`es-search run PROBLEM --out DIR`" + (
                    " (a run from Python: es_search.Result.load(DIR, agent))" if config
                    else ""))
        return config["spec"]

    def generations(self) -> int | None:
        """How many generations the run recorded, or None when it holds no run (a
        checkpoint alone holds only the starting agent's score)."""
        try:
            with open(self.path / HISTORY, "rb") as f:
                lines = sum(1 for line in f if line.endswith(b"\n"))
        except OSError:
            lines = 0
        return lines if lines or (self.path / RESULT).exists() else None

    def checkpoint(self) -> dict:
        """The checkpoint of a run that has done a generation, with its ``history`` (else
        :class:`OutFolderError`)."""
        if not (self.path / CHECKPOINT).is_file():
            raise OutFolderError(f"{self.path} holds no run to load (no {CHECKPOINT}); it is "
                                 f"written by es_search.run(..., out=DIR) or es-search run "
                                 f"--out DIR")
        saved = _checkpoint.load(self.path / CHECKPOINT)
        if not saved["history_lines"]:
            raise OutFolderError(f"{self.path} holds no run to load: it stopped before its "
                                 f"first generation (start it again: it may be replaced)")
        saved["history"] = self.history(saved["history_lines"], saved["history_sha256"])[0]
        return saved

    def weights(self, which: str) -> dict | None:
        """The ``"best"``, ``"center"`` or ``"chosen"`` weights (None when not saved), loaded
        with ``weights_only=True``."""
        path = self.path / f"{which}_weights.pt"  # BEST_WEIGHTS, ...
        if not path.is_file():
            return None
        try:
            return torch.load(path, weights_only=True)
        except Exception as exc:  # noqa: BLE001 - a torn or foreign file: one line
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            if "weights_only" in first or "Weights only load failed" in first:
                first = "not tensors as es_search saves them: a torn or foreign file"
            raise OutFolderError(f"cannot load {path} as saved weights "
                                 f"({type(exc).__name__}: {first})") from None

    def history(self, lines: int, digest: str) -> tuple[list[dict], list[str]]:
        """The first ``lines`` records of ``history.jsonl`` and their raw lines, checked
        against a checkpoint's SHA-256 ``digest``; later lines are ignored."""
        path = self.path / HISTORY
        try:
            with open(path, "rb") as f:
                raw = [f.readline() for _ in range(lines)]
        except FileNotFoundError:
            raw = []
        if len([r for r in raw if r.endswith(b"\n")]) != lines or \
                hashlib.sha256(b"".join(raw)).hexdigest() != digest:
            raise _checkpoint.CheckpointError(
                f"{path} does not hold the {lines} history line(s) the checkpoint in "
                f"{self.path} was written after (missing, shortened or edited), so the run "
                f"cannot be resumed consistently. Restore the file, or start the run again "
                f"in another folder.")
        text = [r.decode() for r in raw]
        return [from_json(json.loads(t)) for t in text], text

    def score_kwargs(self, recorded: dict) -> dict:
        """``score_kwargs.pkl``, or ``recorded`` when it holds values, not digests."""
        path = self.path / SCORE_KWARGS
        if path.is_file():
            return _checkpoint.load(path)
        if has_digest(recorded):
            raise OutFolderError(f"{self.path} has no {SCORE_KWARGS}, and its config holds "
                                 f"only digests of the run's score_kwargs; pass score_kwargs=")
        return dict(recorded or {})

    def failure_path(self, generation: int) -> Path:
        return self.path / FAILURES / f"generation-{generation}.pkl"

    def failure_generations(self) -> list[int]:
        """The generations the folder holds failure records for, in order."""
        return sorted(int(p.stem.split("-", 1)[1])
                      for p in (self.path / FAILURES).glob("generation-*.pkl"))
