"""The run folder (``out=DIR``): the names of its files, :class:`RunDir`, through which
every reader opens it, and :class:`RunFolder`, the callback that writes it as the run goes."""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any

import torch

from . import checkpoint as _checkpoint
from .agent import class_path
from .checks import check
from .errors import SettingError
from .files import atomic_write, dump_json, from_json, to_json
from .interrupt import deferred_sigint
from .lock import LOCK, OutFolderError, acquire
from .settings import Settings

CONFIG = "config.json"  # the run's spec (es_search.spec) and what run() recorded
HISTORY = "history.jsonl"  # one record per generation (es_search.record), fsynced
CHECKPOINT = "checkpoint.pkl"  # es_search.checkpoint's, and the best weights (with their
BEST_WEIGHTS = "best_weights.pt"  # shared state), replaced together every checkpoint_every
FAILURES = "failures"  # generation-<g>.pkl: what replay_task needs to rerun failed tasks
SCORE_KWARGS = "score_kwargs.pkl"  # the run's score_kwargs (the config holds digests)
RESULT = "result.json"  # AT_THE_END: written when the run ends, removed when it goes on
CENTER_WEIGHTS = "center_weights.pt"
CHOSEN_WEIGHTS = "chosen_weights.pt"  # es_search.selection's choice
PLOT = "plot.png"
TEST = "test.json"  # es-search run and test
AT_THE_END = (RESULT, CENTER_WEIGHTS, CHOSEN_WEIGHTS, PLOT, TEST,
              "policy.pt", "policy.onnx")  # es-search export's (FORMATS), of the answer
OWN = (CONFIG, HISTORY, CHECKPOINT, BEST_WEIGHTS, FAILURES, SCORE_KWARGS, LOCK, *AT_THE_END)


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

    def owns(self, path: Any) -> str | None:
        """The name of the folder's own file (or folder) that ``path`` is or lies in."""
        path = Path(path).expanduser().resolve()
        return next((name for name in OWN if (self.path / name).resolve() in
                     (path, *path.parents)), None)

    def end(self) -> dict:
        """``result.json``, written at the run's end, or {}."""
        return self._json(RESULT)

    def test(self, names: Any) -> dict | None:
        """``test.json``'s figures, or None when missing or lacking those of ``names``."""
        figures = self._json(TEST)
        return figures if all(isinstance(figures.get(n), dict) for n in names) else None

    def check_agent(self, agent: Any, recorded: str, n: int) -> None:
        """Refuse an agent other than the run's (class path ``recorded``, ``n`` values)."""
        if not recorded.endswith("." + type(agent).__qualname__) or agent.num_evolved() != n:
            raise ValueError(f"the run in {self.path} evolved {recorded} ({n} evolved "
                             f"values); the agent given is {class_path(type(agent))} "
                             f"({agent.num_evolved()}): pass an agent built as the run's was")

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
        if not saved["generation"]:
            raise OutFolderError(f"{self.path} holds no run to load: it stopped before its "
                                 f"first generation (start it again: it may be replaced)")
        return self.with_history(saved)

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

    def with_history(self, saved: dict) -> dict:
        """Checkpoint ``saved`` with its ``history`` (and raw ``history_text``): the first
        ``generation`` lines of ``history.jsonl``, checked against its ``history_sha256``."""
        path, lines = self.path / HISTORY, saved["generation"]
        try:
            with open(path, "rb") as f:
                raw = [f.readline() for _ in range(lines)]
        except FileNotFoundError:
            raw = []
        if len([r for r in raw if r.endswith(b"\n")]) != lines or \
                hashlib.sha256(b"".join(raw)).hexdigest() != saved["history_sha256"]:
            raise _checkpoint.CheckpointError(
                f"{path} does not hold the {lines} history line(s) the checkpoint in "
                f"{self.path} was written after (missing, shortened or edited), so the run "
                f"cannot be resumed consistently. Restore the file, or start the run again "
                f"in another folder.")
        saved["history_text"] = [r.decode() for r in raw]
        saved["history"] = [from_json(json.loads(t)) for t in saved["history_text"]]
        return saved

    def score_kwargs(self, recorded: dict) -> dict:
        """``score_kwargs.pkl``, written when the run had score_kwargs (``recorded``: the
        config's description of them)."""
        path = self.path / SCORE_KWARGS
        if path.is_file():
            return _checkpoint.load(path)
        if recorded:
            raise OutFolderError(f"{self.path} has no {SCORE_KWARGS}, the run's "
                                 f"score_kwargs; pass score_kwargs=")
        return {}

    def failure_path(self, generation: int) -> Path:
        return self.path / FAILURES / f"generation-{generation}.pkl"

    def failure_generations(self) -> list[int]:
        """The generations the folder holds failure records for, in order."""
        return sorted(int(p.stem.split("-", 1)[1])
                      for p in (self.path / FAILURES).glob("generation-*.pkl"))


