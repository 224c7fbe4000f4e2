"""The worker side of the engine: one seeded task (:func:`run_task`, wherever it runs),
a group of tasks in one ``Agent.score_batch`` call, a worker's chunk; the agent on its
way to the workers, pickled once per run as a skeleton (its evolved parameters
stripped), unpickled once per worker process and cached with its payload."""
from __future__ import annotations

import copy
import functools
import os
import traceback
from typing import Any, Callable, Mapping, NamedTuple, Sequence

import numpy as np
import torch

from . import backends as _backends
from . import candidates as _candidates
from .agent import Agent, overrides
from .batched import as_scores, group_size, has_score_batch
from .candidates import Candidate
from .errors import ScoreError, TaskFailure, candidates_named, generation_name
from .pickling import cloudpickle
from .scores import NotAScore, as_score
from .seed_sequences import SELECTION_GENERATION
from .seeding import seed_global_rngs, stream_seed, task_seed, task_seeds


class Payload(NamedTuple):
    """What every task of a generation shares (``shared``: ``Agent.shared_state()``)."""

    center: np.ndarray
    score_kwargs: Mapping[str, Any]
    shared: Mapping[str, Any] | None = None


@functools.lru_cache(maxsize=16)  # once per generation, not per task (~20 us each)
def generation_seed(seed: int, generation: int) -> int:
    """The seed every task of ``generation`` shares (``agent.generation_seed``)."""
    return stream_seed(seed, 2, generation + 1)


def has_hooks(agent: Any) -> bool:
    """Whether ``agent`` overrides a shared-statistics hook of :class:`Agent` (else the
    engine skips reports, merges and shared state)."""
    return any(overrides(agent, name) for name in ("task_report", "merge_reports",
                                                     "shared_state", "load_shared_state"))


def _set_task(agent: Agent, seed_of_task: int | None, seed: int = 0,
              generation: int | None = None) -> None:
    """Set ``task_seed`` and, from ``generation`` (None: outside a task), ``generation_seed``
    and ``selecting`` in the agent's ``__dict__`` (``nn.Module.__setattr__`` costs ~1 us each)."""
    agent.__dict__.update(
        task_seed=seed_of_task, selecting=generation == SELECTION_GENERATION,
        generation_seed=None if generation is None else generation_seed(seed, generation))


def run_task(agent: Agent, payload: Payload, candidate: Candidate, seed: int,
             generation: int, index: int, *, score: bool = True,
             seed_of_task: int | None = None) -> tuple[float, Any]:
    """Task ``(generation, index)`` of the run seeded ``seed``, built around
    ``payload.center`` on ``agent`` and scored without gradients, the global RNGs seeded
    with its task seed (``seed_of_task``, if the caller computed it) and not restored:
    ``(score, agent.task_report())``, or ``(nan, None)`` with ``score=False`` (a rebuild)."""
    seed_ = task_seed(seed, generation, index) if seed_of_task is None else seed_of_task
    _set_task(agent, seed_, seed, generation)
    grad = torch.is_grad_enabled()  # no_grad() costs ~2 us: only when needed
    if grad:
        torch.set_grad_enabled(False)
    try:
        seed_global_rngs(seed_)
        if payload.shared:
            agent.load_shared_state(payload.shared)
        _candidates.build(agent, payload.center, candidate, seed, generation)
        if not score:
            return float("nan"), None
        value = as_score(agent.score(**payload.score_kwargs), agent)
        return value, agent.task_report()
    finally:
        if grad:
            torch.set_grad_enabled(True)
        _set_task(agent, None)


def score_tasks(agent: Agent, payload: Payload, candidates: Sequence[Candidate], seed: int,
                generation: int, start: int, on_error: str) -> tuple[list[Any], list[Any]]:
    """The scores and reports of ``candidates`` (indices ``start``, ``start + 1``, ...)
    on ``agent``, in order; batched agents a group at a time (:func:`score_groups`). A
    task that raises stops with a :class:`ScoreError`, or with ``on_error="worst"``
    gives a :class:`TaskFailure` (and a None report). The global RNGs are left as the
    last task left them (:func:`~es_search.seeding.preserved_global_rngs`)."""
    if group_size(agent):
        return score_groups(agent, payload, candidates, seed, generation, start, on_error)
    return score_alone(agent, payload, candidates, seed, generation, start, on_error)


def score_alone(agent: Agent, payload: Payload, candidates: Sequence[Candidate],
                seed: int, generation: int, start: int,
                on_error: str = "raise") -> tuple[list[Any], list[Any]]:
    """:func:`score_tasks` one ``score()`` per candidate."""
    scores: list[Any] = []
    reports: list[Any] = []
    seeds = task_seeds(seed, generation, start, start + len(candidates))
    with torch.no_grad():
        for index, (candidate, seed_) in enumerate(zip(candidates, seeds), start):
            try:
                value, report = run_task(agent, payload, candidate, seed, generation, index,
                                         seed_of_task=seed_)
            except NotAScore as exc:
                raise located(exc, generation, index, index + 1) from None
            except Exception as exc:
                if on_error != "worst":
                    raise ScoreError(_alone(agent), generation, index, seed_,
                                     traceback.format_exc(), exc) from exc
                value = TaskFailure(generation, index, seed_, traceback.format_exc(),
                                    _alone(agent))
                report = None
            scores.append(value)
            reports.append(report)
    return scores, reports


