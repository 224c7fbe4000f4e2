"""joblib backends for the evaluation engine: which one, how many workers, how to send.

- ``prepare(backend)`` checks a backend at construction time: ``"dask"`` needs
  dask.distributed and a running ``Client`` (or a Client given as the backend);
  ``"ray"`` needs ray. Missing packages raise an ``ImportError`` naming the extra that
  installs them. Dask and Ray run on es_search's own pools (:mod:`es_search.pools`:
  one actor per worker process, payloads sent once per worker), not through joblib.
- ``SharedFiles``: on a backend whose workers are processes of *this* machine (loky,
  multiprocessing) the agent's skeleton and each generation's centre are written once to
  a private folder (``/dev/shm`` when there is one) and travel as a small
  :class:`FileRef`: the bytes sent per chunk do not grow with the number of parameters.
  Other joblib backends get the arrays inline, pickled once per chunk.
- :class:`Pool`: what the engine's parallel path talks to (``n_workers``, ``is_local``,
  ``put``, ``run_chunks``, ``abort``, ``close``); :func:`open_pool` picks
  :class:`LokyPool` (the loky executor's futures, directly: joblib's result loop polls
  every 10 ms, a floor on each generation's time), :class:`JoblibPool` (any other
  joblib backend), or a cluster pool (:mod:`es_search.pools`). joblib's private names
  are used in this module only.
"""
from __future__ import annotations

import concurrent.futures
import functools
import os
import shutil
import tempfile
import threading
import time
import weakref
from concurrent.futures import BrokenExecutor
from typing import Any, Callable, NamedTuple, Sequence

import joblib
import numpy as np

from .extras import require
from .seeding import fresh_in_forked_child

CLUSTERS = ("dask", "ray")


def is_cluster(backend: Any) -> bool:
    """True for the backends es_search drives through its own pools (``"dask"``, a
    ``distributed.Client``, ``"ray"``; see :mod:`es_search.pools`)."""
    from .pools import is_client
    return (isinstance(backend, str) and backend in CLUSTERS) or is_client(backend)


def prepare(backend: Any, n_jobs: int | None = None) -> Any:
    """Check a backend at construction time: ``"dask"`` needs dask.distributed and an
    active ``Client`` (or a Client given as the backend), ``"ray"`` needs ray (a local
    Ray starts if none runs). Missing packages raise an ``ImportError`` naming the
    extra; a thread-based backend (by name or from ``joblib.parallel_config``) for
    ``n_jobs`` other than 1 is refused. Returns what :func:`open_pool` takes."""
    if backend == "ray":
        require("ray", "ray")
    elif backend == "dask":
        from .pools.dask_pool import get_client
        get_client(backend)  # a clear error now if there is no client
    elif isinstance(backend, str):
        from joblib.parallel import BACKENDS
        if backend not in BACKENDS:
            usable = {b for b, cls in BACKENDS.items() if b == "sequential"
                      or not getattr(cls, "uses_threads", False)}
            known = ", ".join(repr(b) for b in sorted(usable | {"dask", "ray"}))
            raise ValueError(f"unknown backend {backend!r}: use one of {known}, or None "
                             f"(loky, or the backend of an enclosing "
                             f"joblib.parallel_config)")
    if n_jobs is not None and n_jobs != 1 and not is_cluster(backend):
        chosen = joblib.Parallel(n_jobs=n_jobs, backend=backend, prefer="processes")._backend
        if _scores_on_threads(chosen, backend):
            raise _thread_backend_error(chosen)
    return backend


def _scores_on_threads(chosen: Any, backend: Any) -> bool:
    """True when joblib's ``chosen`` backend would run the tasks on threads of this
    process; not inside another joblib worker (a sweep over seeds), where joblib makes
    nested calls use threads and a run scores in that worker, as n_jobs=1 would."""
    if not getattr(chosen, "uses_threads", False) or \
            type(chosen).__name__ == "SequentialBackend":  # in this process, as n_jobs=1
        return False
    return not (backend is None and (getattr(chosen, "nesting_level", None) or 0) >= 1)


def _thread_backend_error(chosen: Any) -> ValueError:
    return ValueError(
        f"es_search cannot score on a thread-based joblib backend "
        f"({type(chosen).__name__}): each task seeds the process-wide random "
        f"generators (random, numpy, torch), which threads share, so results "
        f"would depend on timing. Use a process backend (loky, the default; "
        f"multiprocessing; dask; ray) or n_jobs=1.")


