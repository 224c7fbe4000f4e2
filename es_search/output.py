"""The run folder (``out=DIR``): its layout, owned here, written as the run goes.

- ``config.json``: what defines the run (written first): its spec
  (:mod:`es_search.spec`; null for an agent given to ``run()``) and what ``run()``
  recorded;
- ``history.jsonl``: one JSON line per generation (:mod:`es_search.record`), appended
  and fsynced each generation;
- ``best_weights.pt``: ``torch.save`` of the best weights (a state dict, with the
  agent's shared state as of the generation they were scored), replaced atomically
  with the checkpoint when the best has improved since the last one (both then hold
  the same generation);
- ``center_weights.pt``: the strategy's final centre (``Result.center_weights``), at
  the end (like ``chosen_weights.pt``, ``result.json``, ``plot.png`` and ``test.json``,
  it is removed when a resumed run writes its next generation: an interrupted folder
  holds no stale end);
- ``chosen_weights.pt``: what the run hands back (``Result.chosen_weights``: the best
  weights or the final centre, whichever tested best, :mod:`es_search.selection`), at
  the end;
- ``checkpoint.pkl``: everything needed to continue the run (format:
  :mod:`es_search.checkpoint`), replaced atomically after a generation's history line,
  every ``checkpoint_every`` generations, and when the run ends, stops or fails
  (Ctrl-C, SIGTERM, an error): a resume redoes the generations after it;
- ``failures/generation-<g>.pkl``: what ``es_search.replay_task`` needs to rerun the
  tasks of generation ``g`` that failed;
- ``score_kwargs.pkl``: the run's ``score_kwargs`` (checkpoint format), written once
  when it starts (the config and checkpoints hold a tensor's or array's digest, not
  its data); ``replay_task`` reads them;
- ``result.json``: the summary, at the end, with ``chosen``, ``selection`` (the
  selection test's figures) and ``select_tasks``; ``plot.png``: best and mean score per
  generation, at the end, when matplotlib is installed;
- ``test.json``: the ``test_scores()`` of the best weights and of the final centre,
  written by ``es-search run`` at the end and by ``es-search test DIR``;
- ``.lock``: held while a run writes the folder (:mod:`es_search.lock`).

:class:`RunFolder` is the callback that writes all of it; :class:`~es_search.folder.RunDir`
reads it.
"""
from __future__ import annotations

import copy
import hashlib
import json
import math
import os
import time
from pathlib import Path
from typing import Any

import torch

from . import checkpoint as _checkpoint
from .files import atomic_write, dump_json, from_json, read_history, to_json
from .errors import SettingError, warn_user
from .folder import (AT_THE_END, BEST_WEIGHTS, CENTER_WEIGHTS, CHECKPOINT, CHOSEN_WEIGHTS,
                     CONFIG, FAILURES, HISTORY, LOCK, PLOT, RESULT, SCORE_KWARGS, TEST,
                     OutFolderError, RunDir)
from .interrupt import deferred_sigint
from .lock import acquire, claim, release

__all__ = ["AT_THE_END", "BEST_WEIGHTS", "CENTER_WEIGHTS", "CHECKPOINT", "CHOSEN_WEIGHTS",
           "CONFIG", "FAILURES", "HISTORY", "LOCK", "PLOT", "RESULT", "TEST",
           "OutFolderError", "RunFolder", "SCORE_KWARGS", "acquire", "atomic_write",
           "check_replaceable", "claim", "dump_json", "from_json", "read_history", "release",
           "to_json"]


class HoldsARun(OutFolderError, SettingError):
    """The out folder holds a run, and the call neither resumes nor replaces it."""


def check_replaceable(path: Any, resume: bool, overwrite: bool) -> None:
    """:class:`OutFolderError` when a new run (neither ``resume`` nor ``overwrite``)
    would replace the run folder ``path`` holds: nothing computed is lost by mistake."""
    if resume or overwrite:
        return
    generations = RunDir(path).generations()
    if generations is not None:
        raise HoldsARun("out", str(path), f"holds a run already ({generations} generation(s) "
                        f"in {HISTORY})", "continue it with {resume=True}, replace it with "
                        "{overwrite=True}, or choose another out folder", got=False)


