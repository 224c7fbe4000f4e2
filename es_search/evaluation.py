"""The evaluation engine, main side: candidates go to the workers as seeds, scores come back.

Each generation's candidates are cut into chunks (:func:`es_search.chunking.chunk_bounds`,
one per worker), or, when tasks are long, claimed by the workers as they come free
(:mod:`es_search.claims`, on this machine's workers). A chunk carries the agent's *skeleton* (its module with the evolved
parameters stripped, a few KB, unpickled once per worker and cached there), the
generation's payload (the centre vector and the agent's shared state, put once per
generation into the pool: on local backends they travel as references to files in
shared memory, see :mod:`es_search.backends`) and the candidates' descriptions. The
worker runs each task with :func:`es_search.worker.run_task` and sends back scores and
reports. The main process rebuilds the weights of a winner from its seed.

Where a generation runs (this process or the workers) is decided by a
:class:`~es_search.dispatch.DispatchPolicy`; the workers are a
:class:`~es_search.backends.Pool`.
"""
from __future__ import annotations

import copy
import math
import multiprocessing
import time
import uuid
from concurrent.futures import BrokenExecutor
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import torch

try:  # joblib >= 1.6 depends on cloudpickle; older joblib vendors it
    import cloudpickle
except ImportError:  # pragma: no cover
    from joblib.externals import cloudpickle

from . import backends as _backends
from . import claims
from .agent import Agent
from .batched import group_size
from .candidates import Candidate, share_vectors
from .checks import check_int, check_is_agent, check_score_kwargs, check_scores
from .chunking import chunk_bounds, chunk_count, imbalance
from .claims import Counter, run_claimed
from .dispatch import PARALLEL, SEQUENTIAL, DispatchPolicy
from .errors import ScoreError, TaskFailure, WorkerError, ranges as _ranges, warn_user
from .interrupt import TimeLimit, sigterm_as_interrupt, time_limit
from .pickling import check_score_kwargs_pickle
from .repeat_check import UnrepeatableScoreWarning, check_repeatable
from .seeding import preserved_global_rngs
from .settings import Settings
from .skeleton import skeleton_bytes
from .worker import (Payload, has_hooks, ping, run_task, score_chunk, score_tasks,
                     single_torch_thread, warm_chunk)

__all__ = ["Evaluator", "evaluate", "single_torch_thread", "skeleton_bytes"]

#: what a call to the workers raises when a worker was lost (loky's
#: TerminatedWorkerError, the cluster pools' WorkerLost: BrokenExecutors) or a chunk ran
#: over its time: the call is made again (``Evaluator._retrying``)
LOST = (BrokenExecutor, TimeoutError, multiprocessing.TimeoutError)


