"""``run()``: the one place that wires strategy, evaluation, progress and output."""
from __future__ import annotations

import sys
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from .agent import Agent
from .candidates import Candidate
from . import checkpoint
from .checks import check_int, check_n_jobs, check_positive_float, check_seed
from .errors import ScoreError, WorkerError, check_on_error
from .evaluation import Evaluator
from .interrupt import deferred_sigint
from .pickling import check_agent
from .replay import failure_path
from .output import RunDirectory
from .progress import ProgressBar
from .result import Result
from .scores import best_index, count_nonfinite, finite_mean, is_better
from .strategies import DEFAULT, make_strategy

Callback = Callable[[dict], Any]


def run(agent: Agent, *, generations: int, population: int | None = None,
        sigma: float | None = None, strategy: Any = DEFAULT, n_jobs: int = -1,
        seed: int = 0, backend: Any = None, progress: bool = True,
        score_kwargs: Mapping[str, Any] | None = None, out: Any = None,
        callbacks: Iterable[Callback] = (),
        strategy_options: Mapping[str, Any] | None = None, resume: bool = False,
        on_error: str = "raise", max_retries: int = 2,
        task_timeout: float | None = None, sequential_fallback: bool = True) -> Result:
    """Evolve ``agent`` for ``generations`` generations and return a :class:`Result`.

    Each generation the strategy asks for ``population`` candidates around its centre
    (for the default ``"hill-climb"``: the parent jittered with ``sigma``), all are
    scored in parallel, and the strategy is told the scores (hill-climb: the best of
    parent and candidates becomes the next parent). ``agent`` is not modified.

    - ``strategy``: a name from ``es_search.STRATEGIES`` (``"hill-climb"``,
      ``"adaptive-hill-climb"``, ``"openai-es"``, ``"cma-es"``) or a
      :class:`~es_search.strategies.Strategy` instance, which carries its own settings.
    - ``population``, ``sigma`` (default: the strategy's; 16 and 0.1 for hill-climb) and
      ``strategy_options`` (e.g. ``{"reevaluate": True}``) configure a strategy given by
      name.
    - ``n_jobs``: as in joblib: -1 all cores, 1 a plain loop in this process, 0 an error.
    - ``seed``: the run's seed. Task ``(generation, i)`` runs with
      ``es_search.task_seed(seed, generation, i)``, whatever worker runs it, so the same
      seed gives the same result with any ``n_jobs`` or backend.
    - ``backend``: a joblib backend name; ``None`` respects ``joblib.parallel_config``.
      Thread-based backends are refused (tasks seed the process-wide RNGs).
    - ``score_kwargs``: keyword arguments for every ``score()`` call.
    - ``out``: a folder to write the run into as it goes (see ``es_search.output``),
      including a checkpoint after every generation.
    - ``resume``: continue the run in ``out`` from its checkpoint (a fresh start when
      there is none). The result equals an uninterrupted run's. Settings that would
      change the result (agent class, strategy and its settings, seed, score_kwargs)
      must be as before; ``generations`` may grow; the rest may change.
    - ``callbacks``: callables taking each generation's history record; one that returns
      True stops the run after that generation.
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

    Scores that are not finite (NaN, +-inf) are recorded but never become the best;
    ``mean_score`` is the mean of the finite ones; the first one warns, once per run.
    """
    if not isinstance(agent, Agent):
        raise TypeError(f"agent must be an es_search.Agent (a torch.nn.Module with a "
                        f"score() method), got {type(agent).__name__}")
    generations = check_int("generations", generations, 1)
    n_jobs = check_n_jobs(n_jobs)
    seed = check_seed(seed)
    strategy = make_strategy(strategy, population, sigma, **dict(strategy_options or {}))
    callbacks = list(callbacks)
    for cb in callbacks:
        if not callable(cb):
            raise TypeError(f"callbacks must be callables taking a dict, got {cb!r}")
    if not isinstance(score_kwargs, Mapping) and score_kwargs is not None:
        raise TypeError(f"score_kwargs must be a dict of keyword arguments for score(), "
                        f"got {type(score_kwargs).__name__}")
    score_kwargs = dict(score_kwargs or {})
    if not isinstance(resume, bool):
        raise TypeError(f"resume must be True or False, got {resume!r}")
    if resume and out is None:
        raise ValueError("resume=True continues the run saved in an out folder; "
                         "pass out=<that folder>")
    check_on_error(on_error)
    max_retries = check_int("max_retries", max_retries, 0)
    if task_timeout is not None:
        task_timeout = check_positive_float("task_timeout", task_timeout)
        if n_jobs == 1:
            raise ValueError("task_timeout needs worker processes (n_jobs != 1): a "
                             "score() running in this process cannot be stopped")
    check_agent(agent, workers=n_jobs != 1)
    start_agent = agent.clone()
    config = {
        "agent": f"{type(agent).__module__}.{type(agent).__qualname__}",
        "strategy": strategy.config(),
        "generations": generations,
        "seed": seed,
        "score_kwargs": score_kwargs,
        "n_jobs": n_jobs,
        "backend": backend if backend is None or isinstance(backend, str) else repr(backend),
        "num_evolved": agent.num_evolved(),
    }
    saved = _load_checkpoint(out, config, generations) if resume else None

    started = time.perf_counter()
    history: list[dict] = list(saved["history"]) if saved else []
    offset = history[-1]["seconds"] if history else 0.0
    writer = RunDirectory(out, config, append=bool(saved)) if out is not None else None
    if writer is not None:  # temporary files of writes a crash cut short
        for tmp in writer.path.glob(".*.tmp"):
            tmp.unlink(missing_ok=True)
    if saved:  # history.jsonl as of the checkpoint (replaced atomically)
        writer.rewrite_history(saved["history_text"])
    elif writer is not None:  # a new run: no stale checkpoint or failure records
        _clear(writer.path)
    first = saved["generation"] if saved else 0
    bar = ProgressBar(generations, enabled=progress, initial=first)
    warned = {"nonfinite": False, "failures": False}
    try:
        with Evaluator(agent, seed=seed, n_jobs=n_jobs, backend=backend,
                       score_kwargs=score_kwargs, on_error=on_error,
                       max_retries=max_retries, task_timeout=task_timeout,
                       sequential_fallback=sequential_fallback) as evaluator:

            def score(generation: int, center: Any, candidates: list) -> list[float]:
                try:
                    scores = evaluator.score(generation, center, candidates)
                except (ScoreError, WorkerError) as exc:
                    failed = ([exc.index] if isinstance(exc, ScoreError) else exc.indices)
                    _save_failures(out, generation, center, candidates, seed,
                                   score_kwargs, failed, exc)
                    _explain(exc, out, generation)
                    raise
                if evaluator.failures:
                    _save_failures(out, generation, center, candidates, seed,
                                   score_kwargs, [f.index for f in evaluator.failures],
                                   evaluator.failures)
                    _warn_once(warned, "failures", _failure_message(
                        agent, evaluator.failures, out))
                return scores

            if saved:
                state, evaluations = saved["state"], saved["evaluations"]
                best_score, best_flat = saved["best_score"], saved["best_flat"]
                writer.save_weights(_weights(evaluator.local, best_flat))
            else:
                center = evaluator.local.get_flat()
                start_score = score(-1, center, [Candidate("center")])[0]
                evaluations = 1
                state = strategy.init(center, start_score, seed)
                best_score, best_flat = start_score, center
                _checkpoint(writer, 0, strategy, state, best_score, best_flat,
                            evaluations, config)
            for generation in range(first, generations):
                center = strategy.center(state)
                candidates = strategy.ask(state, generation)
                scores = score(generation, center, candidates)
                failures = len(evaluator.failures)
                evaluations += len(scores)
                rebuilt: dict[int, Any] = {}

                def rebuild(i: int) -> Any:
                    if i not in rebuilt:
                        rebuilt[i] = evaluator.rebuild(generation, center, candidates[i], i)
                    return rebuilt[i]

                state = strategy.tell(state, generation, candidates, scores, rebuild)
                improved = False
                top = best_index(scores)
                if top is not None and is_better(scores[top], best_score):
                    best_score, best_flat, improved = scores[top], rebuild(top), True
                nonfinite = count_nonfinite(scores) - failures
                record = {
                    "generation": generation,
                    "best_score": best_score,
                    "mean_score": finite_mean(scores),
                    "scores": scores,
                    "sigma": strategy.sigma(state),
                    "nonfinite": nonfinite,
                    "failures": failures,
                    "evaluations": evaluations,
                    "seconds": offset + time.perf_counter() - started,
                }
                if nonfinite:
                    _warn_once(warned, "nonfinite", _nonfinite_message(agent, generation,
                                                                       nonfinite))
                history.append(record)
                if writer is not None:
                    with deferred_sigint():  # history line and checkpoint stay whole
                        writer.record(record, _weights(evaluator.local, best_flat)
                                      if improved or generation == 0 else None)
                        _checkpoint(writer, generation + 1, strategy, state, best_score,
                                    best_flat, evaluations, config)
                bar.update(record)
                if any([bool(cb(record)) for cb in callbacks]):
                    break
            best_weights = _weights(evaluator.local, best_flat)
    except KeyboardInterrupt:
        _interrupted(out, len(history))
        raise
    finally:
        bar.close()
        if writer is not None:
            writer.close()
    result = Result(best_score=best_score, best_weights=best_weights,
                    evaluations=evaluations, history=history, seed=seed, config=config,
                    agent=start_agent)
    if writer is not None:
        writer.finish({"best_score": best_score, "evaluations": evaluations,
                       "generations": len(history), "seconds": offset +
                       time.perf_counter() - started, "seed": seed}, history)
    return result


