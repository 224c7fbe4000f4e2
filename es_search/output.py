"""The run folder (``out=DIR``): its layout, owned here, written as the run goes.

- ``config.json``: what defines the run (written first);
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
- ``command.json``: the problem and its parameters, on the command line (``es-search
  run``), compared on ``--resume``;
- ``test.json``: the ``test_scores()`` of the best weights and of the final centre,
  written by ``es-search run`` at the end and by ``es-search test DIR``;
- ``.lock``: held (``fcntl.flock``) while a run writes the folder, so that a second run
  into it fails at once; the kernel releases it when the process dies, however it dies.

:class:`RunFolder` is the callback that writes all of it.
"""
from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import math
import os
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import torch

from . import checkpoint as _checkpoint
from .agent import weights_of
from .files import as_read_back, atomic_write, dump_json, from_json, read_history, to_json
from .errors import SettingError, warn_user
from .interrupt import deferred_sigint
from .settings import has_digest

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no lock
    fcntl = None

HISTORY = "history.jsonl"
CONFIG = "config.json"
BEST_WEIGHTS = "best_weights.pt"
CENTER_WEIGHTS = "center_weights.pt"
CHOSEN_WEIGHTS = "chosen_weights.pt"
RESULT = "result.json"
PLOT = "plot.png"
CHECKPOINT = "checkpoint.pkl"
SCORE_KWARGS = "score_kwargs.pkl"
FAILURES = "failures"
LOCK = ".lock"
#: written by the command line: the problem and its -p parameters (checked on --resume)
COMMAND = "command.json"
#: written by the command line: the test_scores() of the best weights and the centre
TEST = "test.json"
#: written when a run ends; removed when it goes on (a resume) or is replaced
AT_THE_END = (RESULT, CENTER_WEIGHTS, CHOSEN_WEIGHTS, PLOT, TEST)

__all__ = ["AT_THE_END", "BEST_WEIGHTS", "CENTER_WEIGHTS", "CHECKPOINT", "CHOSEN_WEIGHTS",
           "COMMAND", "CONFIG", "FAILURES", "HISTORY", "LOCK", "PLOT", "RESULT", "TEST",
           "OutFolderError", "RunFolder", "SCORE_KWARGS", "acquire", "atomic_write",
           "check_replaceable", "claim", "dump_json", "failure_generations", "failure_path",
           "from_json", "load_weights", "read_end", "read_history", "read_result",
           "read_score_kwargs", "record_command", "release", "saved_generations", "to_json"]


class OutFolderError(ValueError):
    """The out folder cannot be used: it cannot be created or written, another run is
    writing it, or it holds a run that would be replaced without ``overwrite``."""


class HoldsARun(OutFolderError, SettingError):
    """The out folder holds a run, and the call neither resumes nor replaces it."""


def read_config(path: Any) -> dict:
    """The ``config.json`` of the run in folder ``path``; {} when there is none (or it
    cannot be read)."""
    try:
        config = json.loads((Path(path) / CONFIG).read_text())
    except (OSError, ValueError):
        return {}
    return config if isinstance(config, dict) else {}


def saved_generations(path: Any) -> int | None:
    """How many generations the run in folder ``path`` recorded (its history lines), or
    None when it holds no run: no history line and no result. A checkpoint alone (a run
    that stopped before its first generation: a callback that failed at the start, a
    Ctrl-C) holds no more than the starting agent's score, and may be replaced."""
    path = Path(path)
    try:
        with open(path / HISTORY, "rb") as f:
            lines = sum(1 for line in f if line.endswith(b"\n"))
    except OSError:
        lines = 0
    if lines or (path / RESULT).exists():
        return lines
    return None


def check_replaceable(path: Any, resume: bool, overwrite: bool) -> None:
    """:class:`OutFolderError` when a new run (neither ``resume`` nor ``overwrite``)
    would replace the run folder ``path`` holds: nothing computed is lost by mistake."""
    if resume or overwrite:
        return
    generations = saved_generations(path)
    if generations is not None:
        raise HoldsARun("out", str(path), f"holds a run already ({generations} generation(s) "
                        f"in {HISTORY})", "continue it with {resume=True}, replace it with "
                        "{overwrite=True}, or choose another out folder", got=False)


def failure_path(out: Any, generation: int) -> Path:
    return Path(out) / FAILURES / f"generation-{generation}.pkl"


