"""A run's settings, checked once, at construction (a
:class:`~es_search.errors.SettingError` names a bad one and says how to fix it):
``run()``, the :class:`~es_search.Evaluator` and the command line all build one."""
from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field, fields
from functools import partial
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import torch

from .agent import class_path, plain
from .checks import (check, check_bool, check_choice, check_dict, check_int, check_n_jobs,
                     check_path, check_positive_float, check_seed)
from .selection import SELECT_TASKS, SELECTION_GENERATION


#: what ``score_kwargs`` must be
SCORE_KWARGS = "a dict of keyword arguments for score()"


def recorded(value: Any) -> Any:
    """``value`` as the run's config records it: tensors and arrays (in lists, tuples
    and dicts too) as their type, shape, dtype and SHA-256, which a resume compares.

    >>> import torch
    >>> recorded({"b": 45, "X": torch.zeros(2, 3)})["X"]["shape"]
    [2, 3]
    """
    if isinstance(value, dict):
        return {key: recorded(item) for key, item in value.items()}
    if type(value) in (list, tuple):
        return type(value)(recorded(item) for item in value)
    if isinstance(value, torch.Tensor) and value.layout == torch.strided \
            and not value.is_quantized:
        flat = value.detach().cpu().contiguous().reshape(-1)
        kind, dtype = "torch.Tensor", str(value.dtype)[6:]
        data = flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b""
    elif isinstance(value, np.ndarray) and not value.dtype.hasobject:
        kind, dtype, data = "numpy.ndarray", value.dtype.str, np.ascontiguousarray(value).tobytes()
    else:
        return value
    return {"__digest__": kind, "shape": list(value.shape), "dtype": dtype,
            "sha256": hashlib.sha256(data).hexdigest()}


def agent_settings(agent: Any) -> dict:
    """The agent's public attributes that are numbers, strings, booleans or None (or
    lists, tuples and str-keyed dicts of those), as ``config.json`` records them."""
    skip = vars(torch.nn.Module())  # what every module holds
    return {name: value for name, value in sorted(vars(agent).items())
            if not name.startswith("_") and name not in skip and plain(value)}


def same_state(agent: Any, other: Any) -> bool:
    """Whether two agents differ in evolved weights and shared state at most."""
    free = {name for name, _ in agent.evolved_parameters()} | set(agent.shared_state())
    mine, theirs = agent.state_dict(), other.state_dict()
    return mine.keys() == theirs.keys() and agent_settings(agent) == agent_settings(
        other) and all(torch.equal(mine[k], theirs[k]) for k in mine if k not in free)


def setting(default: Any, check: Any = None, help: str = "", **argparse: Any) -> Any:
    """A field of :class:`Settings`: ``check(name, value)`` normalises it or raises a
    SettingError (a bool's: ``check_bool``; None passes where it is the default); a
    ``help`` (settings in it as ``{name}``) puts it in ``help(es_search.run)`` and makes
    it a flag of ``es-search run``, with argparse's ``type``, ``choices`` or ``metavar``."""
    return field(default=default, metadata={"check": check, "help": help, **argparse})


def check_fields(obj: Any) -> None:
    """Set each field of the dataclass ``obj`` (even a frozen one) to its value as its
    :func:`setting`'s ``check`` normalises it."""
    for each in fields(obj):
        value, check = getattr(obj, each.name), each.metadata.get("check")
        if isinstance(each.default, bool):
            check = check_bool
        if check is not None and not (value is None and each.default is None):
            object.__setattr__(obj, each.name, check(each.name, value))


def check_generations(name: str, value: Any) -> int:
    value = check_int(name, value, 1)  # at SELECTION_GENERATION: the selection's seeds
    return check(name, value, value < SELECTION_GENERATION,
                 f"an integer below {SELECTION_GENERATION}")


#: what ``on_error`` may be
ON_ERROR = ("raise", "worst")


