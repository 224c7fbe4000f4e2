"""Replaying one scoring task in this process, e.g. to debug a ``score()`` that failed."""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from . import checkpoint
from .agent import Agent
from .candidates import Candidate
from .checks import check, check_int, check_is_agent, check_seed
from .folder import CHECKPOINT, RunDir
from .seeding import in_process_tasks
from .worker import Payload, run_task


def _from_run_dir(run: RunDir, generation: int, index: int) -> dict:
    """What defines task ``(generation, index)`` of the run in ``run`` beside its config:
    its failure record, else the checkpoint when it would run that generation next."""
    if run.failure_path(generation).exists():
        task = checkpoint.load(run.failure_path(generation))
    elif (run.path / CHECKPOINT).exists():
        saved = checkpoint.load(run.path / CHECKPOINT)
        if saved["generation"] != generation:
            stored = ", ".join(map(str, run.failure_generations())) or "none here"
            raise ValueError(
                f"{run.path} cannot replay generation {generation}: a run folder keeps what "
                f"a replay needs for the generation its checkpoint would run next "
                f"({saved['generation']}) and for generations with failed candidates "
                f"({stored}). Pass seed=, center= and candidate= instead")
        strategy, state = saved["strategy"], saved["state"]
        task = {"center": strategy.center(state), "candidates": strategy.ask(state, generation),
                "shared": saved["shared"]}
    else:
        raise FileNotFoundError(
            f"{run.path} holds neither a checkpoint nor a failure record for generation "
            f"{generation}; pass seed=, center= and candidate= instead")
    if not 0 <= index < len(task["candidates"]):
        raise IndexError(f"generation {generation} of the run in {run.path} has "
                         f"{len(task['candidates'])} candidates; index {index} is out of range")
    return task


def replay_task(agent: Agent, *, generation: int, index: int, out: Any = None,
                seed: int | None = None, center: Any = None,
                candidate: Candidate | None = None,
                weights: Mapping[str, Any] | None = None,
                score_kwargs: Mapping[str, Any] | None = None,
                return_agent: bool = False) -> Any:
    """Run task ``(generation, index)`` in this process and return its score.

    Exactly what the worker did (task seed, candidate weights, ``score_kwargs``); an
    exception in ``score()`` propagates unwrapped, so a debugger stops in your code.
    Which task:

    - ``out=DIR``: read from the run folder's failure record of ``generation`` (any
      generation with a failed task has one), or its checkpoint when ``generation`` is
      the next one (e.g. the one a Ctrl-C interrupted);
    - ``seed=`` (the run's), ``center=`` (a flat vector; default: the agent's weights)
      and ``candidate=`` (default ``Candidate("center")``, generation -1's);
    - a task of :func:`~es_search.evaluate`: its ``seed=`` and ``generation=``, and
      ``weights=`` its ``weights[index]``.

    The task runs on a copy of ``agent``; ``return_agent=True`` returns ``(score, copy)``.
    """
    check_is_agent(agent)
    generation = check_int("generation", generation, -1, " (-1: the starting agent's "
                           "evaluation)")
    index = check_int("index", index, 0, " (the candidate's index in its generation)")
    if out is not None and any(v is not None for v in (seed, center, candidate, weights)):
        raise ValueError("pass either out= (a run folder) or seed=/center=/candidate= "
                         "(or weights=), not both")
    if weights is not None and candidate is not None:
        raise ValueError("pass either weights= (a weights dict given to evaluate()) or "
                         "candidate=, not both")
    shared = None
    if out is not None:
        run = RunDir(out)
        task, config = _from_run_dir(run, generation, index), run.config
        seed, center, shared = config["seed"], task["center"], task["shared"]
        candidate = task["candidates"][index]
        run.check_agent(agent, config["agent"], np.size(center))
        if score_kwargs is None:
            score_kwargs = run.score_kwargs(config["score_kwargs"])
    elif seed is None:
        raise TypeError("replay_task needs out= (a run folder) or seed= (the run's seed) "
                        "to know the task's seed")
    elif weights is not None:  # as Evaluator.evaluate sends it
        if not isinstance(weights, Mapping):
            raise TypeError(f"weights must be one weights dict (name -> tensor), the one "
                            f"given to evaluate() for this task, got {type(weights).__name__}")
        candidate = Candidate("weights", vector=dict(weights))
    candidate = Candidate("center") if candidate is None else candidate
    check("candidate", candidate, isinstance(candidate, Candidate), "an es_search.Candidate")
    seed = check_seed(seed)
    copy = agent.clone()
    center = copy.get_flat() if center is None else np.asarray(center, dtype=np.float64)
    payload = Payload(center, dict(score_kwargs or {}), shared)
    with in_process_tasks():
        value, _ = run_task(copy, payload, candidate, seed, generation, index)
    return (value, copy) if return_agent else value