def failure_generations(out: Any) -> list[int]:
    """The generations ``out`` holds failure records for, in order."""
    return sorted(int(p.stem.split("-", 1)[1])
                  for p in (Path(out) / FAILURES).glob("generation-*.pkl"))


_HELD: dict[str, list] = {}  # folder -> [open lock file, claims, the holding thread]
_HELD_LOCK = threading.Lock()


def acquire(path: Any) -> str:
    """Create the folder ``path`` if needed and take its lock (the thread that holds it
    already may take it again, e.g. ``run()`` inside :func:`claim`); the key to
    :func:`release` it with.

    :class:`OutFolderError`, before anything is written, when the folder cannot be
    created or written, or when another process, or another thread of this one, holds
    the lock. The lock is an ``fcntl.flock`` on ``.lock``: the kernel drops it when the
    process ends, however it ends (a SIGKILLed run leaves no stale lock).
    """
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise OutFolderError(f"cannot use {path} as the out folder: it is a file, not a "
                             f"folder (choose a folder path; it is created if missing)")
    with _HELD_LOCK:
        return _acquire(path)


def _acquire(path: Path) -> str:
    try:
        path.mkdir(parents=True, exist_ok=True)
        key = str(path.resolve())
        held = _HELD.get(key)
        if held is not None:
            if held[2] != threading.get_ident():
                raise OutFolderError(
                    f"the out folder {path} is in use by another es_search run of this "
                    f"process (in another thread); wait for it to finish, or choose "
                    f"another out folder")
            held[1] += 1
            return key
        handle = open(path / LOCK, "a+")
    except OSError as exc:
        raise OutFolderError(f"cannot use {path} as the out folder: "
                             f"{exc.strerror or exc} (choose a folder you can write)") from None
    if fcntl is not None:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.seek(0)
            owner = handle.read().strip() or "another process"
            handle.close()
            raise OutFolderError(
                f"the out folder {path} is in use by another es_search run ({owner}); "
                f"wait for it to finish, or choose another out folder") from None
    handle.seek(0)
    handle.truncate()
    handle.write(f"pid {os.getpid()}\n")
    handle.flush()
    _HELD[key] = [handle, 1, threading.get_ident()]
    return key


def release(key: str) -> None:
    """Give back one claim taken by :func:`acquire`; the last one drops the lock."""
    with _HELD_LOCK:
        held = _HELD.get(key)
        if held is None:
            return
        held[1] -= 1
        if held[1] == 0:
            del _HELD[key]
            held[0].close()  # releases the flock


@contextlib.contextmanager
def claim(path: Any) -> Iterator[Path]:
    """The folder ``path``, locked for this process while the block runs (see
    :func:`acquire`), e.g. to write files of one's own into it before ``run()``."""
    key = acquire(path)
    try:
        yield Path(path)
    finally:
        release(key)


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
            for generation in failure_generations(self.path):
                failure_path(self.path, generation).unlink()
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
        if config["generations"] < saved["generation"]:
            raise ValueError(
                f"the run in {self.path} has already completed {saved['generation']} "
                f"generations; resume it with generations >= {saved['generation']} (it "
                f"cannot be shortened)")
        saved["history"], saved["history_text"] = verified_history(
            self.path, saved["history_lines"], saved["history_sha256"])
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
        end = read_end(self.path)
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
        path = failure_path(self.path, failures.generation)
        path.parent.mkdir(parents=True, exist_ok=True)
        _checkpoint.save(path, {**failures._asdict(), "seed": self.config["seed"],
                                "score_kwargs": self.config["score_kwargs"]})


def read_score_kwargs(out: Any, recorded: dict) -> dict:
    """The ``score_kwargs`` of the run in ``out``: ``score_kwargs.pkl``, or ``recorded``
    (a config's or an older failure record's) when they hold the values themselves."""
    path = Path(out) / SCORE_KWARGS
    if path.is_file():
        return _checkpoint.load(path)
    if has_digest(recorded):
        raise OutFolderError(f"{out} has no {SCORE_KWARGS}, and its config holds only "
                             f"digests of the run's score_kwargs; pass score_kwargs=")
    return dict(recorded or {})


