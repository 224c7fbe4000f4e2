"""The evaluation engine: candidates go to joblib workers as seeds, scores come back.

Each generation's candidates are cut into one contiguous chunk per worker. A chunk
carries the agent's *skeleton* (its module with the evolved parameters stripped, a few
KB, unpickled once per worker and cached there), the generation's centre vector (numpy,
which joblib memory-maps when large) and the candidates' descriptions. The worker seeds
each task from ``(seed, generation, index)``, builds the candidate, scores it and sends
back one float. The main process rebuilds the weights of a winner from its seed.
"""
from __future__ import annotations

import collections
import copy
import math
import multiprocessing
import traceback
import warnings
import uuid
from concurrent.futures import BrokenExecutor
from typing import Any, Mapping, NamedTuple, Sequence

import joblib
import numpy as np
import torch

try:  # joblib >= 1.6 depends on cloudpickle; older joblib vendors it
    import cloudpickle
except ImportError:  # pragma: no cover
    from joblib.externals import cloudpickle

from . import candidates as _candidates
from .agent import Agent
from .candidates import Candidate
from .checks import check_int, check_n_jobs, check_positive_float, check_seed
from .scores import as_score
from .seeding import preserved_global_rngs, seed_global_rngs, task_seed


class ScoreError(RuntimeError):
    """``score()`` (or ``jitter_weights()``) raised inside a scoring task.

    ``generation``, ``index`` and ``seed`` identify the task; ``remote_traceback`` is the
    traceback as printed where it ran; ``__cause__`` is the original exception (when it
    could be pickled back from the worker). :func:`es_search.replay_task` reruns the
    task in this process, e.g. under a debugger; ``out`` is the run folder, when known.
    """

    def __init__(self, agent_class: str, generation: int, index: int, seed: int,
                 remote_traceback: str, cause: BaseException | None = None,
                 out: str | None = None):
        super().__init__(agent_class, generation, index, seed)
        self.agent_class, self.generation, self.index, self.seed = (
            agent_class, generation, index, seed)
        self.remote_traceback = remote_traceback
        self.cause, self.out = cause, out
        if cause is not None and self.__cause__ is None:
            self.__cause__ = cause

    def __str__(self) -> str:
        where = "the starting agent" if self.generation < 0 else (
            f"generation {self.generation}, candidate {self.index}")
        source = (f"out={self.out!r}" if self.out is not None else
                  "out=<the run's out folder>")
        return (f"{self.agent_class}.score() failed on {where} (task seed {self.seed}).\n"
                f"Reproduce it in this process (e.g. under a debugger) with\n"
                f"    es_search.replay_task(agent, {source}, generation={self.generation}, "
                f"index={self.index})\n"
                f"or, without an out folder, replay_task(agent, seed=<run seed>, "
                f"generation={self.generation}, index={self.index}, center=..., "
                f"candidate=...).\n"
                f"Original traceback:\n{self.remote_traceback}")

    def __reduce__(self):
        return (ScoreError, (self.agent_class, self.generation, self.index, self.seed,
                             self.remote_traceback, _picklable(self.cause), self.out))


def _picklable(exc: BaseException | None) -> BaseException | None:
    """``exc`` if it survives pickling, else a RuntimeError carrying its repr."""
    if exc is None:
        return None
    try:
        cloudpickle.loads(cloudpickle.dumps(exc))
        return exc
    except Exception:
        return RuntimeError(f"{type(exc).__name__}: {exc}")


class TaskFailure(NamedTuple):
    """A task whose ``score()`` raised, under ``on_error="worst"`` (scored -inf)."""

    generation: int
    index: int
    seed: int
    traceback: str


class WorkerError(RuntimeError):
    """Worker processes died (or a task exceeded its timeout) more often than
    ``max_retries`` allows while scoring ``indices`` of ``generation``."""

    def __init__(self, message: str, generation: int, indices: Sequence[int]):
        super().__init__(message)
        self.generation, self.indices = generation, list(indices)

    def __reduce__(self):
        return (WorkerError, (str(self.args[0]), self.generation, self.indices))


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


def _worker_agent(token: str, skeleton: bytes) -> Agent:
    """The agent for ``token``, unpickled once per worker process and cached."""
    agent = _WORKER_AGENTS.get(token)
    if agent is None:
        torch.set_num_threads(1)  # one torch thread per worker: no oversubscription
        agent = cloudpickle.loads(skeleton)
        for _, p in agent.evolved_parameters():
            p.data = torch.empty(p.shape, dtype=p.dtype)
        _WORKER_AGENTS[token] = agent
        while len(_WORKER_AGENTS) > _WORKER_CACHE_SIZE:
            _WORKER_AGENTS.popitem(last=False)
    return agent


def _score_chunk(token: str, skeleton: bytes, center: np.ndarray,
                 candidates: Sequence[Candidate], seed: int, generation: int, start: int,
                 score_kwargs: Mapping[str, Any], on_error: str = "raise") -> list[Any]:
    agent = _worker_agent(token, skeleton)
    return score_tasks(agent, center, candidates, seed, generation, start, score_kwargs,
                       on_error)


