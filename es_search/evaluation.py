"""The evaluation engine, main side: candidates go to the workers as seeds (with the agent's
skeleton and the generation's payload, put once in the pool), scores come back, on the path
:mod:`es_search.dispatch` chooses; winners' weights are rebuilt here from their seeds."""
from __future__ import annotations

import copy
import math
import os
import time
import uuid
from concurrent.futures import BrokenExecutor
from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import torch

from . import backends as _backends
from .agent import Agent
from .batched import group_size
from .candidates import Candidate, share_vectors
from .checks import check_evolved, check_is_agent, check_score_kwargs
from .dispatch import (AVAILABLE, PARALLEL, SEQUENTIAL, ChunkPolicy, DispatchPolicy,
                       in_index_order, run_claimed, score_blocks)
from .errors import (TaskFailure, WorkerError, candidates_named, generation_name,
                     literal, selection_failure, warn_user)
from .interrupt import sigterm_as_interrupt
from .pickling import check_agent, check_score_kwargs_pickle, cloudpickle
from .score_checks import warn_if_unrepeatable
from .seed_sequences import SELECTION_GENERATION
from .seeding import in_process_tasks, preserved_global_rngs
from .settings import Settings
from .worker import Payload, has_hooks, run_task, score_tasks, skeleton_bytes, warm_chunk

__all__ = ["Engine", "Scored"]


@dataclass(frozen=True)
class Scored:
    """What one :meth:`Engine.score` call returns: ``scores`` in candidate order (-inf
    for each of the ``failures``, under ``on_error="worst"``), each task's
    ``task_report()`` (None: failed, or no statistics), the ``shared`` state the tasks
    loaded, and the engine's ``stats`` with this call's ``path`` and wall ``seconds``."""
    scores: list[float]
    failures: list[TaskFailure]
    reports: list[Any]
    shared: dict | None
    stats: dict[str, Any]