class Evaluator:
    """Scores candidates of one run on workers that persist across generations.

    Use it as a context manager. Settings come as a :class:`~es_search.settings.Settings`
    (``settings=``) or as the same keywords: ``n_jobs`` means what it means in joblib
    (-1 all cores, 1 a plain loop in this process, 0 an error); ``backend=None`` leaves
    the choice to the caller's ``joblib.parallel_config`` (loky by default); ``"dask"``
    runs on the active ``dask.distributed.Client``, ``"ray"`` on Ray (both on
    :mod:`es_search.pools`, one actor per worker process).

    A run makes its own; in a loop of your own, :meth:`evaluate` scores weight dicts on
    workers kept open between calls.

    ``max_workers``: start no more worker processes than this on this machine (a
    run's largest generation; ``n_jobs`` beyond it would only add start-up time and
    memory).

    Entering first checks that the agent's score is repeatable (``repeat_check=True``:
    :func:`~es_search.check_repeatable`, two ``score()`` calls in this process; a warning,
    :class:`~es_search.UnrepeatableScoreWarning`, when it is not), then starts the
    workers and caches the agent in each (``startup_seconds``), then times empty round
    trips: the first overhead estimates of the dispatch policy.

    Sequential fallback (``sequential_fallback=True``): a generation is scored in this
    process when the :class:`~es_search.dispatch.DispatchPolicy` predicts that to be
    faster. Results do not depend on the choice. In this process, a ``score()`` that
    crashes the process takes this one down: ``sequential_fallback=False`` keeps every
    generation in the workers (a ``task_timeout`` implies it). ``stats`` tells what was
    chosen.

    After each ``score()``, ``failures`` holds the :class:`~es_search.errors.TaskFailure`
    of each task that raised (``on_error="worst"``; scored -inf) and ``reports`` each
    task's ``task_report()`` (None for failed tasks and agents without statistics).
    The shared state the tasks load is ``local.shared_state()`` when ``score()`` is
    called.
    """

    #: in-process generations in a row after which one goes parallel again
    REPROBE_EVERY = 20

    def __init__(self, agent: Agent, *, seed: int = 0, n_jobs: int | None = -1,
                 backend: Any = None, score_kwargs: Mapping[str, Any] | None = None,
                 on_error: str = "raise", max_retries: int = 2,
                 task_timeout: float | None = None, sequential_fallback: bool = True,
                 repeat_check: bool = True, settings: Settings | None = None,
                 max_workers: int | None = None):
        check_is_agent(agent)
        check_scores(agent)
        if settings is None:
            settings = Settings(seed=seed, n_jobs=n_jobs, backend=backend,
                                score_kwargs=score_kwargs, on_error=on_error,
                                max_retries=max_retries, task_timeout=task_timeout,
                                sequential_fallback=sequential_fallback,
                                repeat_check=repeat_check)
        elif not isinstance(settings, Settings):
            raise TypeError(f"settings must be an es_search.settings.Settings, got "
                            f"{type(settings).__name__}")
        self.settings = settings
        self.seed, self.n_jobs = settings.seed, settings.n_jobs
        self.score_kwargs, self.on_error = settings.score_kwargs, settings.on_error
        self.max_retries, self.task_timeout = settings.max_retries, settings.task_timeout
        self.sequential_fallback = settings.fallback
        self.backend = _backends.prepare(settings.backend, settings.n_jobs)
        self.max_workers = check_int("max_workers", max_workers, 1, none_ok=True)
        self.failures: list[TaskFailure] = []
        self.reports: list[Any] = []
        #: the shared state the last ``score()`` call's tasks loaded (None: none)
        self.last_shared: dict | None = None
        self.local = copy.deepcopy(agent)  # scores in-process and rebuilds winners
        self.local.task_seed = None
        #: evaluate(): the agent's own values of what is not evolved (buffers, frozen
        #: parameters; taken at the first call, not for a run), and the names a weights
        #: dict has set so far: every later dict loads them too, so that none leaks into
        #: the next candidate a worker scores
        self._base: dict[str, torch.Tensor] | None = None
        #: evaluate(): the agent's own evolved values, the centre every weights dict is
        #: loaded over (taken at the first call: scoring in this process loads each
        #: candidate into ``local``, which must not become the next call's centre)
        self._center: np.ndarray | None = None
        self._unevolved_set: set[str] = set()
        self._checker: Agent | None = None  # evaluate(): weights are tried on it first
        self.hooks = has_hooks(agent)
        group_size(agent)  # a bad score_batch_size fails here, before any worker starts
        check_score_kwargs(agent, settings.score_kwargs)
        if settings.generations is None:  # not a run's (run() checked them, with out=)
            check_score_kwargs_pickle(settings.score_kwargs, workers=settings.n_jobs != 1,
                                      saved=False)
        self._token = uuid.uuid4().hex
        self._skeleton: Any = None
        self._kwargs: Any = None  # the score_kwargs as put in the pool once (None: none)
        self.pool: _backends.Pool | None = None
        self._centres: Any = None  # cluster pools: what the workers hold (pools.centres)
        self._counter: Counter | None = None  # loky: the workers claim long tasks
        self._sigterm: sigterm_as_interrupt | None = None
        self._open = False  # between __enter__ and close()
        self.n_workers = 1
        self.startup_seconds = 0.0
        self.worker_pids: set[int] = set()
        self.policy = DispatchPolicy(1, self.sequential_fallback,
                                     reprobe_every=self.REPROBE_EVERY)

    @property
    def stats(self) -> dict[str, Any]:
        """What the dispatch policy measured and chose."""
        return self.policy.stats()

    @property
    def _files(self) -> _backends.SharedFiles | None:
        return None if self.pool is None else self.pool.files

    def __enter__(self) -> "Evaluator":
        self._start()
        self._open = True
        return self

    def _start(self) -> None:
        if self.settings.repeat_check:
            self._check_repeatable()
        self._warm_here()
        if self.n_jobs == 1:
            return
        began = time.perf_counter()
        # a SIGTERM while workers run takes the Ctrl-C way: workers killed, not orphaned
        self._sigterm = sigterm_as_interrupt().__enter__()
        try:
            self.pool = _backends.open_pool(self.n_jobs, self.backend, self.task_timeout,
                                            self.max_workers)
        except BaseException:
            self.close()
            raise
        if self.pool is None:
            self.close()
            return
        self.n_workers = self.pool.n_workers
        if isinstance(self.pool, _backends.LokyPool) and claims.AVAILABLE:
            self._counter = Counter(self.pool.files.folder)
        if getattr(self.pool, "derives", False):
            from .pools.centres import CentreHistory
            self._centres = CentreHistory()
        self.policy = DispatchPolicy(self.n_workers, self.sequential_fallback,
                                     reprobe_every=self.REPROBE_EVERY)
        try:
            self._skeleton = self.pool.put("skeleton", skeleton_bytes(self.local))
            self._kwargs = None if not self.score_kwargs else self.pool.put(
                "score_kwargs", cloudpickle.dumps(dict(self.score_kwargs)))
            self._warm_up()
            self.startup_seconds = time.perf_counter() - began
            self._probe()
        except BaseException:
            self.close()
            raise

    def _check_repeatable(self) -> None:
        """Warn when scoring the starting agent twice under one task seed gives two
        results (:mod:`es_search.repeat_check`). What ``score()`` raises is left to the
        first task, which reports it with its task and seed. With a ``task_timeout`` the
        check (three score() calls at most, in this process) gets three times that."""
        limit = None if self.task_timeout is None else 3 * self.task_timeout
        try:
            with time_limit(limit):
                problem = check_repeatable(self.local, seed=self.seed,
                                           score_kwargs=self.score_kwargs)
        except TimeLimit:
            warn_user(f"the repeat check (the starting agent scored twice in this process, "
                      f"before the workers start) ran over 3 x {{task_timeout}} = {limit:g} "
                      f"s and was stopped; the run's own tasks are bounded by "
                      f"{{task_timeout}} in the workers ({{repeat_check=False}} skips the "
                      f"check)", template=True)
            return
        except Exception:  # noqa: BLE001 - the first task reports it, with its seed
            return
        if problem:
            warn_user(problem, UnrepeatableScoreWarning)

    def _warm_here(self) -> None:
        """The first seeding, building and drawing in a process cost ~5 ms: not to be
        timed as the first in-process generation (the dispatch policy would believe
        it)."""
        center = self.local.get_flat()
        with preserved_global_rngs(), single_torch_thread():
            run_task(self.local, Payload(center, self.score_kwargs), Candidate("center"),
                     self.seed, -1, 0, score=False)
            torch.randn(8)
        self.local.set_flat(center)

    def __exit__(self, exc_type: Any, *exc_info: object) -> None:
        if (exc_type is not None and issubclass(exc_type, KeyboardInterrupt)
                and self.pool is not None):  # Ctrl-C: kill running tasks now
            self.pool.abort()
        self.close()

    def close(self) -> None:
        self._open = False
        if self._counter is not None:
            counter, self._counter = self._counter, None
            counter.close()
        if self.pool is not None:
            pool, self.pool = self.pool, None
            pool.close()
        if self._sigterm is not None:  # after the workers are gone
            sigterm, self._sigterm = self._sigterm, None
            sigterm.__exit__()

    def _warm_up(self, timeout: float = 120.0) -> None:
        """Run start-up tasks until every worker there is has answered (or
        ``timeout``): fewer than ``n_workers`` when a run in another thread shrank
        loky's shared executor meanwhile. A worker lost meanwhile is replaced (loky
        replaces them all), as in a generation, under ``max_retries``."""
        seen: set[int] = set()
        deadline = time.perf_counter() + timeout

        def answered() -> list[int]:
            try:
                return self.pool.run_chunks(
                    warm_chunk, [(self._token, self._skeleton)] * self.n_workers)
            except LOST:
                seen.clear()  # those that answered may be gone with the pool
                raise

        while len(seen) < self.pool.live_workers() and time.perf_counter() < deadline:
            seen.update(self._retrying(answered, None, list))
        self.worker_pids = seen

    def _probe(self, rounds: int = 3) -> None:
        """Time empty parallel rounds: the first overhead estimates."""
        for _ in range(rounds):
            began = time.perf_counter()
            self._retrying(lambda: self.pool.run_chunks(ping, [()] * self.n_workers),
                           None, list)
            self.policy.overhead(time.perf_counter() - began)

    # ------------------------------------------------------------------ scoring
    def score(self, generation: int, center: np.ndarray,
              candidates: Sequence[Candidate]) -> list[float]:
        """The scores of ``candidates``, in order (a failed task: -inf, see
        ``failures``, under ``on_error="worst"``)."""
        if not self._open:
            raise RuntimeError(
                "this Evaluator is not open: use it as a context manager, `with "
                "es_search.Evaluator(agent, ...) as evaluator:`, which starts its workers "
                "on entering and stops them on leaving")
        candidates = list(candidates)
        n = len(candidates)
        self.last_shared = shared = self._shared()
        payload = Payload(np.asarray(center), self.score_kwargs, shared)
        if self.pool is None or self.policy.choose(n) == SEQUENTIAL:
            raw, reports = self._score_here(generation, payload, candidates)
        else:
            try:
                raw, reports = self._score_parallel(generation, payload, candidates)
            except OSError as exc:
                if self.pool is None or self.pool.is_local:
                    raise
                # a cluster pool lost its scheduler (Dask's CommClosedError) or network
                raise WorkerError(
                    f"lost the connection to the cluster while scoring generation "
                    f"{generation} ({type(exc).__name__}: {exc}); start the scheduler "
                    f"and its workers again (or use another backend)",
                    generation, list(range(n))) from exc
        self.failures = [s for s in raw if isinstance(s, TaskFailure)]
        self.reports = reports
        return [-math.inf if isinstance(s, TaskFailure) else s for s in raw]

    def _shared(self) -> dict | None:
        """A snapshot of the local agent's shared state (None: it has none)."""
        if not self.hooks:
            return None
        return copy.deepcopy(dict(self.local.shared_state())) or None

    def _score_here(self, generation: int, payload: Payload,
                    candidates: list[Candidate]) -> tuple[list[Any], list[Any]]:
        """The in-process loop (n_jobs=1, one candidate, or the sequential fallback)."""
        began = time.perf_counter()
        try:
            with single_torch_thread():
                result = score_tasks(self.local, payload, candidates, self.seed,
                                     generation, 0, self.on_error)
        finally:
            if payload.shared:  # what score() changed is not the shared state
                self.local.load_shared_state(payload.shared)
        self.policy.completed(SEQUENTIAL, len(candidates), time.perf_counter() - began)
        return result

    def _score_parallel(self, generation: int, payload: Payload,
                        candidates: list[Candidate]) -> tuple[list[Any], list[Any]]:
        """Chunks lost to a dead worker (or a timeout) are run again, with the same task
        seeds, up to ``max_retries`` times."""
        n = len(candidates)
        began = time.perf_counter()
        pool = self.pool
        if self._centres is not None:  # the workers keep centres, or derive them
            center = self._centres.put(pool, generation, payload.center, self._token,
                                       self._skeleton, self.seed)
        else:
            center = pool.put("center", np.ascontiguousarray(payload.center))
        shared = None if payload.shared is None else pool.put(
            "shared", cloudpickle.dumps(payload.shared))
        candidates, flat = share_vectors(candidates)  # e.g. PGPE's scales: once, not per chunk
        vectors = None if flat is None else pool.put("vectors", flat)
        # a cluster's workers may have come or gone since the last generation
        self.n_workers = self.policy.n_workers = pool.n_workers
        group = group_size(self.local)
        try:
            if self._counter is not None and (self.policy.task_seconds or 0) >= \
                    self.BALANCE_FROM:  # long tasks on this machine: workers claim them
                scores, reports, seconds = run_claimed(
                    self.pool, self._counter, candidates, group or self._claim_unit(),
                    (self._token, self._skeleton, center, shared),
                    (self.seed, generation, self._kwargs, self.on_error, vectors),
                    lambda call, lost: self._retrying(call, generation, lost))
                uneven = max(seconds) / (sum(seconds) / len(seconds)) - 1.0
            else:
                bounds = chunk_bounds(n, self._chunk_count(n), group)
                scores, reports, seconds = self._run_chunks(generation, candidates, bounds,
                                                            center, shared, vectors)
                uneven = imbalance(bounds, seconds, n, self.n_workers)
        except ScoreError as exc:
            if exc.cause is not None:
                exc.__cause__ = exc.cause
            raise
        wall = time.perf_counter() - began
        # with several chunks per worker, the busiest worker ran about its share of them
        busiest = max(max(seconds), sum(seconds) / self.n_workers)
        self.policy.completed(PARALLEL, n, wall, busy=sum(seconds), busiest=busiest,
                              imbalance=uneven)
        return scores, reports

    def _run_chunks(self, generation: int, candidates: list[Candidate], bounds: list,
                    center: Any, shared: Any, vectors: Any = None
                    ) -> tuple[list, list, list[float]]:
        args = [(self._token, self._skeleton, center, shared, candidates[a:b], self.seed,
                 generation, a, self._kwargs, self.on_error, vectors) for a, b in bounds]
        timeout = (None if self.task_timeout is None else  # joblib's is per chunk
                   self.task_timeout * max(b - a for a, b in bounds))
        done: dict[int, Any] = {}
        results = self._retrying(
            lambda: self.pool.run_chunks(score_chunk, args, done, timeout), generation,
            lambda: [i for k, (a, b) in enumerate(bounds) if k not in done
                     for i in range(a, b)])
        return ([s for r in results for s in r[0]], [x for r in results for x in r[1]],
                [r[2] for r in results])

    #: scores at least this long (seconds per task) are taken by the workers as they
    #: come free (loky: claimed one or two at a time, or whole groups; other
    #: pools: several chunks per worker): episodes of uneven length, or a core that
    #: another program slows, no longer hold the whole generation back
    BALANCE_FROM = 0.002
    #: agents with this many evolved values or more claim tasks two at a time: an
    #: antithetic pair's noise (~1 ms per 10^5 values) is then drawn once, in one worker;
    #: smaller ones one at a time (the end of a generation waits for one task at most)
    CLAIM_PAIRS_FROM = 100_000
    #: a chunk lasts at least about this long (each chunk costs one more round trip)
    MIN_CHUNK_SECONDS = 0.005

    #: ... and when the busiest worker's share of a generation (cut one chunk per
    #: worker) ran this much longer than the average share (median of recent ones).
    #: Finer chunks cost the workers time too (the main process handles every chunk on
    #: the same cores): 4-9% with even 10 ms tasks on 2 cores, where LunarLander's and
    #: Hopper's shares differ by ~5% (``benchmarks/chunking.py``)
    IMBALANCE_FROM = 0.10

    def _claim_unit(self) -> int:
        return 2 if self.local.num_evolved() >= self.CLAIM_PAIRS_FROM else 1

    def _chunk_count(self, n: int) -> int:
        """How many chunks to cut ``n`` candidates into: one per worker, or, when tasks
        take ``BALANCE_FROM`` or more and the workers' shares have been uneven by
        ``IMBALANCE_FROM`` or more, chunks of about ``MIN_CHUNK_SECONDS`` or more, at
        most ``pool.max_chunks_per_worker`` per worker (4 on every pool today). The
        workers take chunks as they come free, so a generation waits at its end for
        about half a chunk, not half a worker's share.
        Results never depend on it (tasks are seeded by index)."""
        return chunk_count(n, self.n_workers, self.policy.task_seconds,
                           getattr(self.pool, "max_chunks_per_worker", None),
                           self.BALANCE_FROM, self.MIN_CHUNK_SECONDS,
                           self.policy.imbalance, self.IMBALANCE_FROM)

    def _retrying(self, call: Callable[[], Any], generation: int | None,
                  lost: Callable[[], list[int]]) -> Any:
        """``call()``, the one way every call to the workers is made: when a worker is
        lost (killed, crashed) or a chunk runs over its time, ``call()`` is made again
        (on fresh workers, with the same task seeds), ``max_retries`` times at most;
        then a :class:`WorkerError` is raised. ``lost()``: the candidates not scored
        (``generation`` None: the workers' start-up)."""
        for attempt in range(self.max_retries + 1):
            try:
                return call()
            except LOST as exc:
                error = exc
            timed_out = not isinstance(error, BrokenExecutor)
            what = (f"a task ran over task_timeout={self.task_timeout} s per score()"
                    if timed_out else f"a worker process died ({type(error).__name__}: "
                    f"{str(error).splitlines()[0] if str(error) else ''})")
            if generation is None:  # the workers' start-up: no candidate was given yet
                where, again, failed, replay = ("starting the workers", "starting them",
                                                "failed", "")
            else:
                where = f"generation {generation}: candidates {_ranges(lost())}"
                again = f"scoring candidates {_ranges(lost())}"
                failed = "could not be scored"
                replay = ("; replay one of these tasks in this process with "
                          "es_search.replay_task to see it")
            if attempt == self.max_retries:
                why = ("A score() that takes longer needs a larger task_timeout (or none); "
                       "one that hangs can be stopped under a debugger" if timed_out else
                       "A worker that dies is often killed for memory (the kernel's OOM "
                       "killer) or crashed in native code")
                raise WorkerError(
                    f"{where} {failed}: {what}, {attempt + 1} time(s) (max_retries="
                    f"{self.max_retries}). {why}{replay}.",
                    -1 if generation is None else generation, lost()) from error
            warn_user(f"{where}: {what}; {again} again on fresh workers with the same "
                      f"seeds (retry {attempt + 1} of {self.max_retries})")
        raise AssertionError("unreachable: the last retry raises")  # pragma: no cover

    def evaluate(self, weights: Sequence[Mapping[str, Any]],
                 generation: int = 0) -> list[float]:
        """Score each weights dict, loaded over the agent's own weights (a subset of
        names is fine), on this evaluator's workers; scores in input order. Task ``i``
        runs under ``es_search.task_seed(seed, generation, i)``: in a loop, give each
        call its own ``generation``, or every call replays the same random streams
        (the same episodes, the same sampled actions). A bad name or shape fails
        before any scoring. Example (a loop of your own, workers kept between calls)::

            >>> import torch, es_search
            >>> from es_search.problems.blog import BlogAgent
            >>> agent = BlogAgent(work=0)
            >>> with es_search.Evaluator(agent, n_jobs=1) as evaluator:
            ...     for generation in range(3):
            ...         w = [{"fc1.weight": torch.full((1, 3), float(generation + k))}
            ...              for k in range(2)]
            ...         scores = evaluator.evaluate(w, generation)
            >>> scores
            [6.0, 9.0]
        """
        weights = _weights_list(weights)
        generation = _check_generation(generation)
        if not weights:
            return []
        if self._checker is None:
            self._checker = copy.deepcopy(self.local)
        if self._base is None:  # before any weights dict is loaded into self.local
            self._center = self.local.get_flat()
            evolved = {name for name, _ in self.local.evolved_parameters()}
            self._base = {name: value.detach().clone()
                          for name, value in self.local.state_dict().items()
                          if name not in evolved}
        for w in weights:  # bad names or shapes fail here, before any scoring
            self._checker.set_weights(w)
            self._unevolved_set.update(name for name in w if name in self._base)
        # each dict over the agent's own values: what an earlier dict set that is not
        # evolved is set back (workers keep their agent from one candidate to the next)
        reset = {name: self._base[name] for name in sorted(self._unevolved_set)}
        # NumPy arrays as tensors: joblib would memory-map large ones and keep them
        try:
            return self.score(generation, self._center,
                              [Candidate("weights", vector={**reset, **as_tensors(w)})
                               for w in weights])
        except ScoreError as exc:  # no run folder: its message replays weights[index]
            exc.evaluate_seed, exc.evaluate_kwargs = self.seed, bool(self.score_kwargs)
            raise

    def rebuild(self, generation: int, center: np.ndarray, candidate: Candidate,
                index: int) -> np.ndarray:
        """Candidate ``index``'s flat weights, built as its worker built them."""
        if candidate.kind == "vector":  # nothing drawn: the global RNGs are not touched
            self.local.set_flat(candidate.vector)
        else:
            with preserved_global_rngs(), single_torch_thread():
                run_task(self.local, Payload(np.asarray(center), self.score_kwargs),
                         candidate, self.seed, generation, index, score=False)
        flat = self.local.get_flat()
        if self._centres is not None:
            self._centres.note_rebuilt(generation, center, candidate, index, flat)
        return flat