def _load_checkpoint(out: Any, config: dict, generations: int) -> dict | None:
    """The checkpoint in ``out`` if there is one, checked against ``config``."""
    path = Path(out) / checkpoint.CHECKPOINT
    if not path.exists():
        return None
    saved = checkpoint.load(path)
    checkpoint.check_resumable(saved["config"], config, str(out))
    if generations < saved["generation"]:
        raise ValueError(
            f"the run in {out} has already completed {saved['generation']} generations; "
            f"resume it with generations >= {saved['generation']} (it cannot be shortened)")
    saved["history"], saved["history_text"] = checkpoint.verified_history(
        out, saved["history_lines"], saved["history_sha256"])
    return saved


def _checkpoint(writer: RunDirectory | None, generation: int, strategy: Any, state: Any,
                best_score: float, best_flat: Any, evaluations: int, config: dict) -> None:
    """Save what continuing before ``generation`` needs (``generation`` = completed).

    The history is not copied into every checkpoint (that would grow with the run):
    the checkpoint holds the number and SHA-256 of the ``history.jsonl`` lines written
    before it, which a resume checks and reads back.
    """
    if writer is None:
        return
    checkpoint.save(writer.path / checkpoint.CHECKPOINT, {
        "generation": generation, "strategy": strategy, "state": state,
        "best_score": best_score, "best_flat": best_flat, "evaluations": evaluations,
        "history_lines": writer.history_lines, "history_sha256": writer.history_digest(),
        "config": config})