class Engine:
    """Scores candidates on workers kept across calls; :meth:`score` returns a
    :class:`Scored`. Use it as a context manager: entering checks that the score is
    repeatable (``repeat_check``), starts the workers and times empty round trips.
    Settings come as a :class:`~es_search.settings.Settings` or as its keywords."""

    def __init__(self, agent: Agent, *, seed: int = 0, n_jobs: int | None = -1,
                 backend: Any = None, score_kwargs: Mapping[str, Any] | None = None,
                 on_error: str = "raise", max_retries: int = 2,
                 task_timeout: float | None = None, sequential_fallback: bool = True,
                 repeat_check: bool = True, settings: Settings | None = None):
        check_is_agent(agent)
        check_evolved(agent)
        if settings is None:
            settings = Settings(seed=seed, n_jobs=n_jobs, backend=backend,
                                score_kwargs=score_kwargs, on_error=on_error,
                                max_retries=max_retries, task_timeout=task_timeout,
                                sequential_fallback=sequential_fallback,
                                repeat_check=repeat_check)
        self.settings = settings
        check_agent(agent, workers=settings.n_jobs != 1)  # before it is copied
        self.seed, self.score_kwargs = settings.seed, settings.score_kwargs
        self.backend = _backends.prepare(settings.backend, settings.n_jobs)
        self.max_workers: int | None = None  # run(): no more than a generation's tasks
        self.local = copy.deepcopy(agent)  # scores in-process and rebuilds winners
        self.local.task_seed = None
        self.hooks = has_hooks(agent)
        # a bad score_batch_size fails here, before any worker starts
        self.chunking = ChunkPolicy(agent.num_evolved(), group_size(agent),
                                    timed=settings.task_timeout is not None)
        check_score_kwargs(agent, settings.score_kwargs)
        check_score_kwargs_pickle(settings.score_kwargs, workers=settings.n_jobs != 1,
                                  saved=settings.out is not None)
        self._token = uuid.uuid4().hex
        self._skeleton: Any = None
        self._kwargs: Any = None  # the score_kwargs as put in the pool once (None: none)
        self.pool: _backends.Pool | None = None
        self._centres: Any = None  # cluster pools: what the workers hold (pools.centres)
        self._sigterm: sigterm_as_interrupt | None = None
        self._open = False  # between __enter__ and close()
        self.n_workers = 1
        self.startup_seconds = 0.0
        self._warned: set[str] = set()  # what _warn_once has said
        self.worker_pids: set[int] = set()
        self.policy = DispatchPolicy(1, settings.fallback)

    @property
    def stats(self) -> dict[str, Any]:
        return self.policy.stats()

    def __enter__(self) -> "Engine":
        if self.settings.repeat_check and (self.settings.fallback or self.backend[0] is None):
            warn_if_unrepeatable(self.local, self.seed, self.score_kwargs)
        # a process's first seeding, building and drawing cost ~5 ms: not a generation's
        self.rebuild(-1, self.local.get_flat(), Candidate("center"), 0)
        with preserved_global_rngs():
            torch.randn(8)
        if self.settings.n_jobs != 1:
            self._start_workers()
        self._open = True
        return self

    def _start_workers(self) -> None:
        began = time.perf_counter()
        # a SIGTERM while workers run takes the Ctrl-C way: workers killed, not orphaned
        self._sigterm = sigterm_as_interrupt().__enter__()
        try:
            self.pool = _backends.open_pool(self.backend, self.max_workers,
                                            self.settings.fallback)
            if self.pool is None:
                return self.close()
            self.n_workers = self.policy.n_workers = self.pool.n_workers
            self.chunking = replace(self.chunking, claims=self.pool.local and AVAILABLE)
            self._skeleton = self.pool.put("skeleton", skeleton_bytes(self.local))
            if not self.pool.local:  # the workers keep or derive centres
                from .pools.centres import CentreHistory
                self._centres = CentreHistory(self.pool, self._token, self._skeleton, self.seed)
            self._kwargs = None if not self.score_kwargs else self.pool.put(
                "score_kwargs", cloudpickle.dumps(dict(self.score_kwargs)))
            # import everything, cache the agent: a round reaches each worker once
            warm = [(self._token, self._skeleton)] * self.n_workers
            self.worker_pids = set(self._retrying(
                lambda: self.pool.run_chunks(warm_chunk, warm), None, list))
            self.startup_seconds = time.perf_counter() - began
            for _ in range(3):  # empty rounds: the first overhead estimates
                began = time.perf_counter()
                self._retrying(lambda: self.pool.run_chunks(os.getpid, [()] * self.n_workers),
                               None, list)
                self.policy.overhead(time.perf_counter() - began)
        except BaseException:
            self.close()
            raise

    def __exit__(self, exc_type: Any, exc: BaseException | None, *tb: object) -> None:
        if isinstance(exc, KeyboardInterrupt) and self.pool is not None:
            self.pool.abort()  # Ctrl-C: kill running tasks now
        self.close()

    def close(self) -> None:
        self._open = False
        pool, sigterm = self.pool, self._sigterm
        self.pool = self._sigterm = None
        if pool is not None:
            pool.close()
        if sigterm is not None:  # after the workers are gone
            sigterm.__exit__()

    # ------------------------------------------------------------------ scoring
    def score(self, generation: int, center: np.ndarray,
              candidates: Sequence[Candidate]) -> Scored:
        """Score ``candidates``, built from ``center`` under task seeds (seed, generation, i)."""
        if not self._open:
            raise RuntimeError(
                "this Evaluator is not open: use it as a context manager, `with "
                "es_search.Evaluator(agent, ...) as evaluator:`, which starts its workers "
                "on entering and stops them on leaving")
        candidates = list(candidates)
        n = len(candidates)
        began = time.perf_counter()
        shared = self.shared_state()
        payload = Payload(np.asarray(center), self.score_kwargs, shared)
        path = SEQUENTIAL if self.pool is None else self.policy.choose(n)
        if path == SEQUENTIAL:
            raw, reports = self._score_here(generation, payload, candidates)
        else:
            try:
                raw, reports = self._score_parallel(generation, payload, candidates)
            except OSError as exc:
                if self.pool.local:
                    raise
                # a cluster pool lost its scheduler (Dask's CommClosedError) or network
                raise WorkerError(
                    f"lost the connection to the cluster while scoring generation "
                    f"{generation} ({type(exc).__name__}: {exc}); start the scheduler "
                    f"and its workers again (or use another backend).",
                    generation, list(range(n))) from exc
        failures = [s for s in raw if isinstance(s, TaskFailure)]
        scores = [-math.inf if isinstance(s, TaskFailure) else s for s in raw]
        self._warn_once(generation, failures, sum(not math.isfinite(s) for s in scores)
                        - len(failures))
        return Scored(scores, failures, reports, shared,
                      {**self.stats, "path": path, "seconds": time.perf_counter() - began})

    def _warn_once(self, generation: int, failures: list, nonfinite: int) -> None:
        """Warn, once per run or Evaluator each, of scores that were not finite and of
        ``score()`` calls that raised under ``on_error="worst"`` (both scored -inf)."""
        where = "the starting agent's evaluation" if generation < 0 else \
            generation_name(generation)
        if nonfinite and "nonfinite" not in self._warned:
            self._warned.add("nonfinite")
            warn_user(f"{type(self.local).__name__} scored {nonfinite} time(s) non-finite (NaN "
                      f"or inf) in {where}; such candidates are never kept. The history's "
                      f"'nonfinite' counts them per generation (said once per run).")
        kind = "selection" if generation == SELECTION_GENERATION else "failures"
        if failures and kind not in self._warned:  # the selection's: its own words, once
            self._warned.add(kind)
            first, out = failures[0], self.settings.out
            if kind == "selection":  # no history, nothing to replay
                return warn_user(selection_failure(first.method, first.index, first.seed, out,
                                                   len(failures))
                                 + f" First traceback:\n{literal(first.traceback)}",
                                 template=True)
            replay = "run with out=DIR, or see help(es_search.replay_task)" if out is None \
                else f"es_search.replay_task(agent, out={str(out)!r}, " \
                     f"generation={first.generation}, index={first.index})"
            warn_user(f"{first.method} raised on {len(failures)} candidate(s) of {where} (the "
                      f"first: candidate {first.index}, task seed {first.seed}); on_error="
                      f"'worst' scored them -inf (said once per run; the history's 'failures' "
                      f"counts them). To replay one in this process: {replay}. First "
                      f"traceback:\n{first.traceback}")

    def shared_state(self) -> dict | None:
        """A copy of the agent's shared state (None: none), which the next :meth:`score` loads."""
        if not self.hooks:
            return None
        return copy.deepcopy(dict(self.local.shared_state())) or None

    def _score_here(self, generation: int, payload: Payload,
                    candidates: list[Candidate]) -> tuple[list[Any], list[Any]]:
        began = time.perf_counter()
        try:
            with in_process_tasks():
                result = score_tasks(self.local, payload, candidates, self.seed,
                                     generation, 0, self.settings.on_error)
        finally:
            if payload.shared:  # what score() changed is not the shared state
                self.local.load_shared_state(payload.shared)
        self.policy.completed(SEQUENTIAL, len(candidates), time.perf_counter() - began)
        return result

    def _score_parallel(self, generation: int, payload: Payload,
                        candidates: list[Candidate]) -> tuple[list[Any], list[Any]]:
        """Chunks lost to a dead worker or a timeout run again, up to ``max_retries``."""
        n = len(candidates)
        began = time.perf_counter()
        pool = self.pool
        if self._centres is None:  # a file, rewritten when the centre changes
            center = pool.put("center", payload.center)
        else:  # the workers keep centres, or derive them
            center = self._centres.put(payload.center)
        shared = None if payload.shared is None else pool.put(
            "shared", cloudpickle.dumps(payload.shared))
        candidates, flat = share_vectors(candidates)  # e.g. PGPE's scales: once a generation
        vectors = None if flat is None else pool.put("vectors", flat)
        # a cluster's workers may have come or gone since the last generation
        self.n_workers = self.policy.n_workers = pool.n_workers
        head = (self._token, self._skeleton, center, shared)
        tail = (self._kwargs, self.settings.on_error, vectors)
        unit = self.chunking.claim_unit(self.policy)
        if unit:  # long tasks, workers that claim: they take them as they come free
            scores, reports, seconds = run_claimed(
                pool, candidates, unit, head, (self.seed, generation, *tail),
                lambda call, lost: self._retrying(call, generation, lost))
        else:
            bounds = self.chunking.bounds(n, self.policy)
            args = [(*head, candidates[a:b], a, [(a, b)], None, self.seed, generation, *tail)
                    for a, b in bounds]
            timeout = (None if self.settings.task_timeout is None else  # a chunk's: a task's,
                       self.settings.task_timeout * max(b - a for a, b in bounds))  # a group's
            done: dict[int, Any] = {}

            def chunks() -> list:
                try:
                    return pool.run_chunks(score_blocks, args, done, timeout)
                except TimeoutError as exc:  # the pool timed each chunk: name its tasks
                    if getattr(exc, "late", None):  # local pools' (the chunks late)
                        exc.args = (candidates_named(
                            [i for k in exc.late for i in range(*bounds[k])]),)
                    raise

            results = self._retrying(
                chunks, generation, lambda: [i for k, (a, b) in enumerate(bounds)
                                             if k not in done for i in range(a, b)])
            scores, reports = in_index_order([blocks for blocks, _ in results], n)
            seconds = [s for _, s in results]
        # with several chunks per worker (timed), the busiest ran about its share of them
        busiest = max(max(seconds), sum(seconds) / self.n_workers)
        self.policy.completed(PARALLEL, n, time.perf_counter() - began, busy=sum(seconds),
                              busiest=busiest)
        return scores, reports

    def rebuild(self, generation: int, center: np.ndarray, candidate: Candidate,
                index: int) -> np.ndarray:
        """Candidate ``index``'s flat weights, built as its worker built them."""
        if candidate.kind == "vector":  # nothing drawn: the global RNGs are not touched
            self.local.set_flat(candidate.vector)
        else:
            with in_process_tasks():
                run_task(self.local, Payload(np.asarray(center), self.score_kwargs),
                         candidate, self.seed, generation, index, score=False)
        flat = self.local.get_flat()
        if self._centres is not None:
            self._centres.note_rebuilt(generation, center, candidate, index, flat)
        return flat

    def _retrying(self, call: Callable[[], Any], generation: int | None,
                  lost: Callable[[], list[int]]) -> Any:
        """The one way every call to the workers is made: ``call()``, made again on fresh
        workers with the same task seeds when a worker is lost or a chunk runs over its
        time, ``max_retries`` times at most; then a :class:`WorkerError`. ``lost()``: the
        candidates not scored (``generation`` None: the workers' start-up)."""
        max_retries, task_timeout = self.settings.max_retries, self.settings.task_timeout
        start = generation is None
        for attempt in range(max_retries + 1):
            try:
                return call()
            except (BrokenExecutor, TimeoutError) as exc:  # a worker lost, a chunk over time
                error = exc
            timed_out = not isinstance(error, BrokenExecutor)
            first_line = str(error).partition("\n")[0]
            what = (f"a task ran over task_timeout={task_timeout} s per score() ({first_line})"
                    if timed_out
                    else f"a worker process died ({type(error).__name__}: {first_line})")
            where = ("starting the workers" if start else
                     f"{generation_name(generation)}: {candidates_named(lost())}")
            if attempt < max_retries:
                again = "starting them" if start else f"scoring {candidates_named(lost())}"
                warn_user(f"{where}: {what}; {again} again on fresh workers with the same "
                          f"seeds (retry {attempt + 1} of {max_retries})")
                continue
            why = ("A score() that takes longer needs a larger task_timeout (or none); one "
                   "that hangs can be stopped under a debugger" if timed_out else
                   "A worker that dies is often killed for memory (the kernel's OOM killer) "
                   "or crashed in native code")
            replay = "" if start else ("; replay one of these tasks in this process with "
                                       "es_search.replay_task to see it")
            raise WorkerError(
                f"{where} {'failed' if start else 'could not be scored'}: {what}, "
                f"{attempt + 1} time(s) (max_retries={max_retries}). {why}{replay}.",
                -1 if start else generation, lost()) from error
