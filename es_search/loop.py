"""``run()``: the search as a short loop; every side effect is a callback, the run folder
(:class:`~es_search.folder.RunFolder`) first, so that a callback that stops the run leaves
a resumable checkpoint."""
from __future__ import annotations

import contextlib
import sys
import textwrap
from dataclasses import fields
from typing import Any, Callable, Iterable, Mapping

import numpy as np

from .agent import Agent, overrides, stop_import_at_run
from .callbacks.base import ProgressBar, RunInfo, as_callbacks
from .checks import check, check_int
from .errors import ScoreError, WorkerError, render, warn_user
from .front import Evaluator
from .folder import RunFolder
from .result import Result
from .search import Search
from .seeding import kept_global_rngs
from .selection import BEST, CENTER, SELECT_TASKS, select
from .settings import DOCUMENTED, Settings
from .spec import RunSpec
from .strategies import DEFAULT, strategy_from

Callback = Callable[[dict], Any]


def run(agent: Agent | RunSpec, *, generations: int | None = None,
        population: int | None = None, sigma: float | None = None, strategy: Any = DEFAULT,
        n_jobs: int | None = -1, seed: int = 0, backend: Any = None, progress: bool = True,
        score_kwargs: Mapping[str, Any] | None = None, out: Any = None,
        callbacks: Iterable[Callback] = (),
        strategy_options: Mapping[str, Any] | None = None, resume: bool = False,
        overwrite: bool = False, on_error: str = "raise", max_retries: int = 2,
        task_timeout: float | None = None, sequential_fallback: bool = True,
        checkpoint_every: int = 1, repeat_check: bool = True,
        select_tasks: int = SELECT_TASKS) -> Result:
    """Evolve ``agent`` for ``generations`` generations and return a :class:`Result`.
    ``agent`` may be a :class:`~es_search.spec.RunSpec` (a problem and its parameters,
    the strategy, size, length and seed, as data): ``run(RunSpec("cartpole"), n_jobs=2)``.

    Each generation the strategy asks for ``population`` candidates around its centre,
    all are scored in parallel, and the strategy is told the scores. ``agent`` is not
    modified. Scores that are not finite are recorded (the first warns), never the best.

    - ``strategy``: a name from ``es_search.STRATEGIES`` or a
      :class:`~es_search.strategies.Strategy` instance (which carries its own settings);
      ``population``, ``sigma`` (default: the strategy's; 16 and 0.1 for hill-climb) and
      ``strategy_options`` (e.g. ``{"reevaluate": True}``) configure one given by name.
    - ``seed``: task ``(generation, i)`` runs under ``es_search.task_seed(seed,
      generation, i)``, whatever worker runs it: the same seed, the same result with
      any ``n_jobs`` or backend.
    - ``score_kwargs``: keyword arguments for every ``score()`` call.
    - ``callbacks``: callables taking each generation's history record
      (``es_search.record``; its attributes hold the rest of the outcome,
      ``es_search.callbacks.Generation``), or objects with ``on_start`` /
      ``on_generation`` / ``on_end`` / ``on_error`` (``es_search.callbacks.Callback``);
      an ``on_generation`` that returns True stops the run after that generation.
    """
    arguments = locals()  # every field of Settings is an argument
    stop_import_at_run(sys._getframe(1))
    spec = agent.resolved() if isinstance(agent, RunSpec) else None
    if spec is not None:
        for name, default in (("generations", None), ("population", None), ("sigma", None),
                              ("strategy", DEFAULT), ("strategy_options", None), ("seed", 0)):
            check(name, arguments[name], arguments[name] == default, "set by the RunSpec "
                  "given, not beside it", f"give it to the RunSpec: RunSpec(..., {name}=...)")
        arguments.update(generations=spec.generations, seed=spec.seed)
    check_int("generations", arguments["generations"], 1,  # a run's: required
              " (required: how many generations the run lasts)")
    settings = Settings(**{setting.name: arguments[setting.name] for setting in fields(Settings)})
    user_callbacks = as_callbacks(callbacks, settings.out)
    if spec is not None:  # checked: now its agent (an environment, a dataset...)
        agent = spec.build_agent(settings.score_kwargs)
        population, sigma = spec.population, spec.sigma
        strategy, strategy_options = spec.strategy, spec.strategy_options
    evaluator = Evaluator(agent, settings=settings)  # checks the agent, its score_kwargs
    strategy = strategy_from(strategy, population, sigma, strategy_options).sized(
        agent.num_evolved())
    if spec is None and settings.out:  # what es-search test and --resume rebuild
        spec = RunSpec.describing(agent, strategy, settings.generations, settings.seed)
    # no more workers than the largest generation (n_jobs=-1 on 64 cores, 16 tasks)
    evaluator.max_workers = strategy.max_tasks(agent.num_evolved())
    if overrides(agent, "jitter_weights") and not strategy.uses_jitter_weights:
        warn_user(f"{type(agent).__name__} overrides jitter_weights(), which only the hill "
                  f"climbers call (hill-climb, adaptive-hill-climb); "
                  f"{strategy.name or type(strategy).__name__} moves every evolved value by "
                  f"its own noise, so your jitter_weights() is not used. Choose a hill "
                  f"climber, or override evolved_parameters() to choose what evolves.")
    start_agent, config = agent.clone(), settings.config(agent, strategy, spec)
    bar, search = ProgressBar(settings.progress), Search(strategy, evaluator)  # no tqdm yet
    folder = RunFolder(settings, config) if settings.out else None  # its lock taken
    callbacks: list = [folder] if folder else []  # on_error: a failure of the start too
    try:
        saved = folder.open() if folder else None  # closed by the finally if refused
        ended, scoring = None, True  # ended: a finished run's (chosen, selection), reused
        if saved and saved["generation"] >= settings.generations:
            end = folder.end()  # reused when its test had as many tasks
            if end.get("select_tasks") == settings.select_tasks:
                ended = end["chosen"], end["selection"]
            scoring = not ended and settings.select_tasks > 0  # else no workers to start
        # the caller's RNGs saved once, not around every generation's tasks
        with kept_global_rngs(), evaluator if scoring else contextlib.nullcontext():
            start = search.resume(saved) if saved else search.start(settings.seed)
            if strategy.resolved(search.state):  # e.g. reevaluate="auto", decided
                config["resolved"] = strategy.resolved(search.state)
            callbacks += [bar, *user_callbacks]
            _call_all(callbacks, "on_start", RunInfo(
                config, settings.out, settings.generations, len(search.history),
                list(search.history), start_agent, start))
            stop: list = []  # the callbacks whose on_generation() said stop
            while len(search.history) < settings.generations and not stop:
                stop = _call_all(callbacks, "on_generation", search.step())
            stopped_by = (getattr(stop[0], "reason", None) or f"{stop[0]!r} returned True"
                          ) if stop else None
            if folder:  # the whole search saved before its end's selection scores
                folder.save_pending()
            candidates = {BEST: search.best, CENTER: search.center_weights(),
                          **search.snapshot_weights()}
            chosen, selection = ended or select(evaluator, candidates,
                                                settings.select_tasks)
            result = Result(best_score=search.best_score, best_weights=candidates[BEST],
                            evaluations=search.evaluations, history=search.history,
                            seed=settings.seed, config=config, agent=start_agent,
                            stopped_by=stopped_by, center_weights=candidates[CENTER],
                            chosen=chosen, chosen_weights=candidates[chosen],
                            selection=selection)
        _call_all(callbacks, "on_end", result)
    except BaseException as exc:
        _on_error(callbacks, exc)
        if isinstance(exc, (ScoreError, WorkerError)):
            exc.out = "" if settings.out is None else str(settings.out)  # for its message
        elif isinstance(exc, KeyboardInterrupt):
            interrupted(exc, settings.out, len(search.history))
        raise
    finally:
        bar.close()
        if folder is not None:
            folder.close()
    return result