class HoldsARun(OutFolderError, SettingError):
    """The out folder holds a run, and the call neither resumes nor replaces it."""


class RunFolder(RunDir):
    """Writes one run into ``settings.out``, as a callback.

    It holds the folder's lock; :meth:`open` refuses to replace a run unless ``resume`` or
    ``overwrite`` and, with ``resume``, reads the checkpoint (``saved``) and checks it
    against ``config``. Nothing is written before the run scores or fails: a run that fails
    at its start leaves the run it would replace or continue whole. A checkpoint is written
    every ``checkpoint_every`` generations unless writing them has taken more than ``SHARE``
    of the run's time (and ``FLOOR`` seconds): a costly one is then thinned out.
    """

    SHARE, FLOOR = 0.05, 1.0

    def __init__(self, settings: Settings, config: dict):
        super().__init__(settings.out)
        self._config, self._settings = config, settings  # what it writes
        self._pending: dict | None = None  # the checkpoint not written yet
        self._started, self._generations = 0.0, 0  # since this call of run() started
        self._writing = 0.0  # seconds spent writing checkpoints since then
        self._lock = acquire(self.path)  # the open lock file: closed, released
        self._history: Any = None  # history.jsonl, open from the run's first write
        self.saved: dict | None = None

    def open(self) -> dict | None:
        """The checkpoint the run continues (``saved``; None: it starts), checked against
        the config and the history file; a run neither resumed nor replaced is refused."""
        done, config, settings = self.generations(), self._config, self._settings
        check("out", str(self.path), settings.resume or settings.overwrite or done is None,
              f"holds a run already ({done} generation(s) in {HISTORY})", "continue it with "
              "{resume=True}, replace it with {overwrite=True}, or choose another out folder",
              False, HoldsARun)
        foreign = [] if (self.path / HISTORY).exists() else [  # no run ever began here
            name for name in OWN if name != LOCK and (self.path / name).exists()]
        check("out", str(self.path), not foreign or settings.overwrite, f"holds files of the "
              f"names a run writes ({', '.join(foreign)}) but no run", "move them, replace "
              "them with {overwrite=True}, or choose another out folder", False, HoldsARun)
        if not settings.resume or not (self.path / CHECKPOINT).exists():
            return None
        saved = _checkpoint.load(self.path / CHECKPOINT)
        _checkpoint.check_resumable(saved["config"], config, str(self.path))
        spec = saved["config"]["spec"]
        if spec:  # the run's own (a built-in by its name), longer if asked
            config["spec"] = {**spec, "generations": config["generations"]}
        ran = saved["generation"]  # a run cannot be shortened
        check("generations", config["generations"], config["generations"] >= ran,
              f"is fewer than the {ran} the run in {self.path} has already completed",
              f"resume it with {{generations}} >= {ran}", got=False)
        self.saved = self.with_history(saved)
        return self.saved

    def _begin(self) -> None:
        """The run's first write."""
        if self._history is not None:
            return
        for tmp in self.path.glob(".*.tmp"):  # writes a crash cut short
            tmp.unlink(missing_ok=True)
        if not self.saved:  # a new run: nothing of a run it replaces
            for name in (CHECKPOINT, SCORE_KWARGS, *AT_THE_END):
                (self.path / name).unlink(missing_ok=True)
            for generation in self.failure_generations():
                self.failure_path(generation).unlink()
        if self._settings.score_kwargs and not (self.path / SCORE_KWARGS).exists():
            _checkpoint.save(self.path / SCORE_KWARGS, dict(self._settings.score_kwargs))
        dump_json(self.path / CONFIG, self._config)
        # history.jsonl as of the checkpoint (a new run's: empty), replaced atomically
        text = "".join(self.saved["history_text"]) if self.saved else ""
        atomic_write(self.path / HISTORY, lambda f: f.write(text), mode="w")
        self._digest = hashlib.sha256(text.encode())  # of the history lines the folder holds
        self._history = open(self.path / HISTORY, "a")

    def on_start(self, info: Any) -> None:
        self._begin()  # config.json with what the start decided
        self._started = time.perf_counter()
        self._save_failures(info.start.failures)
        if self.saved:  # best_weights.pt as of the checkpoint (a crash may leave a later one)
            self._save_weights(BEST_WEIGHTS, info.start.best_weights())
        else:  # the starting agent, the best so far
            self._put_aside(info.start)
            self.save_pending()

    def on_generation(self, record: Any) -> None:
        if not self._generations:  # the run goes on: what an end wrote no longer holds
            for name in AT_THE_END:
                (self.path / name).unlink(missing_ok=True)
        self._save_failures(record.failures)
        with deferred_sigint():  # history line and checkpoint stay whole
            line = json.dumps(to_json(record)) + "\n"
            self._history.write(line)
            self._history.flush()
            os.fsync(self._history.fileno())
            self._digest.update(line.encode())
            self._put_aside(record)
            done = record["generation"] + 1
            if done % self._config["checkpoint_every"] == 0 and self._writing <= max(
                    self.FLOOR, self.SHARE * (time.perf_counter() - self._started)) \
                    or done >= self._config["generations"]:
                self.save_pending()  # else by the next due one, the end, or an error
        self._generations += 1

    def on_error(self, error: BaseException) -> None:
        """Save the failed tasks' record and the generations the checkpoint lacks."""
        self._save_failures(getattr(error, "failures", None))
        self.save_pending()

    def on_end(self, result: Any) -> None:
        self._save_weights(CENTER_WEIGHTS, result.center_weights)
        self._save_weights(CHOSEN_WEIGHTS, result.chosen_weights)
        dump_json(self.path / RESULT, {  # last: the end is whole once it is there
            "best_score": result.best_score, "evaluations": result.evaluations,
            "generations": result.generations, "seconds": result.history[-1]["seconds"],
            "seed": result.seed, "stopped_by": result.stopped_by, "chosen": result.chosen,
            "selection": result.selection, "select_tasks": self._config["select_tasks"]})
        if self._generations or not (self.path / PLOT).exists():  # else: it shows this
            with contextlib.suppress(ImportError):  # matplotlib is an extra
                result.plot(self.path / PLOT)

    def close(self) -> None:
        if self._history is not None:
            self._history.close()
        self._lock.close()

    def _put_aside(self, outcome: Any) -> None:
        """The checkpoint as of ``outcome``, to write now or later; it holds the SHA-256
        of the history lines before it (as many as its generation), not the history."""
        self._pending = {**outcome.checkpoint, "history_sha256": self._digest.hexdigest(),
                         "config": self._config}

    def save_pending(self) -> None:
        """Write the checkpoint a sparse ``checkpoint_every`` left for later, if any, and
        best_weights.pt with it (both as of the same generation)."""
        if self._pending is None:
            return
        data, began = self._pending, time.perf_counter()
        with deferred_sigint():
            self._save_weights(BEST_WEIGHTS, data["best_weights"])
            _checkpoint.save(self.path / CHECKPOINT, data)
            self._pending = None
        self._writing += time.perf_counter() - began

    def _save_weights(self, name: str, weights: dict) -> None:
        atomic_write(self.path / name, lambda f: torch.save(weights, f))

    def _save_failures(self, failures: Any) -> None:
        """What ``replay_task(agent, out=out, generation=g, index=i)`` needs but config.json."""
        if failures is None:
            return
        self._begin()
        path = self.failure_path(failures.generation)
        path.parent.mkdir(parents=True, exist_ok=True)
        _checkpoint.save(path, failures._asdict())