def is_local(parallel: joblib.Parallel) -> bool:
    """True when the workers are processes of this machine that can read our files."""
    from joblib._parallel_backends import LokyBackend, MultiprocessingBackend
    return type(parallel._backend) in (LokyBackend, MultiprocessingBackend)


def worker_count(parallel: joblib.Parallel) -> int:
    """How many chunks a generation is cut into: one per worker process."""
    n = max(1, int(parallel._effective_n_jobs()))
    return n


# --------------------------------------------------------------------- shared files
class FileRef(NamedTuple):
    """A file on this machine holding an array (``dtype`` a numpy dtype string) or, with
    ``dtype=""``, raw bytes. A few dozen bytes pickled, whatever the file's size."""

    path: str
    dtype: str = ""
    size: int = 0


_MMAP_FROM = 1 << 16  # bytes; smaller files are read, larger ones memory-mapped


def load(ref: Any) -> Any:
    """The array or bytes behind ``ref`` (anything else is returned as is)."""
    if not isinstance(ref, FileRef):
        return ref
    if not ref.dtype:
        with open(ref.path, "rb") as f:
            return f.read()
    dtype = np.dtype(ref.dtype)
    if ref.size * dtype.itemsize >= _MMAP_FROM:
        return np.memmap(ref.path, dtype=dtype, mode="r", shape=(ref.size,))
    return np.fromfile(ref.path, dtype=dtype, count=ref.size)


#: /dev/shm is used only with this much free (as joblib does): a container's is often
#: 64 MB, and a large agent's skeleton and centres would fill it in the middle of a run
SHM_MIN_FREE = 2 * 10 ** 9


def _shm_root() -> str | None:
    """``/dev/shm`` when it is writable and has ``SHM_MIN_FREE`` bytes free, else None
    (the temporary folder is used)."""
    root = "/dev/shm"
    if not (os.path.isdir(root) and os.access(root, os.W_OK)):
        return None
    try:
        stats = os.statvfs(root)
    except OSError:  # pragma: no cover
        return None
    return root if stats.f_bavail * stats.f_frsize >= SHM_MIN_FREE else None


def _sweep(root: str) -> None:
    """Remove the folders of es_search processes that died without cleaning up."""
    for name in os.listdir(root):
        parts = name.split("-")
        if len(parts) < 3 or parts[0] != "es_search" or not parts[1].isdigit():
            continue
        try:
            os.kill(int(parts[1]), 0)
        except ProcessLookupError:
            shutil.rmtree(os.path.join(root, name), ignore_errors=True)
        except OSError:  # alive under another user, or not ours to ask
            pass


def same_bytes(a: np.ndarray, b: np.ndarray) -> bool:
    """True when two arrays hold the same values bit for bit (``-0.0`` is not
    ``0.0`` here, and a NaN equals the same NaN: what a worker computes from them)."""
    if a is b:
        return True
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    return np.array_equal(np.ascontiguousarray(a).reshape(-1).view(np.uint8),
                          np.ascontiguousarray(b).reshape(-1).view(np.uint8))


class SharedFiles:
    """A private folder of files the local workers read; removed by ``close()`` (or at
    exit; folders left by killed processes are swept by the next one)."""

    def __init__(self) -> None:
        root = _shm_root() or tempfile.gettempdir()
        try:
            _sweep(root)
        except OSError:  # pragma: no cover
            pass
        self.folder = tempfile.mkdtemp(prefix=f"es_search-{os.getpid()}-", dir=root)
        self._finalizer = weakref.finalize(self, shutil.rmtree, self.folder, True)
        self._current: dict[str, str] = {}
        self._arrays: dict[str, tuple[np.ndarray, FileRef]] = {}  # name -> last put
        self._count = 0
        self.bytes_written = 0

    def put_bytes(self, name: str, data: bytes) -> FileRef:
        path = os.path.join(self.folder, name)
        with open(path, "wb") as f:
            f.write(data)
        self.bytes_written += len(data)
        return FileRef(path, "", len(data))

    def put_array(self, name: str, array: np.ndarray) -> FileRef:
        """Write ``array`` under ``name``; the file a previous ``put`` of the same name
        wrote is removed (its readers have finished). An array equal byte for byte to
        the last one put under ``name`` is not written again: its reference is returned
        (a hill climber's centre stays put for many generations; workers keep what
        they loaded for an unchanged reference)."""
        array = np.ascontiguousarray(array)
        last = self._arrays.get(name)
        if last is not None and same_bytes(array, last[0]):
            return last[1]
        self._count += 1
        path = os.path.join(self.folder, f"{name}-{self._count}.bin")
        array.tofile(path)
        self.bytes_written += array.nbytes
        self._replace(name, path)
        ref = FileRef(path, array.dtype.str, int(array.size))
        self._arrays[name] = (array.copy(), ref)  # a copy: callers may change theirs
        return ref

    def put_blob(self, name: str, data: bytes) -> FileRef:
        """Like :meth:`put_array`, for bytes."""
        self._count += 1
        ref = self.put_bytes(f"{name}-{self._count}.pkl", data)
        self._replace(name, ref.path)
        self._arrays.pop(name, None)
        return ref

    def close(self) -> None:
        self._finalizer()

    def _replace(self, name: str, path: str) -> None:
        previous = self._current.get(name)
        self._current[name] = path
        if previous is not None and previous != path:
            try:
                os.remove(previous)
            except OSError:  # pragma: no cover - e.g. still open on Windows
                pass