def _alone(agent: Agent) -> str:
    """The method a candidate scored alone ran, as its failure names it."""
    return type(agent).__name__ + (
        ".score()" if overrides(agent, "score") or not has_score_batch(agent) else
        ".score_batch() (scoring the candidate alone, a group of one)")


def located(exc: NotAScore, generation: int, start: int, stop: int) -> NotAScore:
    """``exc`` with the tasks it came from (``[start, stop)`` of ``generation``) named."""
    start_agent = ": the starting agent" if generation < 0 else ""
    return NotAScore(f"{exc} ({candidates_named(range(start, stop))} of "
                     f"{generation_name(generation)}{start_agent})")


# --------------------------------------------------------------------- batched scoring
def group_bounds(n: int, size: int) -> list[tuple[int, int]]:
    """The groups of ``n`` candidates scored ``size`` at a time: ``(start, stop)`` cut at
    multiples of ``size``, a remainder of at most ``size // 4`` (often a re-evaluated parent)
    joining the last group; from ``n`` and ``size`` alone, so the same on any backend."""
    cuts = list(range(0, n, max(size, 1))) + [n]
    if len(cuts) > 2 and n - cuts[-2] <= size // 4:
        del cuts[-2]
    return list(zip(cuts[:-1], cuts[1:]))


def run_group(agent: Agent, payload: Payload, candidates: Sequence[Candidate], seed: int,
              generation: int, start: int) -> tuple[list[float], Any]:
    """Tasks ``start, start + 1, ...`` of ``generation`` in one ``score_batch()`` call
    (each built as :func:`run_task` builds it, stacked) on the agent holding the centre,
    the global RNGs seeded with the first task seed: the scores and the group's report."""
    seeds = task_seeds(seed, generation, start, start + len(candidates))
    with torch.no_grad():
        params = _candidates.build_group(agent, payload.center, candidates, seeds, seed,
                                         generation)
    built_here = params is None
    if built_here:  # one at a time, in the agent
        params = stack_built(agent, payload, candidates, seed, generation, start)
    _set_task(agent, None, seed, generation)
    try:
        with torch.no_grad():
            seed_global_rngs(seeds[0])
            if built_here:  # each built by run_task over the shared state: the centre back
                agent.set_flat(payload.center)
            elif payload.shared:  # build_group left the centre in the agent
                agent.load_shared_state(payload.shared)
            values = agent.score_batch(params, seeds, **payload.score_kwargs)
            return as_scores(values, len(seeds), agent), agent.task_report()
    finally:
        _set_task(agent, None)


def stack_built(agent: Agent, payload: Payload, candidates: Sequence[Candidate], seed: int,
                generation: int, start: int) -> dict[str, torch.Tensor]:
    """The evolved weights of ``candidates``, each built by :func:`run_task`, stacked."""
    evolved = agent.evolved_parameters()  # the same Parameter objects after each build
    params = {name: torch.empty((len(candidates),) + p.shape, dtype=p.dtype)
              for name, p in evolved}
    for k, candidate in enumerate(candidates):
        run_task(agent, payload, candidate, seed, generation, start + k, score=False)
        with torch.no_grad():
            for name, p in evolved:
                params[name][k].copy_(p)
    return params


def score_groups(agent: Agent, payload: Payload, candidates: Sequence[Candidate],
                 seed: int, generation: int, start: int,
                 on_error: str = "raise") -> tuple[list[Any], list[Any]]:
    """:func:`score_tasks` a group at a time (:func:`run_group`); a group's report stands
    at its first candidate. When a group raises, it is scored again one ``score()`` per
    candidate, which finds the culprit (reported as without batching); if every one
    scores alone, the batch is at fault: a :class:`ScoreError` at the group's first
    candidate with the batch's traceback, or under ``"worst"`` the whole group fails."""
    size = group_size(agent)
    if _per_row_state(agent, candidates):
        size = 1  # what score_batch's params cannot carry: each candidate in the agent
    scores: list[Any] = []
    reports: list[Any] = []
    stop = start + len(candidates)  # [start, stop): the generation's groups up to stop
    for a, b in [(a, b) for a, b in group_bounds(stop, size) if a >= start]:
        part = candidates[a - start:b - start]
        try:
            values, report = run_group(agent, payload, part, seed, generation, a)
        except NotAScore as exc:
            raise located(exc, generation, a, b) from None
        except Exception as exc:
            batch_error, batch_trace = exc, traceback.format_exc()
        else:
            scores += values
            reports += [report] + [None] * (len(values) - 1)
            continue
        alone, alone_reports = score_alone(agent, payload, part, seed, generation, a,
                                           on_error)
        if any(isinstance(s, TaskFailure) for s in alone):
            scores += alone
            reports += alone_reports
            continue
        if on_error != "worst":
            raise ScoreError(f"{type(agent).__name__}.score_batch()", generation, a,
                             task_seed(seed, generation, a), batch_trace,
                             batch_error, group_end=b) from batch_error
        note = (f"score_batch() raised on candidates {a}-{b - 1} of generation "
                f"{generation}, though each of them scores alone through score():\n"
                f"{batch_trace}")
        scores += [TaskFailure(generation, i, task_seed(seed, generation, i), note,
                               f"{type(agent).__name__}.score_batch()") for i in range(a, b)]
        reports += [None] * (b - a)
    return scores, reports


