"""``run()``: the search as a short loop; every side effect is a callback.

The loop: build the :class:`~es_search.settings.Settings`, the
:class:`~es_search.Evaluator` (their checks, and the agent's), the strategy and the
callbacks; open the run folder (:class:`~es_search.output.RunFolder`, a callback itself,
fed only by what every callback gets); start the evaluator; score the starting agent or resume from the checkpoint
(:class:`~es_search.search.Search`); then per generation one ``Search.step()`` and every
callback's ``on_generation`` with its outcome -- the run folder first, so a callback that
stops the run leaves a resumable checkpoint -- then the warnings, the progress bar and
the user's callbacks.
"""
from __future__ import annotations

import contextlib

from typing import Any, Callable, Iterable, Mapping

from .agent import Agent
from .callbacks.base import RunInfo, as_callbacks
from .errors import ScoreError, Warnings, WorkerError, interrupted, warn_user
from .front import Evaluator
from .output import RunFolder
from .pickling import check_agent
from .progress import ProgressBar
from .result import Result
from .search import Search
from .seeding import kept_global_rngs
from .selection import SELECT_TASKS, select
from .settings import Settings
from .strategies import DEFAULT, strategy_from

Callback = Callable[[dict], Any]


def run(agent: Agent, *, generations: int, population: int | None = None,
        sigma: float | None = None, strategy: Any = DEFAULT, n_jobs: int | None = -1,
        seed: int = 0, backend: Any = None, progress: bool = True,
        score_kwargs: Mapping[str, Any] | None = None, out: Any = None,
        callbacks: Iterable[Callback] = (),
        strategy_options: Mapping[str, Any] | None = None, resume: bool = False,
        overwrite: bool = False, on_error: str = "raise", max_retries: int = 2,
        task_timeout: float | None = None, sequential_fallback: bool = True,
        checkpoint_every: int = 1, repeat_check: bool = True,
        select_tasks: int = SELECT_TASKS) -> Result:
    """Evolve ``agent`` for ``generations`` generations and return a :class:`Result`.

    Each generation the strategy asks for ``population`` candidates around its centre
    (for the default ``"hill-climb"``: the parent jittered with ``sigma``), all are
    scored in parallel, and the strategy is told the scores (hill-climb: the best of
    parent and candidates becomes the next parent). ``agent`` is not modified.

    - ``strategy``: a name from ``es_search.STRATEGIES`` (``"hill-climb"``,
      ``"adaptive-hill-climb"``, ``"openai-es"``, ``"ars"``, ``"pgpe"``, ``"cma-es"``)
      or a :class:`~es_search.strategies.Strategy` instance, which carries its own
      settings.
    - ``population``, ``sigma`` (default: the strategy's; 16 and 0.1 for hill-climb) and
      ``strategy_options`` (e.g. ``{"reevaluate": True}``) configure a strategy given by
      name.
    - ``n_jobs``: as in joblib: -1 all cores, 1 a plain loop in this process, None
      the ``n_jobs`` of an enclosing ``joblib.parallel_config`` (else 1), 0 an error.
    - ``seed``: the run's seed. Task ``(generation, i)`` runs with
      ``es_search.task_seed(seed, generation, i)``, whatever worker runs it, so the same
      seed gives the same result with any ``n_jobs`` or backend.
    - ``backend``: a joblib backend name; ``None`` respects ``joblib.parallel_config``.
      ``"dask"`` runs on the active dask.distributed Client (or pass the Client),
      ``"ray"`` on Ray (started locally if not running): one actor per worker process,
      the agent sent once per worker, workers that join used from the next generation.
      Thread-based backends are refused (tasks seed the process-wide RNGs).
    - ``progress``: show a tqdm bar over the generations (best and mean score).
    - ``score_kwargs``: keyword arguments for every ``score()`` call.
    - ``out``: a folder to write the run into as it goes (see ``es_search.output``):
      a history line every generation and a checkpoint every ``checkpoint_every``
      generations (default 1). Checkpoints of a large agent or strategy state take
      time (the run warns when they take over a quarter of it); with
      ``checkpoint_every=N`` a SIGKILL or a crash of the machine redoes up to N - 1
      generations on resume (the same result). The end of the run, a stop, Ctrl-C,
      SIGTERM and errors still save every completed generation.
    - ``resume``: continue the run in ``out`` from its checkpoint (a fresh start when
      there is none). The result equals an uninterrupted run's. Settings that would
      change the result (agent class, strategy and its settings, seed, score_kwargs)
      must be as before; ``generations`` may grow; the rest may change.
    - ``overwrite``: replace the run ``out`` holds. Without it (or ``resume``), an
      ``out`` that holds a run is refused before any work: nothing computed is lost by
      mistake.
    - ``callbacks``: callables taking each generation's history record (a dict, see
      ``es_search.record``; its attributes hold the rest of the generation's outcome,
      ``es_search.callbacks.Generation``), or objects with ``on_start`` /
      ``on_generation`` / ``on_end`` / ``on_error`` methods
      (``es_search.callbacks.Callback``); one whose ``on_generation`` returns True
      stops the run after that generation (the run folder and checkpoint already hold
      it, so it can be resumed).
    - ``on_error``: ``"raise"`` (stop with a :class:`~es_search.ScoreError` when a
      ``score()`` raises) or ``"worst"`` (score that candidate -inf, count it in the
      history's ``failures``, go on).
    - ``max_retries``: how often a generation's unfinished candidates are scored again
      on fresh workers when a worker process dies (or a task times out).
    - ``task_timeout``: seconds one ``score()`` call may take in a worker process
      (``n_jobs != 1`` only); a worker over time is killed, as a dead one.
    - ``sequential_fallback``: score a generation in this process when that is measured
      to be faster than a round trip to the workers (same results either way). False
      keeps every generation in the workers, so that a ``score()`` that crashes the
      process kills a worker (retried), not this one; a ``task_timeout`` implies False.
    - ``repeat_check``: before any work, score a copy of the starting agent twice in a
      row under one task seed and warn (:class:`~es_search.UnrepeatableScoreWarning`)
      when the two differ: a ``score()`` that depends on what the agent scored before
      (state kept in ``self``) makes the run depend on ``n_jobs`` and scheduling
      (:func:`es_search.check_repeatable`). False skips it (two ``score()`` calls).
    - ``select_tasks``: at the end, score the best weights and the final centre on this
      many fresh tasks each (a seed stream the search never uses, on the run's workers)
      and hand back the one with the higher mean (``Result.chosen``,
      :meth:`Result.chosen_agent`; :mod:`es_search.selection`). Nothing is tested when
      the centre is the best or the score ignores its task seed (then ``select_tasks``
      calls); 0 turns it off. A resumed run that had ended keeps its selection.

    Scores that are not finite (NaN, +-inf) are recorded but never become the best;
    ``mean_score`` is the mean of the finite ones; the first one warns, once per run.
    """
    settings = Settings.for_run(
        generations=generations, seed=seed, n_jobs=n_jobs, backend=backend,
        score_kwargs=score_kwargs, on_error=on_error, max_retries=max_retries,
        task_timeout=task_timeout, sequential_fallback=sequential_fallback,
        progress=progress, out=out, resume=resume, overwrite=overwrite,
        checkpoint_every=checkpoint_every, repeat_check=repeat_check,
        select_tasks=select_tasks)
    check_agent(agent, workers=settings.n_jobs != 1)  # before the evaluator copies it
    evaluator = Evaluator(agent, settings=settings)  # checks the agent, its score_kwargs
    strategy = strategy_from(strategy, population, sigma, strategy_options)
    strategy.check_size(agent.num_evolved())
    # no more workers than the largest generation (n_jobs=-1 on 64 cores, 16 tasks)
    evaluator.max_workers = strategy.max_tasks(agent.num_evolved())
    if type(agent).jitter_weights is not Agent.jitter_weights and \
            not strategy.uses_jitter_weights:
        name = strategy.name or type(strategy).__name__
        warn_user(f"{type(agent).__name__} overrides jitter_weights(), which only the hill "
                  f"climbers call (hill-climb, adaptive-hill-climb); {name} moves every "
                  f"evolved value by its own noise, so your jitter_weights() is not "
                  f"used. Choose a hill climber, or override evolved_parameters() to "
                  f"choose what evolves.")
    user_callbacks = as_callbacks(callbacks)
    start_agent, config = agent.clone(), settings.config(agent, strategy)
    folder = RunFolder(settings.out, config, settings.resume, settings.overwrite,
                       settings.score_kwargs, settings.checkpoint_every) \
        if settings.out else None
    bar, search = ProgressBar(settings.progress), None
    callbacks: list = [folder] if folder else []  # on_error: a failure of the start too
    ended, scoring = None, True
    if folder and folder.saved and folder.saved["generation"] >= settings.generations:
        ended = folder.selection(settings.select_tasks)  # (chosen, selection) or None
        scoring = not ended and settings.select_tasks > 0  # else no workers to start
    try:
        # the caller's RNGs saved once, not around every generation's tasks
        with kept_global_rngs(), evaluator if scoring else contextlib.nullcontext():
            search = Search(strategy, evaluator)
            start = search.resume(folder.saved) if folder and folder.saved else \
                search.start(settings.seed)
            if strategy.resolved(search.state):  # e.g. reevaluate="auto", decided
                config["resolved"] = strategy.resolved(search.state)
            callbacks += [Warnings(type(agent).__name__, settings.out), bar, *user_callbacks]
            _call_all(callbacks, "on_start", RunInfo(
                config, settings.out, settings.generations, search.next_generation,
                list(search.history), start_agent, start))
            stopped_by = None
            while search.next_generation < settings.generations and stopped_by is None:
                stopped_by = _stop_reason(callbacks, search.step())
            best, center = search.best_weights(), search.center_weights()
            chosen, selection = ended or select(evaluator, best, center,
                                                settings.select_tasks)
            result = Result(best_score=search.best_score, best_weights=best,
                            evaluations=search.evaluations, history=search.history,
                            seed=settings.seed, config=config, agent=start_agent,
                            stopped_by=stopped_by, center_weights=center, chosen=chosen,
                            selection=selection)
        _call_all(callbacks, "on_end", result)
    except BaseException as exc:
        _on_error(callbacks, exc)
        if isinstance(exc, (ScoreError, WorkerError)):
            exc.out = "" if settings.out is None else str(settings.out)  # for its message
        elif isinstance(exc, KeyboardInterrupt):
            interrupted(exc, settings.out, len(search.history) if search is not None else 0)
        raise
    finally:
        bar.close()
        if folder is not None:
            folder.close()
    return result


def _stop_reason(callbacks: list, record: dict) -> str | None:
    """Every callback's ``on_generation(record)``; why the first that said stop did so."""
    answers = [(cb, _call(cb, "on_generation", record)) for cb in callbacks
               if hasattr(cb, "on_generation")]
    for cb, answer in answers:
        if answer:
            return getattr(cb, "reason", None) or f"{cb!r} returned True"
    return None


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
    """``callback.<method>(argument)`` for each callback that has the method, in order."""
    return [_call(cb, method, argument) for cb in callbacks if hasattr(cb, method)]


def _call(callback: Any, method: str, argument: Any) -> Any:
    """``callback.<method>(argument)``; an error it raises carries a note naming it (the
    traceback alone may show only library frames, e.g. a CSV path that cannot be
    created)."""
    try:
        return getattr(callback, method)(argument)
    except Exception as exc:
        if hasattr(exc, "add_note"):  # Python >= 3.11
            exc.add_note(f"es_search: raised by the callback {callback!r} in {method}()")
        raise