@dataclass(frozen=True)
class Settings:
    """What a run is asked to do besides the agent and the strategy: ``generations`` (None:
    not a run, e.g. ``evaluate()``), ``seed`` and ``score_kwargs``, what every task sees,
    and the fields whose ``help`` says what they do."""

    generations: int | None = setting(None, check_generations)
    seed: int = setting(0, lambda name, value: check_seed(value))
    n_jobs: int = setting(-1, lambda name, value: check_n_jobs(value), "-1 all cores "
                           "(default), 1 a plain loop in this process (joblib's)")
    backend: Any = setting(None, None, "loky (default, or joblib.parallel_config's), "
                            "multiprocessing, dask (its Client; give its {scheduler}), ray "
                            "(RAY_ADDRESS, or a local Ray); no threads")
    score_kwargs: Mapping[str, Any] = field(default_factory=dict, metadata={
        "check": partial(check_dict, what=SCORE_KWARGS)})
    on_error: str = setting(
        "raise", partial(check_choice, choices=ON_ERROR, note=" ('raise': stop with a "
                         "ScoreError; 'worst': score the candidate -inf and go on)"),
        "a score() that raises: stop (default) or score it -inf and go on",
        choices=ON_ERROR)
    max_retries: int = setting(2, partial(check_int, minimum=0), "re-runs of a "
                                "generation's tasks lost to dead workers or timeouts "
                                "(default 2)")
    task_timeout: float | None = setting(
        None, check_positive_float, "seconds one score() may take in a worker (default: no "
        "limit; with it, tasks are handed out one at a time); a worker over time is "
        "killed, as a dead one", type=float)
    sequential_fallback: bool = setting(
        True, None, "score a generation in this process when that is faster than a round "
        "trip to the workers (the same scores); {sequential_fallback=False} keeps every "
        "generation in the workers: a score() that can crash its process (a C "
        "extension's segfault) then costs a retry, not the run (default: on)")
    progress: bool = setting(True, None, "a progress bar (default)")
    out: Path | None = setting(None, check_path, "folder to write the run into as it "
                                "goes (es_search.folder)")
    resume: bool = setting(False, None, "continue the run saved in {out} (a fresh start "
                            "when there is none), to an uninterrupted run's result")
    overwrite: bool = setting(False, None, "replace the run saved in {out} (without it, "
                               "or {resume}, an {out} that holds a run is refused before "
                               "any work)")
    checkpoint_every: int = setting(
        1, partial(check_int, minimum=1, note=" (generations between two checkpoints of "
                   "the run folder)"), "write {out}'s checkpoint every N generations "
        "(default 1; less often while writing takes over 5% of the run's time); a kill -9 "
        "then redoes the generations since the last one on {resume}", metavar="N")
    repeat_check: bool = setting(True, None, "first score the starting agent twice under "
                                  "one task seed in this process (a warning when the scores "
                                  "differ: the run would depend on {n_jobs}; default: on, "
                                  "unless {task_timeout} or {sequential_fallback=False} keep "
                                  "scores out of this process)")
    select_tasks: int = setting(
        SELECT_TASKS, partial(check_int, minimum=0), f"at the end, score the best weights, "
        f"the final centre and the centres kept over the run on N fresh tasks each and hand "
        f"back the best (default {SELECT_TASKS}; 0: the best weights, untested)", metavar="N")

    def __post_init__(self) -> None:
        check_fields(self)
        check("task_timeout", self.task_timeout, self.task_timeout is None or self.n_jobs != 1,
              "needs worker processes, not {n_jobs=1}: a score() running in this process "
              "cannot be stopped", got=False)
        for name, does in (("resume", "continues the run saved in an out folder"),
                           ("overwrite", "replaces the run saved in an out folder"),
                           ("checkpoint_every", "sets how often the run folder's "
                                                "checkpoint is written")):
            value = getattr(self, name)
            check(name, value, self.out is not None or value == getattr(Settings, name),
                  does + "; pass {out=DIR}", got=False)
        check("resume", True, not (self.resume and self.overwrite), "continues the run in "
              "{out}, {overwrite=True} replaces it: pass one of them", got=False)

    @property
    def fallback(self) -> bool:
        """Whether scores may run in this process (a generation, the repeat check): not
        under a task timeout, which only works in a worker."""
        return self.sequential_fallback and self.task_timeout is None

    def config(self, agent: Any, strategy: Any, spec: Any) -> dict:
        """The run's ``config.json``: its ``spec`` (or None), what defines it, how it ran."""
        from .batched import group_size  # candidates per score_batch() call (0: none)
        return {
            "spec": spec and asdict(spec),
            "agent": class_path(type(agent)),  # the script run's by its file
            "strategy": strategy.config(),
            "generations": self.generations,
            "seed": self.seed,
            "score_kwargs": recorded(dict(self.score_kwargs)),
            "n_jobs": self.n_jobs,
            "backend": self.backend if self.backend is None or isinstance(self.backend, str)
            else repr(self.backend),
            "num_evolved": agent.num_evolved(),
            "agent_settings": agent_settings(agent),
            "score_batch_size": group_size(agent),
            "checkpoint_every": self.checkpoint_every,
            "select_tasks": self.select_tasks,
        }


#: the settings ``help(es_search.run)`` lists and ``es-search run`` takes as flags
DOCUMENTED = [setting for setting in fields(Settings) if setting.metadata.get("help")]