class CheckpointCost:
    """What writing checkpoints costs a run; :meth:`notice` says, once, when it is over
    a quarter of the run's time (and 5 seconds in all) and how to write fewer."""

    SHARE = 0.25  # of the run's time, above which the run warns
    AFTER = 3  # checkpoints written before judging
    # seconds spent on checkpoints before it matters: a short run on a busy machine
    # (fsync: 50 ms for a checkpoint of a few kB) need not hear of it
    FLOOR = 5.0

    def __init__(self) -> None:
        self.seconds, self.count, self.size, self.warned = 0.0, 0, 0, False

    def add(self, seconds: float, size: int) -> None:
        self.seconds += seconds
        self.count += 1
        self.size = size

    def notice(self, run_seconds: float, generations: int, every: int) -> str | None:
        """The warning to give now, if any, a template naming ``{checkpoint_every=N}``
        (``run_seconds``: the time the run has spent since it started or resumed,
        ``generations`` in it)."""
        if self.warned or self.count < self.AFTER or self.seconds < self.FLOOR:
            return None
        share = self.seconds / run_seconds
        if share <= self.SHARE:
            return None
        self.warned = True
        each = self.seconds / self.count
        rest = max(run_seconds - self.seconds, 1e-9) / max(generations, 1)  # a generation
        advice = max(every + 1, math.ceil(each / (0.05 * rest)))  # ~5% of the time
        return (f"writing the checkpoint ({self.size / 1e6:.1f} MB) takes {each * 1e3:.0f} ms "
                f"a time, {share:.0%} of this run's time so far; {{checkpoint_every="
                f"{advice}}} writes one every "
                f"{advice} generations (a kill -9 then redoes up to {advice - 1} on resume; "
                f"the end, Ctrl-C and errors still save everything; this warning is given "
                f"once per run)")