if run.__doc__:  # the settings' own help (es-search run's flags'), for help(run)
    run.__doc__ = run.__doc__.rstrip() + "\n" + "\n".join(textwrap.fill(
        f"``{setting.name}``: {render(setting.metadata['help'])}", 88,
        initial_indent="    - ", subsequent_indent="      ") for setting in DOCUMENTED)


def _on_error(callbacks: list, error: BaseException) -> None:
    """Every callback's ``on_error(error)``; what they raise becomes a warning."""
    for cb in callbacks:
        if hasattr(cb, "on_error"):
            try:
                cb.on_error(error)
            except Exception as failure:  # noqa: BLE001 - never hide the run's error
                warn_user(f"{cb!r}.on_error raised {failure!r} while the run was "
                          f"failing with {error!r}")


def _call_all(callbacks: list, method: str, argument: Any) -> list:
    """``callback.<method>(argument)`` for each callback that has the method, in order;
    the callbacks whose call returned True (a bool: a logging lambda's count stops nothing)."""
    return [cb for cb in callbacks if hasattr(cb, method)
            and ((said := _call(cb, method, argument)) is True or said is np.True_)]


def _call(callback: Any, method: str, argument: Any) -> Any:
    """``callback.<method>(argument)``; an error it raises carries a note naming it (its
    traceback may show only library frames)."""
    try:
        return getattr(callback, method)(argument)
    except Exception as exc:
        exc.add_note(f"es_search: raised by the callback {callback!r} in {method}()")
        raise


def interrupted(exc: BaseException, out: Any, completed: int) -> None:
    """Add to ``exc`` (Ctrl-C, SIGTERM) a note: what was saved and how to continue."""
    exc.add_note(f"es_search: interrupted after {completed} completed generation(s)" + (
        "; nothing was saved (pass out=DIR to checkpoint a run)." if out is None else
        f", all saved in {out}; continue with run(..., out={str(out)!r}, resume=True) "
        f"and the same settings."))