def _score_chunk_at(start: int, *args: Any) -> tuple[int, list[Any]]:
    """``_score_chunk`` tagged with its start index (results come back unordered)."""
    return start, _score_chunk(*args)


def skeleton_bytes(agent: Agent) -> bytes:
    """The agent pickled with its evolved parameters stripped to one shared zero.

    An expanded zero-dim tensor pickles as a single element, so the skeleton's size does
    not grow with the number of evolved parameters.
    """
    skeleton = copy.deepcopy(agent)
    for _, p in skeleton.evolved_parameters():
        p.data = torch.zeros((), dtype=p.dtype).expand(p.shape)
    return cloudpickle.dumps(skeleton)


def _ranges(indices: Sequence[int]) -> str:
    """``[0, 1, 2, 5]`` as ``"0-2, 5"``."""
    out, run = [], []
    for i in list(indices) + [None]:
        if run and (i is None or i != run[-1] + 1):
            out.append(str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}")
            run = []
        if i is not None:
            run.append(i)
    return ", ".join(out)


def check_on_error(value: Any) -> str:
    if value not in ("raise", "worst"):
        raise ValueError(f"on_error must be 'raise' (stop the run with a ScoreError) or "
                         f"'worst' (score the candidate -inf and go on), got {value!r}")
    return value


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
    the caller's ``joblib.parallel_config`` (loky by default).
    """

    def __init__(self, agent: Agent, *, seed: int, n_jobs: int = -1,
                 backend: Any = None, score_kwargs: Mapping[str, Any] | None = None,
                 on_error: str = "raise", max_retries: int = 2,
                 task_timeout: float | None = None):
        if not isinstance(agent, Agent):
            raise TypeError(f"agent must be an es_search.Agent (a torch.nn.Module with a "
                            f"score() method), got {type(agent).__name__}")
        self.seed = check_seed(seed)
        self.n_jobs = check_n_jobs(n_jobs)
        self.backend = backend
        self.score_kwargs = dict(score_kwargs or {})
        self.on_error = check_on_error(on_error)
        self.max_retries = check_int("max_retries", max_retries, 0)
        self.task_timeout = (None if task_timeout is None else
                             check_positive_float("task_timeout", task_timeout))
        #: the TaskFailure of each task that raised in the last ``score()`` call
        #: (``on_error="worst"``; those tasks scored -inf)
        self.failures: list[TaskFailure] = []
        self.local = copy.deepcopy(agent)  # scores in-process and rebuilds winners
        self.local.task_seed = None
        self._token = uuid.uuid4().hex
        self._skeleton: bytes | None = None
        self._parallel: joblib.Parallel | None = None
        self.n_workers = 1

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
        parallel.__enter__()
        self._parallel = parallel
        self.n_workers = max(1, int(parallel._effective_n_jobs()))
        if self.n_workers == 1:
            self.close()
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

    def score(self, generation: int, center: np.ndarray,
              candidates: Sequence[Candidate]) -> list[float]:
        """The scores of ``candidates``, in order (a failed task: -inf, see
        ``failures``, under ``on_error="worst"``)."""
        candidates = list(candidates)
        if self._parallel is None or len(candidates) == 1:
            raw = score_tasks(self.local, center, candidates, self.seed, generation, 0,
                              self.score_kwargs, self.on_error)
        else:
            raw = self._score_parallel(generation, center, candidates)
        self.failures = [s for s in raw if isinstance(s, TaskFailure)]
        return [-math.inf if isinstance(s, TaskFailure) else s for s in raw]

    def _score_parallel(self, generation: int, center: np.ndarray,
                        candidates: list[Candidate]) -> list[Any]:
        """One chunk per worker; chunks lost to a dead worker (or a timeout) are run
        again, with the same task seeds, up to ``max_retries`` times."""
        if self._skeleton is None:
            self._skeleton = skeleton_bytes(self.local)
        call = joblib.delayed(_score_chunk_at)
        pending = _chunks(len(candidates), self.n_workers)
        done: dict[int, list[Any]] = {}
        for attempt in range(self.max_retries + 1):
            if self.task_timeout is not None:  # joblib's timeout is per chunk
                self._parallel.timeout = self.task_timeout * max(b - a for a, b in pending)
            try:
                for start, part in self._parallel(
                        call(a, self._token, self._skeleton, center, candidates[a:b],
                             self.seed, generation, a, self.score_kwargs, self.on_error)
                        for a, b in pending):
                    done[start] = part
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
        return [s for a in sorted(done) for s in done[a]]

    def rebuild(self, generation: int, center: np.ndarray, candidate: Candidate,
                index: int) -> np.ndarray:
        """Candidate ``index``'s flat weights, built as its worker built them."""
        with preserved_global_rngs():
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
