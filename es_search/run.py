"""``run()``: the one place that wires strategy, evaluation, progress and output."""
from __future__ import annotations

import time
from typing import Any, Callable, Iterable, Mapping

from .agent import Agent
from .candidates import Candidate
from .checks import check_int, check_n_jobs, check_seed
from .evaluation import Evaluator
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
        strategy_options: Mapping[str, Any] | None = None) -> Result:
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
    - ``out``: a folder to write the run into as it goes (see ``es_search.output``).
    - ``callbacks``: callables taking each generation's history record; one that returns
      True stops the run after that generation.

    Scores that are not finite (NaN, +-inf) are recorded but never become the best;
    ``mean_score`` is the mean of the finite ones.
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
    score_kwargs = dict(score_kwargs or {})
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

    started = time.perf_counter()
    history: list[dict] = []
    writer = RunDirectory(out, config) if out is not None else None
    bar = ProgressBar(generations, enabled=progress)
    try:
        with Evaluator(agent, seed=seed, n_jobs=n_jobs, backend=backend,
                       score_kwargs=score_kwargs) as evaluator:
            center = evaluator.local.get_flat()
            start_score = evaluator.score(-1, center, [Candidate("center")])[0]
            evaluations = 1
            state = strategy.init(center, start_score, seed)
            best_score, best_flat = start_score, center
            for generation in range(generations):
                center = strategy.center(state)
                candidates = strategy.ask(state, generation)
                scores = evaluator.score(generation, center, candidates)
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
                record = {
                    "generation": generation,
                    "best_score": best_score,
                    "mean_score": finite_mean(scores),
                    "scores": scores,
                    "sigma": strategy.sigma(state),
                    "nonfinite": count_nonfinite(scores),
                    "evaluations": evaluations,
                    "seconds": time.perf_counter() - started,
                }
                history.append(record)
                if writer is not None:
                    writer.record(record, _weights(evaluator.local, best_flat)
                                  if improved or generation == 0 else None)
                bar.update(record)
                if any([bool(cb(record)) for cb in callbacks]):
                    break
            best_weights = _weights(evaluator.local, best_flat)
    finally:
        bar.close()
        if writer is not None:
            writer.close()
    result = Result(best_score=best_score, best_weights=best_weights,
                    evaluations=evaluations, history=history, seed=seed, config=config,
                    agent=start_agent)
    if writer is not None:
        writer.finish({"best_score": best_score, "evaluations": evaluations,
                       "generations": len(history), "seconds": time.perf_counter() - started,
                       "seed": seed}, history)
    return result


def _weights(agent: Agent, flat: Any) -> dict:
    agent.set_flat(flat)
    return agent.get_weights()
