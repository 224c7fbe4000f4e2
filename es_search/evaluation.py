"""The evaluation engine: candidates go to joblib workers as seeds, scores come back.

Each generation's candidates are cut into one contiguous chunk per worker. A chunk
carries the agent's *skeleton* (its module with the evolved parameters stripped, a few
KB, unpickled once per worker and cached there), the generation's centre vector (on
local backends both travel as references to files in shared memory, see
``es_search.backends``) and the candidates' descriptions. The worker seeds
each task from ``(seed, generation, index)``, builds the candidate, scores it and sends
back one float. The main process rebuilds the weights of a winner from its seed.
"""
from __future__ import annotations

import collections
import concurrent.futures
import copy
import functools
import math
import multiprocessing
import time
import traceback
import warnings
import uuid
from concurrent.futures import BrokenExecutor
from typing import Any, Mapping, Sequence

import joblib
import numpy as np
import torch

try:  # joblib >= 1.6 depends on cloudpickle; older joblib vendors it
    import cloudpickle
except ImportError:  # pragma: no cover
    from joblib.externals import cloudpickle

from . import backends as _backends
from . import candidates as _candidates
from .agent import Agent
from .candidates import Candidate
from .checks import check_int, check_n_jobs, check_positive_float, check_seed
from .errors import ScoreError, TaskFailure, WorkerError, check_on_error, ranges as _ranges
from .scores import as_score
from .seeding import preserved_global_rngs, seed_global_rngs, task_seed


def score_tasks(agent: Agent, center: np.ndarray, candidates: Sequence[Candidate],
                seed: int, generation: int, start: int,
                score_kwargs: Mapping[str, Any], on_error: str = "raise") -> list[Any]:
    """Score ``candidates`` (indices ``start``, ``start + 1``, ...) on ``agent``, in order.

    The global RNGs are seeded per task and restored afterwards. Tasks run under
    ``torch.no_grad()`` (no gradients are used; ``torch.enable_grad()`` inside
    ``score()`` turns them back on). A task that raises stops the chunk with a
    :class:`ScoreError`, or with ``on_error="worst"`` gives a :class:`TaskFailure` in
    its place.
    """
    scores: list[Any] = []
    with preserved_global_rngs(), torch.no_grad():
        try:
            for offset, candidate in enumerate(candidates):
                index = start + offset
                agent.task_seed = seed_ = task_seed(seed, generation, index)
                seed_global_rngs(seed_)
                try:
                    _candidates.build(agent, center, candidate, seed, generation)
                    value = agent.score(**score_kwargs)
                except Exception as exc:
                    if on_error == "worst":
                        scores.append(TaskFailure(generation, index, seed_,
                                                  traceback.format_exc()))
                        continue
                    raise ScoreError(type(agent).__name__, generation, index, seed_,
                                     traceback.format_exc(), exc) from exc
                scores.append(as_score(value, agent))
        finally:
            agent.task_seed = None
    return scores


# --------------------------------------------------------------------- worker side
_WORKER_AGENTS: "collections.OrderedDict[str, Agent]" = collections.OrderedDict()
_WORKER_CACHE_SIZE = 4


def _worker_agent(token: str, skeleton: Any) -> Agent:
    """The agent for ``token``, unpickled once per worker process and cached.

    ``skeleton`` is the pickled skeleton or a :class:`~es_search.backends.FileRef` to it
    (read only when this process has not cached the token yet).
    """
    agent = _WORKER_AGENTS.get(token)
    if agent is None:
        agent = cloudpickle.loads(_backends.load(skeleton))
        for _, p in agent.evolved_parameters():
            p.data = torch.empty(p.shape, dtype=p.dtype)
        _WORKER_AGENTS[token] = agent
        while len(_WORKER_AGENTS) > _WORKER_CACHE_SIZE:
            _WORKER_AGENTS.popitem(last=False)
    return agent


def _score_chunk(token: str, skeleton: Any, center: Any,
                 candidates: Sequence[Candidate], seed: int, generation: int, start: int,
                 score_kwargs: Mapping[str, Any], on_error: str = "raise"
                 ) -> tuple[list[Any], float]:
    """A worker's share of a generation: its scores and the seconds they took."""
    with _backends.CHUNK_LOCK:
        began = time.perf_counter()
        agent = _worker_agent(token, skeleton)
        center = _backends.load(center)
        with single_torch_thread(), warnings.catch_warnings():
            # the centre may be a read-only memory map; set_flat only reads it
            warnings.filterwarnings("ignore", message="The given NumPy array is not writ")
            scores = score_tasks(agent, center, candidates, seed, generation, start,
                                 score_kwargs, on_error)
        return scores, time.perf_counter() - began