def record_command(out: Any, command: dict, resume: bool,
                   defining: Callable[[dict], dict] | None = None, write: bool = True) -> None:
    """Write ``command.json`` (unless not ``write``: the check alone); on a resume of a
    checkpointed run, first refuse (:class:`~es_search.CheckpointError`) a ``command``
    other than the saved one, as compared by ``defining(command)`` (default: the whole
    command)."""
    path = Path(out) / COMMAND
    if resume and path.exists() and (Path(out) / CHECKPOINT).exists():
        defining = defining or (lambda command: command)
        saved = defining(from_json(json.loads(path.read_text())))
        current = defining(as_read_back(command))
        diff = _checkpoint.differences(saved, current, list(current))
        if diff:
            raise _checkpoint.CheckpointError(
                f"cannot resume the run in {out}: " + "; ".join(diff) + " (use the same "
                "problem and -p values, or another --out)")
    if write:
        dump_json(path, command)


def load_weights(path: Any) -> dict:
    """Weights saved by a run (``best_weights.pt``, ``center_weights.pt``): tensors, and
    the shared state's numbers and arrays; nothing else is unpickled."""
    return torch.load(path, weights_only=True)


def read_result(out: Any, agent: Any = None) -> Any:
    """:meth:`es_search.Result.load`: the run saved in ``out`` as of its last checkpoint."""
    from .result import Result
    path = Path(out).expanduser()
    if not (path / CHECKPOINT).is_file():
        raise OutFolderError(f"{path} holds no run to load (no {CHECKPOINT}); it is written "
                             f"by es_search.run(..., out=DIR) or es-search run --out DIR")
    saved = _checkpoint.load(path / CHECKPOINT)
    if not saved["history_lines"]:
        raise OutFolderError(f"{path} holds no run to load: it stopped before its first "
                             f"generation (start it again: it may be replaced)")
    config = saved["config"]
    if agent is not None:
        if not config["agent"].endswith("." + type(agent).__qualname__) or \
                agent.num_evolved() != config["num_evolved"]:
            raise ValueError(f"the run in {path} evolved {config['agent']} "
                             f"({config['num_evolved']} evolved weights); the agent given is "
                             f"{type(agent).__module__}.{type(agent).__qualname__} "
                             f"({agent.num_evolved()}): pass an agent built as the run's "
                             f"was, or none")
    history = verified_history(path, saved["history_lines"], saved["history_sha256"])[0]
    end = read_end(path)
    center = path / CENTER_WEIGHTS
    if center.is_file():
        center_weights = load_weights(center)
    elif agent is not None:  # not ended: the centre as of the checkpoint, as run() gives it
        center_weights = weights_of(agent, saved["strategy"].center(saved["state"]),
                                    saved.get("shared"))
    else:
        center_weights = None
    return Result(best_score=saved["best_score"], best_weights=load_weights(
                      path / BEST_WEIGHTS), evaluations=saved["evaluations"],
                  history=history, seed=config["seed"], config=config, agent=(
                      agent.clone() if agent is not None else None),
                  stopped_by=end.get("stopped_by"), center_weights=center_weights,
                  chosen=end.get("chosen", "best"), selection=end.get("selection"))


def read_end(path: Any) -> dict:
    """The run's ``result.json`` (written at its end), or {} when there is none."""
    try:
        return from_json(json.loads((Path(path) / RESULT).read_text()))
    except (OSError, ValueError):
        return {}


def verified_history(out: Any, lines: int, digest: str) -> tuple[list[dict], list[str]]:
    """The first ``lines`` records of ``out/history.jsonl`` (and their raw lines), checked
    against the SHA-256 ``digest`` a checkpoint holds; lines after them (written after
    the checkpoint, or torn by a crash) are ignored."""
    path = Path(out) / HISTORY
    try:
        with open(path, "rb") as f:
            raw = [f.readline() for _ in range(lines)]
    except FileNotFoundError:
        raw = []
    if len([r for r in raw if r.endswith(b"\n")]) != lines or \
            hashlib.sha256(b"".join(raw)).hexdigest() != digest:
        raise _checkpoint.CheckpointError(
            f"{path} does not hold the {lines} history line(s) the checkpoint in {out} was "
            f"written after (missing, shortened or edited), so the run cannot be resumed "
            f"consistently. Restore the file, or start the run again in another folder.")
    text = [r.decode() for r in raw]
    return [from_json(json.loads(t)) for t in text], text
