"""The callback protocol: everything that happens beside the search is a callback.

A callback is a callable taking each generation's record (:mod:`es_search.record`),
returning True to stop the run (any other value goes on), or an object with any of the
methods of :class:`Callback`: ``on_start(info)`` once, before the first generation it runs
(also on a resume); ``on_generation(record)`` after every generation, once the run folder
holds it (``record`` is a :class:`Generation`; returning True stops the run, which then
resumes to equal an uninterrupted one); ``on_end(result)`` once, with the
:class:`~es_search.Result`, or ``on_error(error)`` instead when the run raises (an
``on_error`` that raises becomes a warning). Callbacks are not checkpointed: pass them
again when resuming.
"""
from __future__ import annotations

import copy
import difflib
import inspect
import numbers
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, NamedTuple

from ..checks import check
from ..folder import RunDir

HOOKS = ("on_start", "on_generation", "on_end", "on_error")
#: seconds between redraws of the progress bar when stderr is a file, not a terminal
LOG_INTERVAL = 30.0
#: what the tracking callbacks log first, in this order, when present
MAIN = ("best_score", "mean_score", "sigma", "evaluations", "seconds")


@dataclass(frozen=True)
class RunInfo:
    """What a callback learns in ``on_start``: the run's ``config``, its ``out`` folder
    (or None), the ``generations`` it will reach unless stopped, its ``first_generation``
    and the ``history`` already done (a resume), the starting ``agent`` (do not modify
    it), and ``start``, the search as it starts (a :class:`Generation`, empty record)."""

    config: dict
    out: Path | None
    generations: int
    first_generation: int = 0
    history: list = field(default_factory=list)
    agent: Any = None
    start: Generation | None = None


class Failures(NamedTuple):
    """The tasks of a generation that raised: what :func:`es_search.replay_task` needs
    (a ``ScoreError`` or ``WorkerError`` carries its own as ``error.failures``)."""

    generation: int
    center: Any  # the generation's centre, a flat vector
    candidates: list
    indices: list  # of the failed candidates
    detail: Any  # their TaskFailures (on_error="worst"), or the error's repr
    shared: dict | None  # the agent's shared state the tasks loaded


class Generation(dict):
    """A generation's outcome: its history record (this dict) and, as attributes,
    ``improved`` (the best score did), ``failures`` (:class:`Failures` of the tasks
    scored -inf, or None), ``stats`` (``Evaluator.stats``) and ``checkpoint`` (the
    search's state after it). Keep ``dict(record)``, not the record, past the call."""

    def __init__(self, record: dict, improved: bool, failures: Failures | None,
                 stats: dict, checkpoint: dict):
        super().__init__(record)
        self.improved, self.failures, self.stats = improved, failures, stats
        self.checkpoint = checkpoint

    def best_weights(self) -> dict:
        """The best weights, with the shared state they were scored with (a copy)."""
        return copy.deepcopy(self.checkpoint["best_weights"])


class Callback:
    """Base class for callbacks with state; override the methods you need (the module's
    docstring says when each is called; ``on_generation`` returns True to stop)."""

    def on_start(self, info: RunInfo) -> None:
        pass

    def on_generation(self, record: dict) -> bool | None:
        return None

    def on_end(self, result: Any) -> None:
        pass

    def on_error(self, error: BaseException) -> None:
        pass


class FileCallback(Callback):
    """A callback holding something open (a file, a client, a bar) in its attributes
    ``_OPEN``, which are not pickled; closed at the run's end or error."""

    _OPEN: tuple = ()

    def close(self) -> None:
        """Close what it holds; a later generation opens it again."""
        for name in self._OPEN:
            held = getattr(self, name)
            if hasattr(held, "close"):
                held.close()
            setattr(self, name, None)

    def on_end(self, result: Any) -> None:
        self.close()

    def on_error(self, error: BaseException) -> None:
        self.close()

    def __getstate__(self) -> dict:
        return {**self.__dict__, **dict.fromkeys(self._OPEN)}


class FunctionCallback(Callback):
    """A plain callable ``fn(record) -> bool | None`` as a :class:`Callback`."""

    def __init__(self, fn: Callable[[dict], Any]):
        self.fn = fn

    def on_generation(self, record: dict) -> Any:
        return self.fn(record)

    def __repr__(self) -> str:
        name = getattr(self.fn, "__qualname__", None)  # a function: its name, no address
        return f"FunctionCallback({name if isinstance(name, str) else repr(self.fn)})"