def _per_row_state(agent: Agent, candidates: Sequence[Candidate]) -> bool:
    """Whether a ``"weights"`` candidate sets more than evolved values (a buffer, a frozen
    parameter), which ``score_batch``'s stacked params cannot carry."""
    weights = [c.vector for c in candidates if c.kind == "weights"]
    if not weights:
        return False
    evolved = {name for name, _ in agent.evolved_parameters()}
    return any(name not in evolved for w in weights for name in w)


# --------------------------------------------------------------------- in the workers
def skeleton_bytes(agent: Agent) -> bytes:
    """The agent pickled with its evolved parameters stripped to one shared zero, and
    their strides (a worker rebuilds each in this process's memory layout, in which
    ``jitter_weights`` draws), holding this process's group size as its own
    ``score_batch_size`` (a worker imports the class as its module defines it)."""
    skeleton = copy.deepcopy(agent)
    strides = [p.stride() for _, p in skeleton.evolved_parameters()]
    for _, p in skeleton.evolved_parameters():
        p.data = torch.zeros((), dtype=p.dtype).expand(p.shape)
    if has_score_batch(agent):
        skeleton.score_batch_size = group_size(agent)
    return cloudpickle.dumps((skeleton, strides))


#: token -> the run's agent and loaded payload, in this worker process (the last few runs)
_RUNS: dict[str, dict[str, Any]] = {}
_CACHED_RUNS = 4


def worker_agent(token: str, skeleton: Any) -> Agent:
    """The agent of the run ``token``, unpickled from ``skeleton`` (or the reference to it
    the pool's ``put`` returned) once per worker process and cached."""
    run = _RUNS.get(token)
    if run is None:
        try:
            agent, strides = cloudpickle.loads(_backends.load(skeleton))
        except ModuleNotFoundError as exc:
            import socket
            raise ModuleNotFoundError(
                f"a worker process ({socket.gethostname()}, pid {os.getpid()}) cannot "
                f"import {exc.name!r}, which the agent needs: install it where the "
                f"workers run, or send it with the agent: "
                f"cloudpickle.register_pickle_by_value({exc.name}) before the run (the "
                f"command line does this for path/to/file.py:Class)", name=exc.name
            ) from exc
        for (_, p), stride in zip(agent.evolved_parameters(), strides):
            p.data = torch.empty_strided(p.shape, stride, dtype=p.dtype)
        run = _RUNS[token] = {"agent": agent}
        while len(_RUNS) > _CACHED_RUNS:
            del _RUNS[next(iter(_RUNS))]  # the oldest
    return run["agent"]


def cached_payload(token: str, center: Any, score_kwargs: Any, shared: Any) -> Payload:
    """The :class:`Payload` behind what the pool's ``put`` returned, for the run ``token``
    (after :func:`worker_agent`): the ``score_kwargs`` loaded once per run, the others
    once per generation (a reference names a file written once)."""
    run = _RUNS[token]
    if isinstance(center, _backends.FileRef):
        center = _loaded(run, "center", center, lambda: _backends.load(center))
    kwargs = {} if score_kwargs is None else _loaded(
        run, "score_kwargs", None, lambda: cloudpickle.loads(_backends.load(score_kwargs)))
    if shared is not None:
        shared = _loaded(run, "shared", shared,
                         lambda: cloudpickle.loads(_backends.load(shared)))
    return Payload(center, kwargs, shared)


def _loaded(run: dict[str, Any], name: str, key: Any, load: Callable[[], Any]) -> Any:
    """``run[name]``'s value, ``load()``-ed again when ``key`` differs from its own."""
    cached = run.get(name)
    if cached is None or cached[0] != key:
        cached = run[name] = (key, load())
    return cached[1]


def warm_chunk(token: str, skeleton: Any) -> int:
    """Start-up task: import everything, cache the agent; returns the worker's pid."""
    with _backends.CHUNK_LOCK:
        worker_agent(token, skeleton)
    return os.getpid()