def _score_chunk_at(start: int, *args: Any) -> tuple[int, tuple[list[Any], float]]:
    """``_score_chunk`` tagged with its start index (results come back unordered)."""
    return start, _score_chunk(*args)


def _warm_chunk(token: str, skeleton: Any) -> int:
    """Start-up task: import everything, cache the agent; returns the worker's pid."""
    import os
    with _backends.CHUNK_LOCK:
        _worker_agent(token, skeleton)
        time.sleep(0.005)  # long enough that one warm worker does not take every task
    return os.getpid()


def _ping() -> float:
    return time.perf_counter()


class single_torch_thread:
    """Context manager: torch uses one intra-op thread inside the block.

    Every scoring task runs like this, in a worker or in this process, so that reductions
    are summed in the same order whatever the path (and workers do not oversubscribe).
    """

    def __enter__(self) -> "single_torch_thread":
        self._threads = torch.get_num_threads()
        if self._threads != 1:
            torch.set_num_threads(1)
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._threads != 1:
            torch.set_num_threads(self._threads)


def skeleton_bytes(agent: Agent) -> bytes:
    """The agent pickled with its evolved parameters stripped to one shared zero.

    An expanded zero-dim tensor pickles as a single element, so the skeleton's size does
    not grow with the number of evolved parameters.
    """
    skeleton = copy.deepcopy(agent)
    for _, p in skeleton.evolved_parameters():
        p.data = torch.zeros((), dtype=p.dtype).expand(p.shape)
    return cloudpickle.dumps(skeleton)