def as_callbacks(callbacks: Iterable[Any], out: Any = None) -> list[Callback]:
    """Check and wrap ``callbacks`` (at the call, before any work); none may write over a
    file of the run folder ``out``."""
    if callable(callbacks) or isinstance(callbacks, Callback):
        callbacks = [callbacks]
    check("callbacks", callbacks, not isinstance(callbacks, (str, bytes)) and hasattr(
        callbacks, "__iter__"), "a list of callables taking the generation's record (a "
        "dict) or of es_search.callbacks.Callback objects")
    wrapped: list[Callback] = []
    for i, cb in enumerate(callbacks):
        if isinstance(cb, type):  # callable, and has the methods: it would fail later
            raise TypeError(f"callbacks[{i}] is the class {cb.__name__} itself; pass an "
                            f"instance: {cb.__name__}(...)")
        for name in dir(type(cb)):  # a misspelled hook, which a run would never call
            close = name.startswith("on_") and name not in HOOKS and \
                difflib.get_close_matches(name, HOOKS, n=1, cutoff=0.8)
            if close:
                raise TypeError(f"callbacks[{i}] ({type(cb).__name__}) defines {name}(), "
                                f"which a run never calls (did you mean {close[0]!r}?); "
                                f"the hooks are {', '.join(HOOKS)}")
        path = getattr(cb, "path", None) if isinstance(cb, FileCallback) else None
        own = out is not None and path is not None and RunDir(out).owns(path)
        if own:
            raise ValueError(f"{cb!r} would write over the run folder's own {own} (in "
                             f"{out}): give it a file of its own")
        if isinstance(cb, Callback) or any(hasattr(cb, m) for m in HOOKS):
            wrapped.append(cb)  # duck-typed: missing methods are skipped by the run
        elif callable(cb):
            try:  # a builtin may not say what it takes: it is tried at the first generation
                inspect.signature(cb, follow_wrapped=False).bind({})
            except TypeError:
                raise TypeError(f"callbacks[{i}] ({getattr(cb, '__qualname__', cb)!r}) "
                                f"must take one argument, the generation's record (a "
                                f"dict): def callback(record): ...") from None
            except ValueError:
                pass
            wrapped.append(FunctionCallback(cb))
        else:
            raise TypeError(f"callbacks must be callables taking the generation's record "
                            f"(a dict) or objects with on_start/on_generation/on_end/"
                            f"on_error methods (es_search.callbacks.Callback), got {cb!r}")
    return wrapped


def scalars(record: dict) -> Iterator[tuple[str, float]]:
    """``(name, value)`` for each number in ``record`` but ``generation``, ``MAIN`` first:
    what the tracking callbacks log."""
    for name in sorted(record, key=lambda k: MAIN.index(k) if k in MAIN else len(MAIN)):
        value = record[name]
        if name != "generation" and isinstance(value, numbers.Real) and \
                not isinstance(value, bool):
            yield name, float(value)


class ProgressBar(FileCallback):
    """The run's tqdm bar over generations, with the best and mean score (``enabled=False``:
    none), redrawn every ``LOG_INTERVAL`` seconds into a file."""

    _OPEN = ("_bar",)

    def __init__(self, enabled: bool = True):
        self.enabled = enabled
        self._bar: Any = None

    def on_start(self, info: RunInfo) -> None:
        if self.enabled:
            from tqdm.auto import tqdm
            isatty = getattr(sys.stderr, "isatty", None)
            to_file = not tqdm.__module__.startswith("tqdm.notebook") and not (
                isatty and isatty())
            self._bar = tqdm(total=info.generations, initial=info.first_generation,
                             desc="es_search", unit="gen", dynamic_ncols=True,
                             mininterval=LOG_INTERVAL if to_file else 0.1)

    def on_generation(self, record: dict) -> None:
        if self._bar is not None:
            self._bar.set_postfix(best=f"{record['best_score']:.4g}",
                                  mean=f"{record['mean_score']:.4g}", refresh=False)
            self._bar.update(1)