def _clear(path: Path) -> None:
    (path / checkpoint.CHECKPOINT).unlink(missing_ok=True)
    for record in (path / checkpoint.FAILURES).glob("generation-*.pkl"):
        record.unlink()


def _save_failures(out: Any, generation: int, center: Any, candidates: list, seed: int,
                   score_kwargs: dict, indices: list, detail: Any) -> None:
    """What ``replay_task(agent, out=out, generation=g, index=i)`` needs."""
    if out is None:
        return
    path = failure_path(out, generation)
    path.parent.mkdir(parents=True, exist_ok=True)
    checkpoint.save(path, {"generation": generation, "center": center,
                           "candidates": list(candidates), "seed": seed,
                           "score_kwargs": score_kwargs, "indices": list(indices),
                           "detail": detail if isinstance(detail, list) else repr(detail)})


def _explain(exc: Exception, out: Any, generation: int) -> None:
    """Add to ``exc`` where the run's work is and how to go on."""
    if isinstance(exc, ScoreError):
        exc.out = None if out is None else str(out)
        return
    note = (f" The checkpoint in {out} (generations before {generation}) is intact: "
            f"after fixing the cause, continue with run(..., out={str(out)!r}, resume=True)."
            if out is not None else " Nothing was saved (no out folder).")
    exc.args = (str(exc.args[0]) + note,) + exc.args[1:]


def _warn_once(warned: dict, kind: str, message: str) -> None:
    if not warned[kind]:
        warned[kind] = True
        warnings.warn(message, RuntimeWarning, stacklevel=3)


def _nonfinite_message(agent: Agent, generation: int, count: int) -> str:
    return (f"{type(agent).__name__}.score() returned a non-finite value (NaN or inf) for "
            f"{count} candidate(s) of generation {generation}; such candidates are never "
            f"kept. The history's 'nonfinite' counts them per generation (this warning "
            f"is given once per run).")


def _failure_message(agent: Agent, failures: list, out: Any) -> str:
    first = failures[0]
    source = f"out={str(out)!r}" if out is not None else "seed=..., center=..., candidate=..."
    return (f"{type(agent).__name__}.score() raised on {len(failures)} candidate(s) of "
            f"generation {first.generation}; on_error='worst' scored them -inf and the run "
            f"goes on. The history's 'failures' counts them per generation (this warning "
            f"is given once per run). Replay one with es_search.replay_task(agent, "
            f"{source}, generation={first.generation}, index={first.index}). First "
            f"traceback:\n{first.traceback}")


def _interrupted(out: Any, completed: int) -> None:
    if out is None:
        print(f"es_search: interrupted after {completed} completed generation(s); nothing "
              f"was saved (pass out=DIR to checkpoint a run).", file=sys.stderr)
        return
    print(f"es_search: interrupted after {completed} completed generation(s), all saved in "
          f"{out}; continue with run(..., out={str(out)!r}, resume=True) and the same "
          f"settings.", file=sys.stderr)


def _weights(agent: Agent, flat: Any) -> dict:
    agent.set_flat(flat)
    return agent.get_weights()
