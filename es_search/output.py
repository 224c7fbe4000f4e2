"""Writing the run folder (:mod:`es_search.folder` names its files) as the run goes:
:class:`RunFolder`, a callback that needs nothing but what callbacks get."""
from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import math
import os
import time
from typing import Any

import torch

from . import checkpoint as _checkpoint
from .errors import SettingError, warn_user
from .files import atomic_write, dump_json, to_json
from .folder import (AT_THE_END, BEST_WEIGHTS, CENTER_WEIGHTS, CHECKPOINT, CHOSEN_WEIGHTS,
                     CONFIG, HISTORY, PLOT, RESULT, SCORE_KWARGS, OutFolderError, RunDir)
from .interrupt import deferred_sigint
from .lock import acquire, release


class HoldsARun(OutFolderError, SettingError):
    """The out folder holds a run, and the call neither resumes nor replaces it."""


class CheckpointCost:
    """What writing checkpoints costs a run; :meth:`notice` warns once when it is over
    ``SHARE`` of the run's time (and ``FLOOR`` seconds: a short run need not hear of it)."""

    SHARE, AFTER, FLOOR = 0.25, 3, 5.0  # AFTER: checkpoints written before judging

    def __init__(self) -> None:
        self.seconds, self.count, self.size, self.warned = 0.0, 0, 0, False

    def add(self, seconds: float, size: int) -> None:
        self.seconds += seconds
        self.count += 1
        self.size = size

    def notice(self, run_seconds: float, generations: int, every: int) -> str | None:
        """The warning to give now, if any (``run_seconds`` and ``generations`` since the
        run started or resumed)."""
        if self.warned or self.count < self.AFTER or self.seconds < self.FLOOR or \
                self.seconds <= self.SHARE * run_seconds:
            return None
        self.warned, share = True, self.seconds / run_seconds
        each = self.seconds / self.count
        rest = max(run_seconds - self.seconds, 1e-9) / max(generations, 1)  # a generation
        advice = max(every + 1, math.ceil(each / (0.05 * rest)))  # ~5% of the time
        return (f"writing the checkpoint ({self.size / 1e6:.1f} MB) takes {each * 1e3:.0f} ms "
                f"a time, {share:.0%} of this run's time so far; {{checkpoint_every="
                f"{advice}}} writes one every {advice} generations (a kill -9 then redoes up "
                f"to {advice - 1} on resume; the end, Ctrl-C and errors still save "
                f"everything; this warning is given once per run)")