# --------------------------------------------------------------------- pools
# one chunk at a time per process: dask runs several tasks per worker process in threads,
# and a chunk seeds the process-wide random generators (read it as backends.CHUNK_LOCK
# at each use: a forked child gets a fresh one, as seeding's process-state lock)
CHUNK_LOCK = threading.Lock()
fresh_in_forked_child(globals(), "CHUNK_LOCK", threading.Lock)


def _capture(fn: Callable[..., Any], *args: Any) -> tuple[bool, Any]:
    """Run ``fn`` in a worker; an exception comes back as a value, so that every chunk
    of a round finishes before the first error is raised."""
    try:
        return True, fn(*args)
    except Exception as exc:  # noqa: BLE001 - re-raised by the pool, in order
        return False, exc


def _tagged(position: int, fn: Callable[..., Any], *args: Any) -> tuple[int, Any]:
    return position, _capture(fn, *args)


def _capture_local(fn: Callable[..., Any], *args: Any) -> tuple[bool, Any]:
    """:func:`_capture` in a worker process of this machine, which first makes sure the
    worker ends with the process that started it (never in a process that opened a
    pool: joblib may run a call there, e.g. multiprocessing in a daemon process)."""
    if os.getpid() not in _POOL_OWNERS:
        watch_parent()
    return _capture(fn, *args)


def _tagged_local(position: int, fn: Callable[..., Any], *args: Any) -> tuple[int, Any]:
    return position, _capture_local(fn, *args)


#: the worker process whose parent a thread watches (a forked child starts its own)
_watched_pid: int | None = None
#: processes that opened a local pool: they are no workers, whatever runs in them
_POOL_OWNERS: set[int] = set()
PARENT_POLL_SECONDS = 1.0


def watch_parent() -> None:
    """In a local worker: end this process within ``PARENT_POLL_SECONDS`` of its parent's
    death. Ctrl-C and SIGTERM stop the workers themselves, but a ``kill -9`` or the OOM
    killer gives the run no chance to: its loky workers would finish their chunk, then
    idle for loky's 300 s timeout, holding their memory. One daemon thread per worker
    process polls ``os.getppid()`` (a dead parent's children are adopted by another)."""
    global _watched_pid
    pid = os.getpid()
    if _watched_pid == pid:
        return
    _watched_pid, parent = pid, os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_POLL_SECONDS)
        os._exit(1)  # nobody is left to read what this worker would compute

    threading.Thread(target=watch, name="es_search-parent-watch", daemon=True).start()


def release_local_workers() -> None:
    """End this process's loky workers now, if it has any. loky keeps them for the next
    call and, at interpreter exit, waits for them to finish (seconds, in which a Ctrl-C
    prints a traceback from loky's exit handler): the command line releases them once
    its work is done."""
    from joblib.externals.loky import reusable_executor
    executor = getattr(reusable_executor, "_executor", None)
    if executor is not None:
        executor.shutdown(wait=True, kill_workers=True)


