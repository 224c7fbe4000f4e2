"""A run's settings, checked once: ``run()``, the :class:`~es_search.Evaluator` and the
command line all build one :class:`Settings` and share it.

Every check lives here (and in :mod:`es_search.checks`, which the strategies use for
their own settings; the backend's in :func:`es_search.backends.prepare`, when the engine
is made); an invalid value raises at construction a
:class:`~es_search.errors.SettingError` (a ``ValueError`` and a ``TypeError``) that names
the setting and says how to fix it.

Example::

    >>> from es_search.settings import Settings
    >>> Settings(generations=10, n_jobs=2).n_jobs
    2
    >>> Settings(n_jobs=0)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    es_search.errors.SettingError: n_jobs must be an integer other than 0 ...
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Mapping

from .checks import (check_bool, check_choice, check_dict, check_int, check_n_jobs, check_path,
                     check_positive_float, check_seed)
from .errors import SettingError
from .selection import SELECT_TASKS, SELECTION_GENERATION, check_select_tasks


#: what ``score_kwargs`` must be
SCORE_KWARGS = "a dict of keyword arguments for score()"

#: the key that marks a value :func:`describe` replaced by its digest
DIGEST = "__digest__"


def describe(value: Any) -> Any:
    """``value`` as the run's config records it: tensors and arrays (in lists, tuples
    and dicts too) replaced by their type, shape, dtype and SHA-256, anything else as
    it is. A data set passed in ``score_kwargs`` is then neither rewritten into every
    checkpoint nor printed into ``config.json``, and a resume compares it exactly.

    >>> import torch
    >>> describe({"b": 45, "X": torch.zeros(2, 3)})["X"]["shape"]
    [2, 3]
    >>> describe(describe({"X": torch.zeros(2)})) == describe({"X": torch.zeros(2)})
    True
    """
    import numpy as np
    import torch
    if isinstance(value, torch.Tensor) and value.layout == torch.strided \
            and not value.is_quantized:
        flat = value.detach().cpu().contiguous().reshape(-1)
        return _digest("torch.Tensor", list(value.shape), str(value.dtype)[6:],
                       flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b"")
    if isinstance(value, np.ndarray) and not value.dtype.hasobject:
        return _digest("numpy.ndarray", list(value.shape), value.dtype.str,
                       np.ascontiguousarray(value).tobytes())
    if isinstance(value, dict):
        return {key: describe(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(describe(item) for item in value) if type(value) in (
            list, tuple) else value
    return value


def agent_settings(agent: Any) -> dict:
    """The agent's own plain settings, as ``config.json`` records them: its public
    attributes whose values are numbers, strings, booleans or None (or lists, tuples and
    str-keyed dicts of those), such as the constructor arguments it keeps. A resume
    compares them, since they usually change what ``score()`` computes.

    >>> import torch, es_search
    >>> class Agent(es_search.Agent):
    ...     def __init__(self, offset=0.0):
    ...         super().__init__()
    ...         self.offset, self.w = offset, torch.nn.Parameter(torch.zeros(2))
    ...         self._cache, self.layer = {}, torch.nn.Linear(1, 1)
    >>> agent_settings(Agent(offset=1.5))
    {'offset': 1.5}
    """
    skip = frozenset(vars(_module_attributes()))
    return {name: value for name, value in sorted(vars(agent).items())
            if not name.startswith("_") and name not in skip and _plain(value)}


def _module_attributes() -> Any:
    import torch
    return torch.nn.Module()


def _plain(value: Any, depth: int = 0) -> bool:
    if value is None or isinstance(value, (bool, int, float, str)):
        return True
    if depth >= 3:
        return False
    if type(value) in (list, tuple):
        return len(value) <= 64 and all(_plain(item, depth + 1) for item in value)
    if type(value) is dict:
        return len(value) <= 64 and all(isinstance(key, str) and _plain(item, depth + 1)
                                        for key, item in value.items())
    return False


def _digest(kind: str, shape: list, dtype: str, data: bytes) -> dict:
    import hashlib
    return {DIGEST: kind, "shape": shape, "dtype": dtype,
            "sha256": hashlib.sha256(data).hexdigest()}


def has_digest(description: Any) -> bool:
    """Whether :func:`describe` replaced anything in ``description`` by a digest."""
    if isinstance(description, dict):
        return DIGEST in description or any(map(has_digest, description.values()))
    if isinstance(description, (list, tuple)):
        return any(map(has_digest, description))
    return False


def _flag(default: Any, help: str, **argparse: Any) -> Any:
    """A setting that ``es-search run`` takes as ``--name`` (``--name``/``--no-name`` for
    one that is True by default): what it does, ``help``, in which ``{setting}`` names
    another setting as the caller writes it, and argparse's ``type``, ``choices`` or
    ``metavar`` where its default does not tell them."""
    return field(default=default, metadata={"help": help, **argparse})


#: what ``on_error`` may be
ON_ERROR = ("raise", "worst")


@dataclass(frozen=True)
class Settings:
    """What a run is asked to do, besides the agent and the strategy (see ``run()``):
    ``generations`` to reach (None: not a run, e.g. ``evaluate()``), ``seed`` and
    ``score_kwargs``, what every task sees; each other field's ``help`` (its metadata)
    says what it does."""

    generations: int | None = None
    seed: int = 0
    n_jobs: int = _flag(-1, "-1 all cores (default), 1 no parallelism")
    backend: Any = _flag(None, "loky (default), multiprocessing, dask (give its "
                         "{scheduler}), ray (RAY_ADDRESS, or a local Ray)")
    score_kwargs: Mapping[str, Any] = field(default_factory=dict)
    on_error: str = _flag("raise", "a score() that raises: stop (default) or score it "
                          "-inf and go on", choices=ON_ERROR)
    max_retries: int = _flag(2, "re-runs of a generation's tasks lost to dead workers "
                             "(default 2)")
    task_timeout: float | None = _flag(None, "seconds one score() may take in a worker "
                                       "(default: no limit)", type=float)
    sequential_fallback: bool = _flag(
        True, "score a generation in this process when that is faster than a round trip "
        "to the workers (the same scores); {sequential_fallback=False} keeps every "
        "generation in the workers: a score() that can crash its process (a C "
        "extension's segfault) then costs a retry, not the run (default: on)")
    progress: bool = _flag(True, "a progress bar (default)")
    out: Path | None = _flag(None, "folder to write the run into")
    resume: bool = _flag(False, "continue the run saved in {out} from its checkpoint")
    overwrite: bool = _flag(False, "replace the run saved in {out} (without it, or "
                            "{resume}, an {out} that holds a run is refused)")
    checkpoint_every: int = _flag(1, "write {out}'s checkpoint every N generations "
                                  "(default 1); a kill -9 then redoes up to N - 1 of them "
                                  "on {resume}", metavar="N")
    repeat_check: bool = _flag(True, "first score the starting agent twice under one task "
                               "seed (a warning when the scores differ: the run would "
                               "depend on {n_jobs}; default: on)")
    select_tasks: int = _flag(SELECT_TASKS, f"at the end, score the best weights and the "
                              f"final centre on N fresh tasks each and hand back the better "
                              f"(default {SELECT_TASKS}; 0: the best weights, untested)",
                              metavar="N")

    def __post_init__(self) -> None:
        set_ = object.__setattr__  # frozen: normalised values are set once, here
        if self.generations is not None:
            set_(self, "generations", check_int("generations", self.generations, 1))
            if self.generations >= SELECTION_GENERATION:  # its seeds are the selection's
                raise SettingError("generations", self.generations,
                                   f"an integer below {SELECTION_GENERATION}")
        set_(self, "select_tasks", check_select_tasks(self.select_tasks))
        set_(self, "seed", check_seed(self.seed))
        set_(self, "n_jobs", check_n_jobs(self.n_jobs))
        set_(self, "score_kwargs", check_dict("score_kwargs", self.score_kwargs, SCORE_KWARGS))
        check_choice("on_error", self.on_error, ON_ERROR, " ('raise': stop with "
                     "a ScoreError; 'worst': score the candidate -inf and go on)")
        set_(self, "max_retries", check_int("max_retries", self.max_retries, 0))
        if self.task_timeout is not None:
            set_(self, "task_timeout", check_positive_float("task_timeout",
                                                            self.task_timeout))
            if self.n_jobs == 1:
                raise SettingError("task_timeout", self.task_timeout, "needs worker "
                                   "processes, not {n_jobs=1}: a score() running in this "
                                   "process cannot be stopped", got=False)
        for setting in fields(self):
            if isinstance(setting.default, bool):
                check_bool(setting.name, getattr(self, setting.name))
        if self.out is not None:
            set_(self, "out", check_path("out", self.out))
        set_(self, "checkpoint_every", check_int(
            "checkpoint_every", self.checkpoint_every, 1,
            " (generations between two checkpoints of the run folder)"))
        for name, does in (("resume", "continues the run saved in an out folder"),
                           ("overwrite", "replaces the run saved in an out folder"),
                           ("checkpoint_every", "sets how often the run folder's "
                                                "checkpoint is written")):
            if self.out is None and getattr(self, name) != getattr(Settings, name):
                raise SettingError(name, getattr(self, name), does + "; pass {out=DIR}",
                                   got=False)
        if self.resume and self.overwrite:
            raise SettingError("resume", True, "continues the run in {out}, "
                               "{overwrite=True} replaces it: pass one of them", got=False)

    @classmethod
    def for_run(cls, **settings: Any) -> "Settings":
        """Settings of a run: ``generations`` is required."""
        check_int("generations", settings.get("generations"), 1)
        return cls(**settings)

    @property
    def fallback(self) -> bool:
        """Whether a generation may be scored in this process (a task timeout only
        works in a worker)."""
        return self.sequential_fallback and self.task_timeout is None

    @property
    def backend_name(self) -> Any:
        """The backend as recorded in ``config.json``."""
        return self.backend if self.backend is None or isinstance(self.backend, str) \
            else repr(self.backend)

    def config(self, agent: Any, strategy: Any) -> dict:
        """The run's ``config.json`` (what defines it, and how it was run): the spec of an
        agent built by :meth:`es_search.spec.RunSpec.run` (else None), and the rest."""
        from .batched import group_size  # candidates per score_batch() call (0: none)
        return {
            "spec": getattr(agent, "_run_spec", None),
            "agent": f"{type(agent).__module__}.{type(agent).__qualname__}",
            "strategy": strategy.config(),
            "generations": self.generations,
            "seed": self.seed,
            "score_kwargs": describe(dict(self.score_kwargs)),
            "n_jobs": self.n_jobs,
            "backend": self.backend_name,
            "num_evolved": agent.num_evolved(),
            "agent_settings": agent_settings(agent),
            "score_batch_size": group_size(agent),
            "checkpoint_every": self.checkpoint_every,
            "select_tasks": self.select_tasks,
        }