class RunFolder(RunDir):
    """Writes one run into ``path``, as a callback.

    Opening it takes the folder's lock, refuses to replace a run unless ``resume`` or
    ``overwrite`` and, with ``resume``, reads the checkpoint (``saved``) and checks it
    against ``config``. Nothing is written before the run scores or fails: a run that
    fails at its start leaves the run it would replace or continue whole.
    """

    def __init__(self, path: Any, config: dict, resume: bool = False,
                 overwrite: bool = False, score_kwargs: dict | None = None,
                 checkpoint_every: int = 1):
        super().__init__(path)
        self._config, self.checkpoint_every = config, checkpoint_every  # what it writes
        self._pending: tuple | None = None  # (checkpoint, outcome) not written yet
        self._weights_due = False  # the best improved since best_weights.pt was written
        self.checkpoint_cost = CheckpointCost()
        self._started, self._generations = 0.0, 0  # since this call of run() started
        self._lock: str | None = acquire(self.path)
        self._history: Any = None
        self._digest = hashlib.sha256()  # of the history lines the folder holds
        self.history_lines = 0
        self._score_kwargs = score_kwargs
        try:
            done = self.generations()
            if not (resume or overwrite) and done is not None:
                raise HoldsARun("out", str(self.path), f"holds a run already ({done} "
                                f"generation(s) in {HISTORY})", "continue it with "
                                "{resume=True}, replace it with {overwrite=True}, or choose "
                                "another out folder", got=False)
            self.saved = self._load(config) if resume else None
        except BaseException:
            self.close()
            raise

    def _load(self, config: dict) -> dict | None:
        """The checkpoint, checked against ``config`` and the history file."""
        if not (self.path / CHECKPOINT).exists():
            return None
        saved = _checkpoint.load(self.path / CHECKPOINT)
        _checkpoint.check_resumable(saved["config"], config, str(self.path))
        spec = saved["config"].get("spec")
        if config.get("spec") is None and spec:  # resumed from Python: the command's stays
            config["spec"] = {**spec, "generations": config["generations"]}
        if config["generations"] < saved["generation"]:
            raise ValueError(
                f"the run in {self.path} has already completed {saved['generation']} "
                f"generations; resume it with generations >= {saved['generation']} (it "
                f"cannot be shortened)")
        saved["history"], saved["history_text"] = self.history(
            saved["history_lines"], saved["history_sha256"])
        return saved

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
        if self._score_kwargs and not (self.path / SCORE_KWARGS).exists():
            _checkpoint.save(self.path / SCORE_KWARGS, dict(self._score_kwargs))
        dump_json(self.path / CONFIG, self._config)
        if self.saved:  # history.jsonl as of the checkpoint (replaced atomically)
            text = "".join(self.saved["history_text"])
            atomic_write(self.path / HISTORY, lambda f: f.write(text), mode="w")
            self._digest = hashlib.sha256(text.encode())
            self.history_lines = len(self.saved["history_text"])
        self._history = open(self.path / HISTORY, "a" if self.saved else "w")

    def on_start(self, info: Any) -> None:
        self._begin()
        self._started = time.perf_counter()
        dump_json(self.path / CONFIG, self._config)  # with what the start decided
        self._save_failures(info.start.failures)
        if self.saved:  # best_weights.pt as of the checkpoint (a crash may leave a later one)
            self._save_weights(info.start.best_weights())
        else:  # the starting agent, the best so far
            self._weights_due = True
            self._put_aside(info.start)
            self._save_pending()

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
            self.history_lines += 1
            # best_weights.pt goes with the checkpoint: both as of the same generation
            self._weights_due |= record.improved
            self._put_aside(record)
            done = record["generation"] + 1
            if done % self.checkpoint_every == 0 or done >= self._config["generations"]:
                self._save_pending()  # else by the next due one, the end, or an error
        self._generations += 1
        notice = self.checkpoint_cost.notice(time.perf_counter() - self._started,
                                             self._generations, self.checkpoint_every)
        if notice:
            warn_user(notice, template=True)

    def on_error(self, error: BaseException) -> None:
        """Save the failed tasks' record and the generations the checkpoint lacks."""
        self._save_failures(getattr(error, "failures", None))
        self._save_pending()

    def on_end(self, result: Any) -> None:
        self._save_pending()
        for name, weights in ((CENTER_WEIGHTS, result.center_weights),
                              (CHOSEN_WEIGHTS, result.chosen_weights)):
            if weights is not None:
                atomic_write(self.path / name, lambda f: torch.save(weights, f))
        seconds = result.history[-1]["seconds"] if result.history else 0.0  # searching
        dump_json(self.path / RESULT, {  # last: the end is whole once it is there
            "best_score": result.best_score, "evaluations": result.evaluations,
            "generations": result.generations, "seconds": seconds, "seed": result.seed,
            "stopped_by": result.stopped_by, "chosen": result.chosen,
            "selection": result.selection, "select_tasks": self._config["select_tasks"]})
        if self._generations or not (self.path / PLOT).exists():  # else: it shows this
            with contextlib.suppress(ImportError):  # matplotlib is an extra
                result.plot(self.path / PLOT)

    def selection(self, tasks: int) -> tuple[str, dict | None] | None:
        """``(chosen, selection)`` of the run's end when its test had ``tasks`` tasks."""
        end = self.end()
        if end.get("select_tasks") != tasks or end.get("chosen") not in ("best", "center"):
            return None
        return end["chosen"], end.get("selection")

    def close(self) -> None:
        if self._history is not None and not self._history.closed:
            self._history.close()
        if self._lock is not None:
            key, self._lock = self._lock, None
            release(key)

    def _put_aside(self, outcome: Any) -> None:
        """The checkpoint as of ``outcome``, to write now or later; it holds the count and
        SHA-256 of the history lines before it, not the history."""
        self._pending = {**outcome.checkpoint, "history_lines": self.history_lines,
                         "history_sha256": self._digest.hexdigest(), "config": self._config,
                         # the agent's shared state may change in place before it is written
                         "shared": copy.deepcopy(outcome.checkpoint["shared"])}, outcome

    def _save_pending(self) -> None:
        if self._pending is None:
            return
        (data, outcome), began = self._pending, time.perf_counter()
        with deferred_sigint():
            if self._weights_due:
                self._save_weights(outcome.best_weights())
                self._weights_due = False
            _checkpoint.save(self.path / CHECKPOINT, data)
            self._pending = None
        self.checkpoint_cost.add(time.perf_counter() - began,
                                 (self.path / CHECKPOINT).stat().st_size)

    def _save_weights(self, weights: dict) -> None:
        atomic_write(self.path / BEST_WEIGHTS, lambda f: torch.save(weights, f))

    def _save_failures(self, failures: Any) -> None:
        """What ``replay_task(agent, out=out, generation=g, index=i)`` needs."""
        if failures is None:
            return
        self._begin()
        path = self.failure_path(failures.generation)
        path.parent.mkdir(parents=True, exist_ok=True)
        _checkpoint.save(path, {**failures._asdict(), "seed": self._config["seed"],
                                "score_kwargs": self._config["score_kwargs"]})