class Pool:
    """Where the parallel path runs a generation's chunks; one per ``Evaluator``.

    - ``n_workers``: chunks that run at once; ``is_local``: workers are processes of
      this machine (payloads travel as files);
    - ``put(name, value)``: a payload (bytes or a NumPy array) every chunk of a round
      gets: returns what to pass in the chunks' arguments (a small ``FileRef`` on local
      pools, else the value); a later ``put`` of the same name replaces it;
    - ``run_chunks(fn, args_list, done=None)``: ``fn(*args)`` for each ``args`` on the
      workers, the results in order; when some raise, the first error (in order) is
      raised after all have finished; ``done`` (a dict) receives each result by
      position as it arrives, so a retry can skip them;
    - ``abort()``: stop running chunks now (Ctrl-C); ``close()``: release the workers'
      files (the workers themselves persist across runs where the backend allows);
    - ``live_workers()``: the worker processes there are now, at most ``n_workers``
      (fewer when another run in this process shrank a pool they share).
    """

    n_workers = 1
    is_local = False
    files: SharedFiles | None = None
    #: chunks per worker at most in one round (None: as many as there are tasks), when
    #: uneven shares make the engine cut a generation finer (loky's workers claim long
    #: tasks instead, ``es_search.claims``): each chunk costs the main process a hand-out
    max_chunks_per_worker: int | None = 4

    def put(self, name: str, value: Any) -> Any:
        if self.files is None:
            return value
        if isinstance(value, np.ndarray):
            return self.files.put_array(name, value)
        return self.files.put_blob(name, bytes(value))

    def run_chunks(self, fn: Callable[..., Any], args_list: Sequence[tuple],
                   done: dict | None = None, timeout: float | None = None) -> list:
        raise NotImplementedError

    def abort(self) -> None:
        """Stop the running chunks (best effort)."""

    def live_workers(self) -> int:
        return self.n_workers

    def close(self) -> None:
        if self.files is not None:
            files, self.files = self.files, None
            files.close()


class JoblibPool(Pool):
    """Any joblib backend, through ``joblib.Parallel`` (loky with a task timeout,
    multiprocessing, dask, ray, custom backends)."""

    def __init__(self, parallel: joblib.Parallel, n_workers: int):
        self._parallel = parallel
        self.n_workers = n_workers
        self.is_local = is_local(parallel)
        _POOL_OWNERS.add(os.getpid())
        self.files = SharedFiles() if self.is_local else None
        backend = parallel._backend
        if hasattr(getattr(backend, "_pool", None), "_inqueue"):  # multiprocessing's
            # joblib aborts the pool itself when a call is interrupted: unjam it first
            abort_everything = backend.abort_everything

            def unjammed(*args: Any, **kwargs: Any) -> Any:
                _unjam_multiprocessing_pool(getattr(backend, "_pool", None))
                return abort_everything(*args, **kwargs)

            backend.abort_everything = unjammed

    def run_chunks(self, fn: Callable[..., Any], args_list: Sequence[tuple],
                   done: dict | None = None, timeout: float | None = None) -> list:
        done = {} if done is None else done
        self._parallel.timeout = timeout
        todo = [(i, args) for i, args in enumerate(args_list) if i not in done]
        call = joblib.delayed(_tagged_local if self.is_local else _tagged)
        for position, outcome in self._parallel(call(i, fn, *args) for i, args in todo):
            done[position] = outcome
        return _in_order(done, len(args_list))

    def abort(self) -> None:
        abort = getattr(self._parallel._backend, "abort_everything", None)
        if abort is not None:
            try:
                abort(ensure_ready=False)
            except Exception:  # pragma: no cover - already broken: nothing to stop
                pass

    def close(self) -> None:
        parallel, self._parallel = self._parallel, None
        if parallel is not None:
            parallel.__exit__(None, None, None)
        super().close()


def _unjam_multiprocessing_pool(pool: Any) -> None:
    """Before a ``multiprocessing.pool.Pool`` is terminated: kill its workers and free
    its task queue's read lock. A SIGTERM sent to the whole process group (``timeout``,
    Slurm, systemd) can kill a worker while it holds that lock, and ``terminate()``
    then waits for it forever (``Pool._help_stuff_finish``)."""
    workers, inqueue = getattr(pool, "_pool", None), getattr(pool, "_inqueue", None)
    if not workers or inqueue is None:
        return
    for worker in list(workers):
        try:
            worker.kill()
        except Exception:  # noqa: BLE001 - already gone
            pass
    for worker in list(workers):
        worker.join(timeout=5)
    lock = getattr(inqueue, "_rlock", None)
    if lock is not None and not lock.acquire(timeout=0.1):
        try:  # held by a worker that is dead now: nobody else will release it
            lock.release()
        except ValueError:  # pragma: no cover - released meanwhile
            pass
    elif lock is not None:
        lock.release()