class RunFolder:
    """Writes one run into ``path`` (see the module docstring): a callback
    (:mod:`es_search.callbacks.base`) that needs nothing but what the callbacks get.

    Opening it takes the folder's lock, refuses to replace a run the folder holds
    unless ``overwrite`` (:func:`check_replaceable`) and, with ``resume``, reads the
    checkpoint (``saved``, None when there is none) and checks it against ``config``.
    :meth:`close` releases the folder (also when the run fails).
    """

    def __init__(self, path: Any, config: dict, resume: bool = False,
                 overwrite: bool = False, score_kwargs: dict | None = None,
                 checkpoint_every: int = 1):
        self.path = Path(path)
        self.dir = RunDir(path)
        self.config = config
        self.checkpoint_every = checkpoint_every
        self._pending: tuple | None = None  # (checkpoint, outcome) not written yet
        self._weights_due = False  # the best improved since best_weights.pt was written
        self.checkpoint_cost = CheckpointCost()
        self._started, self._generations = 0.0, 0  # this session's (on_start sets it)
        self._lock: str | None = acquire(self.path)
        self._history: Any = None
        self._digest = hashlib.sha256()  # of the history lines the folder holds
        self.history_lines = 0
        self._score_kwargs = score_kwargs
        self._begun = False
        try:
            check_replaceable(self.path, resume, overwrite)
            self.saved = self._load(config) if resume else None
        except BaseException:
            self.close()
            raise

    def _begin(self) -> None:
        """The run's first write (its start, or a failure record of its starting
        agent): until then the folder is as it was, so a run that fails before it
        scores (a backend that is not there, an agent the workers cannot get, a
        repeat check that raises) leaves the run it would replace (``overwrite``) or
        continue whole."""
        if self._begun:
            return
        self._begun = True
        for tmp in self.path.glob(".*.tmp"):  # writes a crash cut short
            tmp.unlink(missing_ok=True)
        if not self.saved:  # a new run: nothing of a run it replaces
            for name in (CHECKPOINT, SCORE_KWARGS, *AT_THE_END):
                (self.path / name).unlink(missing_ok=True)
            for generation in self.dir.failure_generations():
                self.dir.failure_path(generation).unlink()
        if self._score_kwargs and not (self.path / SCORE_KWARGS).exists():
            _checkpoint.save(self.path / SCORE_KWARGS, dict(self._score_kwargs))
        dump_json(self.path / CONFIG, self.config)
        if not self.saved:
            self._history = open(self.path / HISTORY, "w")
            return
        # history.jsonl as of the checkpoint (replaced atomically)
        text = "".join(self.saved["history_text"])
        atomic_write(self.path / HISTORY, lambda f: f.write(text), mode="w")
        self._digest = hashlib.sha256(text.encode())
        self.history_lines = len(self.saved["history_text"])
        self._history = open(self.path / HISTORY, "a")

    def _load(self, config: dict) -> dict | None:
        """The checkpoint, checked against ``config`` and the history file."""
        path = self.path / CHECKPOINT
        if not path.exists():
            return None
        saved = _checkpoint.load(path)
        _checkpoint.check_resumable(saved["config"], config, str(self.path))
        spec = saved["config"].get("spec")
        if config.get("spec") is None and spec:  # resumed from Python: the command's stays
            config["spec"] = {**spec, "generations": config["generations"]}
        if config["generations"] < saved["generation"]:
            raise ValueError(
                f"the run in {self.path} has already completed {saved['generation']} "
                f"generations; resume it with generations >= {saved['generation']} (it "
                f"cannot be shortened)")
        saved["history"], saved["history_text"] = self.dir.history(
            saved["history_lines"], saved["history_sha256"])
        return saved

    # ------------------------------------------------------------------ callbacks
    def on_start(self, info: Any) -> None:
        self._begin()
        self._started = time.perf_counter()
        dump_json(self.path / CONFIG, self.config)  # with what the start decided
        start = info.start
        self._save_failures(start.failures)
        if self.saved:  # best_weights.pt as of the checkpoint (a crash may leave a later one)
            self._save_weights(start.best_weights())
        else:  # the starting agent, the best so far
            self._weights_due = True
            self._put_aside(start)
            self._save_pending()

    def on_generation(self, record: Any) -> None:
        """``record``: the generation's :class:`~es_search.callbacks.base.Generation`."""
        if self.history_lines == len(self.saved["history_text"] if self.saved else ()):
            # the run goes on: what its (or a replaced run's) end wrote no longer holds
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
            if done % self.checkpoint_every == 0 or done >= self.config["generations"]:
                self._save_pending()  # else by the next due one, the end, or an error
        self._generations += 1
        notice = self.checkpoint_cost.notice(time.perf_counter() - self._started,
                                             self._generations, self.checkpoint_every)
        if notice:
            warn_user(notice, template=True)

    def on_error(self, error: BaseException) -> None:
        """Ctrl-C, SIGTERM or an error: save the failure record of the tasks that
        raised, if any, and the completed generations that the last checkpoint lacks."""
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
            "selection": result.selection, "select_tasks": self.config["select_tasks"]})
        if self._generations == 0 and (self.path / PLOT).exists():
            return  # a resume with nothing left to run: the plot shows this history
        try:
            from .plotting import plot_history
            plot_history(result.history, self.path / PLOT)
        except ImportError:
            pass

    def selection(self, tasks: int) -> tuple[str, dict | None] | None:
        """``(chosen, selection)`` of the run's end (``result.json``) when its selection
        test had ``tasks`` tasks (a resume of a run that had ended keeps it); else
        None."""
        end = self.dir.end()
        if end.get("select_tasks") != tasks or end.get("chosen") not in ("best", "center"):
            return None
        return end["chosen"], end.get("selection")

    def close(self) -> None:
        if self._history is not None and not self._history.closed:
            self._history.close()
        if self._lock is not None:
            key, self._lock = self._lock, None
            release(key)

    # ------------------------------------------------------------------ files
    def _put_aside(self, outcome: Any) -> None:
        """The checkpoint as of ``outcome``, to write now or later. The history is not
        copied into every checkpoint (that would grow with the run): it holds the
        number and SHA-256 of the ``history.jsonl`` lines written before it, which a
        resume checks and reads back."""
        data = {**outcome.checkpoint, "history_lines": self.history_lines,
                "history_sha256": self._digest.hexdigest(), "config": self.config}
        # the agent's shared state may change in place before it is written
        data["shared"] = copy.deepcopy(data["shared"])
        self._pending = data, outcome

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
        """What ``replay_task(agent, out=out, generation=g, index=i)`` needs
        (:class:`~es_search.callbacks.base.Failures`, or None: nothing failed)."""
        if failures is None:
            return
        self._begin()
        path = self.dir.failure_path(failures.generation)
        path.parent.mkdir(parents=True, exist_ok=True)
        _checkpoint.save(path, {**failures._asdict(), "seed": self.config["seed"],
                                "score_kwargs": self.config["score_kwargs"]})