def _chunks(n: int, parts: int) -> list[tuple[int, int]]:
    """``parts`` contiguous, near-equal ``(start, stop)`` ranges covering ``range(n)``."""
    parts = max(1, min(parts, n))
    bounds = [n * k // parts for k in range(parts + 1)]
    return [(bounds[k], bounds[k + 1]) for k in range(parts) if bounds[k] < bounds[k + 1]]


# --------------------------------------------------------------------- main side
class Evaluator:
    """Scores candidates of one run on joblib workers that persist across generations.

    Use it as a context manager. ``n_jobs`` means what it means in joblib (-1 all cores,
    1 a plain loop in this process, 0 an error); ``backend=None`` leaves the choice to
    the caller's ``joblib.parallel_config`` (loky by default); ``"dask"`` runs on the
    active ``dask.distributed.Client``, ``"ray"`` through ``ray.util.joblib``.

    Entering starts the workers and caches the agent in each (``startup_seconds``), then
    times an empty round trip: the first estimate of the per-generation overhead.

    Sequential fallback (``sequential_fallback=True``): each generation is scored in this
    process when that is predicted to be faster. At first the prediction is a model:
    ``n * t`` against ``ceil(n / workers) * t + overhead``, with ``t`` the measured
    seconds per task and ``overhead`` the measured cost of a parallel round; once both
    paths have run, their measured wall time per task decides (running averages, the
    losing path retried every ``REPROBE_EVERY`` generations). Results do not depend on
    the choice: every task is seeded from ``(seed, generation, index)`` and runs with one
    torch thread on either path. ``stats`` tells what was chosen and why. In this
    process, a ``score()`` that crashes the process takes this one down: pass
    ``sequential_fallback=False`` to keep every generation in the workers (a
    ``task_timeout`` implies it).
    """

    #: every this many generations in a row in this process, one goes parallel to
    #: refresh the overhead estimate (when parallel is not predicted hopeless)
    REPROBE_EVERY = 20

    def __init__(self, agent: Agent, *, seed: int, n_jobs: int = -1,
                 backend: Any = None, score_kwargs: Mapping[str, Any] | None = None,
                 on_error: str = "raise", max_retries: int = 2,
                 task_timeout: float | None = None, sequential_fallback: bool = True):
        if not isinstance(agent, Agent):
            raise TypeError(f"agent must be an es_search.Agent (a torch.nn.Module with a "
                            f"score() method), got {type(agent).__name__}")
        self.seed = check_seed(seed)
        self.n_jobs = check_n_jobs(n_jobs)
        self.backend = _backends.prepare(backend)
        self.score_kwargs = dict(score_kwargs or {})
        self.on_error = check_on_error(on_error)
        self.max_retries = check_int("max_retries", max_retries, 0)
        self.task_timeout = (None if task_timeout is None else
                             check_positive_float("task_timeout", task_timeout))
        # a task timeout only works in a worker: no fallback then
        self.sequential_fallback = bool(sequential_fallback) and self.task_timeout is None
        #: the TaskFailure of each task that raised in the last ``score()`` call
        #: (``on_error="worst"``; those tasks scored -inf)
        self.failures: list[TaskFailure] = []
        self.local = copy.deepcopy(agent)  # scores in-process and rebuilds winners
        self.local.task_seed = None
        self._token = uuid.uuid4().hex
        self._skeleton: Any = None
        self._files: _backends.SharedFiles | None = None
        self._parallel: joblib.Parallel | None = None
        self.n_workers = 1
        self.startup_seconds = 0.0
        self.worker_pids: set[int] = set()
        self.stats = {"task_seconds": None, "overhead_seconds": None,
                      "sequential_wall_per_task": None, "parallel_wall_per_task": None,
                      "last_path": None, "parallel_generations": 0,
                      "sequential_generations": 0}
        self._sequential_run = 0
        self._parallel_run = 0

    def __enter__(self) -> "Evaluator":
        if self.n_jobs == 1:
            return self
        parallel = joblib.Parallel(n_jobs=self.n_jobs, backend=self.backend,
                                   prefer="processes")
        backend = parallel._backend
        if getattr(backend, "supports_return_generator", False):
            # chunks finished before a worker died are kept (see _score_parallel)
            parallel = joblib.Parallel(n_jobs=self.n_jobs, backend=self.backend,
                                       prefer="processes", return_as="generator_unordered")
        if getattr(backend, "uses_threads", False):
            raise ValueError(
                f"es_search cannot score on a thread-based joblib backend "
                f"({type(backend).__name__}): each task seeds the process-wide random "
                f"generators (random, numpy, torch), which threads share, so results "
                f"would depend on timing. Use a process backend (loky, the default; "
                f"multiprocessing; dask; ray) or n_jobs=1.")
        if type(backend).__name__ == "SequentialBackend":
            return self
        began = time.perf_counter()
        parallel.__enter__()
        self._parallel = parallel
        self.n_workers = _backends.worker_count(parallel)
        if self.n_workers == 1:
            self.close()
            return self
        try:
            skeleton = skeleton_bytes(self.local)
            if _backends.is_local(parallel):
                self._files = _backends.SharedFiles()
                self._skeleton = self._files.put_bytes("skeleton.pkl", skeleton)
            else:
                self._skeleton = skeleton
            self._warm_up()
            self.startup_seconds = time.perf_counter() - began
            self._probe()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, exc_type: Any, *exc_info: object) -> None:
        if (exc_type is not None and issubclass(exc_type, KeyboardInterrupt)
                and self._parallel is not None):  # Ctrl-C: kill running tasks now
            abort = getattr(self._parallel._backend, "abort_everything", None)
            if abort is not None:
                try:
                    abort(ensure_ready=False)
                except Exception:  # pragma: no cover - already broken: nothing to stop
                    pass
        self.close()

    def close(self) -> None:
        if self._parallel is not None:
            parallel, self._parallel = self._parallel, None
            parallel.__exit__(None, None, None)
        if self._files is not None:
            files, self._files = self._files, None
            files.close()

    # ------------------------------------------------------------------ measurements
    def _warm_up(self, timeout: float = 120.0) -> None:
        """Run start-up tasks until every worker has answered (or ``timeout``)."""
        seen: set[int] = set()
        deadline = time.perf_counter() + timeout
        warm = functools.partial(_warm_chunk, self._token, self._skeleton)
        while len(seen) < self.n_workers and time.perf_counter() < deadline:
            seen.update(_backends.submit_all(self._parallel, [warm] * self.n_workers))
        self.worker_pids = seen

    def _probe(self, rounds: int = 3) -> None:
        """Time empty parallel rounds: the first overhead estimate."""
        times = []
        for _ in range(rounds):
            began = time.perf_counter()
            _backends.submit_all(self._parallel, [_ping] * self.n_workers)
            times.append(time.perf_counter() - began)
        self.stats["overhead_seconds"] = sorted(times)[len(times) // 2]

    @staticmethod
    def _average(old: float | None, new: float) -> float:
        return new if old is None else 0.5 * old + 0.5 * new

    def _parallel_pays(self, n: int) -> bool:
        """Whether to score ``n`` tasks in parallel (see the class docstring).

        Once both paths have been timed, the one with the lower wall time per task
        (running averages) wins, and every ``REPROBE_EVERY`` generations the other is
        tried again unless it was more than 3x slower: this holds when other programs
        load the machine. Before that, the model ``ceil(n / workers) * t + overhead``
        against ``n * t`` decides.
        """
        if not self.sequential_fallback:
            return True
        stats = self.stats
        t, overhead = stats["task_seconds"], stats["overhead_seconds"]
        seq, par = stats["sequential_wall_per_task"], stats["parallel_wall_per_task"]
        if seq is None and t is not None:
            seq = t
        if par is None and t is not None and overhead is not None:
            par = (math.ceil(n / min(n, self.n_workers)) * t + overhead) / n
        if seq is None or par is None:
            return True
        if par < seq:  # parallel wins; retry in-process now and then
            return not (self._parallel_run >= self.REPROBE_EVERY and seq < 3 * par)
        return self._sequential_run >= self.REPROBE_EVERY and par < 3 * seq

    # ------------------------------------------------------------------ scoring
    def score(self, generation: int, center: np.ndarray,
              candidates: Sequence[Candidate]) -> list[float]:
        """The scores of ``candidates``, in order (a failed task: -inf, see
        ``failures``, under ``on_error="worst"``)."""
        candidates = list(candidates)
        n = len(candidates)
        if self._parallel is None or n <= 1 or not self._parallel_pays(n):
            raw = self._score_here(generation, center, candidates)
        else:
            raw = self._score_parallel(generation, center, candidates)
        self.failures = [s for s in raw if isinstance(s, TaskFailure)]
        return [-math.inf if isinstance(s, TaskFailure) else s for s in raw]

    def _score_here(self, generation: int, center: np.ndarray,
                    candidates: list[Candidate]) -> list[Any]:
        """The in-process loop (n_jobs=1, one candidate, or the sequential fallback)."""
        n = len(candidates)
        began = time.perf_counter()
        with single_torch_thread():
            raw = score_tasks(self.local, center, candidates, self.seed, generation, 0,
                              self.score_kwargs, self.on_error)
        per_task = (time.perf_counter() - began) / max(n, 1)
        if n:
            self.stats["task_seconds"] = self._average(self.stats["task_seconds"], per_task)
        if self._parallel is not None and n > 1:
            self.stats["sequential_wall_per_task"] = self._average(
                self.stats["sequential_wall_per_task"], per_task)
            self.stats["last_path"] = "sequential"
            self.stats["sequential_generations"] += 1
            self._sequential_run += 1
            self._parallel_run = 0
        return raw

    def _score_parallel(self, generation: int, center: np.ndarray,
                        candidates: list[Candidate]) -> list[Any]:
        """One chunk per worker; chunks lost to a dead worker (or a timeout) are run
        again, with the same task seeds, up to ``max_retries`` times."""
        n = len(candidates)
        began = time.perf_counter()
        shared = (self._files.put_center(generation, center) if self._files is not None
                  else center)
        pending = _chunks(n, self.n_workers)
        done: dict[int, tuple[list[Any], float]] = {}
        for attempt in range(self.max_retries + 1):
            try:
                self._run_chunks(generation, shared, candidates, pending, done)
                break
            except ScoreError as exc:
                if exc.cause is not None:  # loky chains its own remote traceback
                    exc.__cause__ = exc.cause
                raise
            except (BrokenExecutor, TimeoutError, multiprocessing.TimeoutError) as exc:
                pending = [(a, b) for a, b in pending if a not in done]
                lost = [i for a, b in pending for i in range(a, b)]
                what = (f"a task ran over task_timeout={self.task_timeout} s per score()"
                        if not isinstance(exc, BrokenExecutor) else
                        f"a worker process died ({type(exc).__name__}: "
                        f"{str(exc).splitlines()[0] if str(exc) else ''})")
                if attempt == self.max_retries:
                    raise WorkerError(
                        f"generation {generation}: candidates {_ranges(lost)} could not be "
                        f"scored: {what}, {attempt + 1} time(s) (max_retries="
                        f"{self.max_retries}). A worker that dies is often killed for "
                        f"memory (the kernel's OOM killer) or crashed in native code; "
                        f"replay one of these tasks in this process with "
                        f"es_search.replay_task to see it.", generation, lost) from exc
                warnings.warn(
                    f"generation {generation}: {what}; scoring candidates {_ranges(lost)} "
                    f"again on fresh workers with the same seeds (retry {attempt + 1} of "
                    f"{self.max_retries})", RuntimeWarning, stacklevel=2)
        wall = time.perf_counter() - began
        # overhead: wall time beyond the slowest worker's own scoring time
        busiest = max(seconds for _, seconds in done.values())
        self.stats["overhead_seconds"] = self._average(
            self.stats["overhead_seconds"], max(0.0, wall - busiest))
        self.stats["task_seconds"] = self._average(
            self.stats["task_seconds"], sum(seconds for _, seconds in done.values()) / n)
        self.stats["parallel_wall_per_task"] = self._average(
            self.stats["parallel_wall_per_task"], wall / n)
        self.stats["last_path"] = "parallel"
        self.stats["parallel_generations"] += 1
        self._sequential_run = 0
        self._parallel_run += 1
        return [s for a in sorted(done) for s in done[a][0]]

    def _run_chunks(self, generation: int, shared: Any, candidates: list[Candidate],
                    pending: list[tuple[int, int]],
                    done: dict[int, tuple[list[Any], float]]) -> None:
        """Score the ``pending`` chunks into ``done`` (keyed by start index).

        On loky (and without a task timeout) the chunks go straight to the backend's
        executor and their futures are waited on: joblib's own result loop polls every
        10 ms, a floor on every generation. When chunks fail, the error of the first
        failing chunk (in order, not in time) is raised, after all have finished.
        """
        def args(a: int, b: int) -> tuple:
            return (self._token, self._skeleton, shared, candidates[a:b], self.seed,
                    generation, a, self.score_kwargs, self.on_error)

        backend = self._parallel._backend
        if self.task_timeout is None and _backends.is_loky(self._parallel):
            try:
                futures = {a: backend.submit(functools.partial(_score_chunk, *args(a, b)))
                           for a, b in pending}
            except BrokenExecutor:
                backend.abort_everything(ensure_ready=True)
                raise
            concurrent.futures.wait(list(futures.values()))
            error: BaseException | None = None
            for a in sorted(futures):
                try:
                    done[a] = futures[a].result()
                except BaseException as exc:  # noqa: BLE001 - re-raised below
                    error = error or exc
            if isinstance(error, BrokenExecutor):  # fresh workers for the retry
                backend.abort_everything(ensure_ready=True)
            if error is not None:
                raise error
            return
        if self.task_timeout is not None:  # joblib's timeout is per chunk
            self._parallel.timeout = self.task_timeout * max(b - a for a, b in pending)
        call = joblib.delayed(_score_chunk_at)
        for start, part in self._parallel(call(a, *args(a, b)) for a, b in pending):
            done[start] = part

    def rebuild(self, generation: int, center: np.ndarray, candidate: Candidate,
                index: int) -> np.ndarray:
        """Candidate ``index``'s flat weights, built as its worker built them."""
        with preserved_global_rngs(), single_torch_thread():
            self.local.task_seed = seed_ = task_seed(self.seed, generation, index)
            seed_global_rngs(seed_)
            _candidates.build(self.local, center, candidate, self.seed, generation)
            self.local.task_seed = None
        return self.local.get_flat()


def evaluate(agent: Agent, weights: Sequence[Mapping[str, Any]], *, n_jobs: int = -1,
             seed: int = 0, backend: Any = None,
             score_kwargs: Mapping[str, Any] | None = None) -> list[float]:
    """Score each weights dict on a copy of ``agent``, in parallel; scores in input order.

    Each dict is loaded over the agent's own weights (a subset of names is fine). Task
    ``i`` runs under ``es_search.task_seed(seed, 0, i)``. ``agent`` is not modified.

    The blog post's whole example::

        scores = es_search.evaluate(BlogAgent(), batch_w, score_kwargs={"b": 45, "c": 33})
    """
    weights = list(weights)
    for i, w in enumerate(weights):
        if not isinstance(w, Mapping):
            raise TypeError(f"weights[{i}] must be a dict of name -> tensor, "
                            f"got {type(w).__name__}")
    if not weights:
        return []
    with Evaluator(agent, seed=seed, n_jobs=n_jobs, backend=backend,
                   score_kwargs=score_kwargs) as evaluator:
        center = evaluator.local.get_flat()
        probe = copy.deepcopy(evaluator.local)
        for w in weights:  # bad names or shapes fail here, before any scoring
            probe.set_weights(w)
        return evaluator.score(0, center, [Candidate("weights", vector=w) for w in weights])