class LokyPool(JoblibPool):
    """loky without a task timeout: chunks go straight to the executor and their futures
    are waited on (joblib's result loop polls every 10 ms, a floor on each round)."""

    def live_workers(self) -> int:
        """loky keeps one executor per process: a run in another thread that asks for
        fewer workers resizes it under this one (loky warns "Trying to resize an
        executor with running jobs")."""
        executor = getattr(self._parallel._backend, "_workers", None)
        size = getattr(executor, "_max_workers", None)
        return self.n_workers if not isinstance(size, int) else max(1, min(self.n_workers,
                                                                             size))

    def run_chunks(self, fn: Callable[..., Any], args_list: Sequence[tuple],
                   done: dict | None = None, timeout: float | None = None) -> list:
        if timeout is not None:
            return super().run_chunks(fn, args_list, done, timeout)
        done = {} if done is None else done
        backend = self._parallel._backend
        try:
            futures = {i: backend.submit(functools.partial(_capture_local, fn, *args))
                       for i, args in enumerate(args_list) if i not in done}
        except BrokenExecutor:
            backend.abort_everything(ensure_ready=True)
            raise
        concurrent.futures.wait(list(futures.values()))
        error: BaseException | None = None
        for i in sorted(futures):
            try:
                done[i] = futures[i].result()
            except BaseException as exc:  # noqa: BLE001 - re-raised below
                error = error or exc
        if isinstance(error, BrokenExecutor):  # fresh workers for a retry
            backend.abort_everything(ensure_ready=True)
        if error is not None:
            raise error
        return _in_order(done, len(args_list))


def _in_order(done: dict, n: int) -> list:
    """The results by position; the first chunk that raised (in order) raises."""
    results = []
    for i in range(n):
        ok, value = done[i]
        if not ok:
            for j in [j for j in done if not done[j][0]]:
                del done[j]  # a retry reruns them
            raise value
        results.append(value)
    return results


def open_pool(n_jobs: int, backend: Any, task_timeout: float | None = None,
              max_workers: int | None = None) -> Pool | None:
    """A started pool for ``n_jobs`` workers on ``backend`` (a name prepared by
    :func:`prepare`, an instance, or None for ``joblib.parallel_config``'s choice), or
    None when that means a single worker (score in this process). Dask and Ray (by name,
    as a Client, or chosen with ``joblib.parallel_config``) get es_search's own pools.
    On this machine's backends no more than ``max_workers`` processes start (a run's
    largest generation: more would only cost start-up time and memory)."""
    if is_cluster(backend):
        return _cluster_pool(backend, n_jobs)
    parallel = joblib.Parallel(n_jobs=n_jobs, backend=backend, prefer="processes")
    chosen = parallel._backend
    if type(chosen).__name__ == "DaskDistributedBackend":  # parallel_config("dask")
        return _cluster_pool(chosen.client, n_jobs)
    if type(chosen).__name__ == "RayBackend":  # parallel_config("ray")
        return _cluster_pool("ray", n_jobs)
    if type(chosen).__name__ == "SequentialBackend":  # in this process, as n_jobs=1
        return None
    if getattr(chosen, "uses_threads", False):
        if not _scores_on_threads(chosen, backend):  # in another joblib worker: score
            return None                               # in this one, as n_jobs=1 would
        raise _thread_backend_error(chosen)
    if max_workers is not None and is_local(parallel) and \
            max_workers < parallel._effective_n_jobs():
        n_jobs = max_workers
        parallel = joblib.Parallel(n_jobs=n_jobs, backend=backend, prefer="processes")
    if getattr(chosen, "supports_return_generator", False):
        # chunks finished before a worker died are kept (a retry skips them)
        parallel = joblib.Parallel(n_jobs=n_jobs, backend=backend, prefer="processes",
                                   return_as="generator_unordered")
    parallel.__enter__()
    n_workers = worker_count(parallel)
    if n_workers == 1:
        parallel.__exit__(None, None, None)
        return None
    cls = LokyPool if is_loky(parallel) and task_timeout is None else JoblibPool
    return cls(parallel, n_workers)


def _cluster_pool(backend: Any, n_jobs: int) -> Pool:
    if backend == "ray":
        from .pools.ray_pool import RayPool
        return RayPool(n_jobs)
    from .pools.dask_pool import DaskPool
    return DaskPool(backend, n_jobs)


def is_loky(parallel: joblib.Parallel) -> bool:
    """True when ``parallel`` runs on a live loky executor (futures can be used)."""
    from joblib._parallel_backends import LokyBackend
    backend = parallel._backend
    return type(backend) is LokyBackend and getattr(backend, "_workers", None) is not None