def evaluate(agent: Agent, weights: Sequence[Mapping[str, Any]], *, n_jobs: int | None = -1,
             seed: int = 0, generation: int = 0, backend: Any = None,
             score_kwargs: Mapping[str, Any] | None = None,
             repeat_check: bool = True) -> list[float]:
    """Score each weights dict on a copy of ``agent``, in parallel; scores in input order.

    Each dict is loaded over the agent's own weights (a subset of names is fine). Task
    ``i`` runs under ``es_search.task_seed(seed, generation, i)``. ``agent`` is not
    modified. Workers start and stop with each call (~13 ms on 2 cores): in a loop of
    your own, keep them with :meth:`Evaluator.evaluate`. ``repeat_check``: first score
    the agent twice in this process and warn if its score depends on its past
    (:func:`~es_search.check_repeatable`); False saves those two ``score()`` calls.

    The blog post's whole example::

        scores = es_search.evaluate(BlogAgent(), batch_w, score_kwargs={"b": 45, "c": 33})

    A ``score()`` that raises stops the call with a :class:`~es_search.ScoreError`
    whose message says how to replay that weights dict in this process
    (:func:`es_search.replay_task` with ``weights=``).
    """
    check_is_agent(agent)
    weights = _weights_list(weights)
    generation = _check_generation(generation)
    if not weights:
        return []
    with Evaluator(agent, seed=seed, n_jobs=n_jobs, backend=backend,
                   score_kwargs=score_kwargs, repeat_check=repeat_check) as evaluator:
        return evaluator.evaluate(weights, generation)


def _weights_list(weights: Any) -> list[Mapping[str, Any]]:
    """``weights`` as a list of dicts, or a TypeError that says what was passed."""
    if isinstance(weights, Mapping) or not hasattr(weights, "__iter__"):
        raise TypeError(f"weights must be a list of weight dicts, one per candidate "
                        f"(for one agent's: [weights]), got {type(weights).__name__}")
    weights = list(weights)
    for i, w in enumerate(weights):
        if not isinstance(w, Mapping):
            raise TypeError(f"weights[{i}] must be a dict of name -> tensor, "
                            f"got {type(w).__name__}")
    return weights


def _check_generation(generation: Any) -> int:
    return check_int("generation", generation, 0,
                     " (task i of a call runs under task_seed(seed, generation, i))")


def as_tensors(weights: Mapping[str, Any]) -> dict[str, Any]:
    """A weights dict with its NumPy arrays as tensors of the same dtype and values (an
    array torch cannot hold stays as it is; set_weights says what is wrong with it)."""
    def tensor(value: Any) -> Any:
        try:
            return torch.tensor(value)
        except (TypeError, ValueError, RuntimeError):
            return value
    return {name: tensor(value) if isinstance(value, np.ndarray) else value
            for name, value in weights.items()}
