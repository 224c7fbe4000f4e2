"""Where a run's tasks go (:func:`prepare`, :func:`open_pool`), and this machine's
worker pool, :class:`LocalPool`, whose payloads are written once to a private folder
(:class:`SharedFiles`) and travel as a small :class:`FileRef`.
"""
from __future__ import annotations

import multiprocessing
import os
import shutil
import tempfile
import threading
import weakref
from concurrent.futures import BrokenExecutor
from typing import Any, Callable, NamedTuple, Sequence

import numpy as np

from .checks import did_you_mean
from .extras import require
from .interrupt import KEPT, watch_parent
from .pools.base import Pool, in_order, same_bytes
from .pools.dask_pool import DaskPool, get_client, is_client
from .pools.loops import Loops
from .pools.ray_pool import RayPool
from .seeding import fresh_in_forked_child


def prepare(backend: Any, n_jobs: int) -> tuple[Any, int]:
    """Where a run's tasks go, checked: ``(kind, n_jobs)``, ``kind`` one of ``"loky"``,
    ``"multiprocessing"``, ``"dask"`` (or a ``distributed.Client``), ``"ray"`` or None
    (this process), ``n_jobs`` the workers (on a cluster: as given, -1 all). ``backend``
    None: the enclosing ``joblib.parallel_config``'s."""
    if backend == "ray":
        require("ray", "ray")
        return "ray", n_jobs
    if backend == "dask" or is_client(backend):
        get_client(backend)  # a clear error now if there is no client
        return backend, n_jobs
    from joblib.parallel import BACKENDS, get_active_backend
    if isinstance(backend, str) and backend not in BACKENDS:
        usable = {b for b, cls in BACKENDS.items() if b == "sequential"
                  or not getattr(cls, "uses_threads", False)}
        known = sorted(usable | {"dask", "ray"})
        raise ValueError(f"unknown backend {backend!r}{did_you_mean(backend, known)}: use "
                         f"one of {', '.join(map(repr, known))}, or None (loky, "
                         f"or the backend of an enclosing joblib.parallel_config)")
    active, _ = get_active_backend(prefer="processes")
    chosen = (active if backend is None else backend if not isinstance(backend, str)
              else BACKENDS[backend](nesting_level=active.nesting_level))
    name = next((n for n, cls in BACKENDS.items() if type(chosen) is cls), None)
    if name in ("dask", "ray"):  # joblib.parallel_config("dask") or ("ray")
        return prepare(chosen.client if name == "dask" else name, n_jobs)
    if name == "sequential" or n_jobs == 1 and name is not None:  # None: not joblib's
        return None, 1
    if getattr(chosen, "uses_threads", False):
        # inside another joblib worker (a sweep over seeds) joblib makes nested calls
        # use threads: asked for nothing, a run scores in that worker, as n_jobs=1
        if backend is None and (chosen.nesting_level or 0) >= 1:
            return None, 1
        raise ValueError(
            f"es_search cannot score on a thread-based joblib backend "
            f"({type(chosen).__name__}): each task seeds the process-wide random "
            f"generators (random, numpy, torch), which threads share, so results "
            f"would depend on timing. Use a process backend (loky, the default; "
            f"multiprocessing; dask; ray) or n_jobs=1.")
    if name not in ("loky", "multiprocessing"):
        raise ValueError(f"es_search cannot run on the joblib backend "
                         f"{type(chosen).__name__}: use loky (the default), "
                         f"multiprocessing, dask or ray")
    return name, int(chosen.effective_n_jobs(n_jobs))


# --------------------------------------------------------------------- shared files
class FileRef(NamedTuple):
    """A file on this machine holding ``size`` values of the numpy dtype ``dtype``."""

    path: str
    dtype: str
    size: int


_MMAP_FROM = 1 << 16  # bytes; smaller files are read, larger ones memory-mapped


def load(ref: Any) -> Any:
    """The array behind ``ref``; anything else as is."""
    if not isinstance(ref, FileRef):
        return ref
    dtype = np.dtype(ref.dtype)
    if ref.size * dtype.itemsize >= _MMAP_FROM:
        return np.memmap(ref.path, dtype=dtype, mode="r", shape=(ref.size,))
    return np.fromfile(ref.path, dtype=dtype, count=ref.size)


#: /dev/shm is used only with this much free (as joblib does): a container's is often 64 MB
SHM_MIN_FREE = 2 * 10 ** 9


def _shm_root() -> str | None:
    root = "/dev/shm"
    if not (os.path.isdir(root) and os.access(root, os.W_OK)):
        return None
    stats = os.statvfs(root)
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


class SharedFiles:
    """A private folder of files the local workers read; removed by ``close()`` or at
    exit (or by the next process, after a kill)."""

    def __init__(self) -> None:
        root = _shm_root() or tempfile.gettempdir()
        _sweep(root)
        self.folder = tempfile.mkdtemp(prefix=f"es_search-{os.getpid()}-", dir=root)
        self._finalizer = weakref.finalize(self, shutil.rmtree, self.folder, True)
        self._last: dict[str, tuple[np.ndarray, FileRef]] = {}  # name -> last put
        self._count = 0
        self.bytes_written = 0

    def put_array(self, name: str, array: np.ndarray) -> FileRef:
        """Write ``array`` under ``name``, replacing the file of the last ``put`` of
        ``name`` unless the two are equal byte for byte (workers keep what they loaded)."""
        array = np.ascontiguousarray(array)
        last = self._last.get(name)
        if last is not None and same_bytes(array, last[0]):
            return last[1]
        self._count += 1
        path = os.path.join(self.folder, f"{name}-{self._count}.bin")
        array.tofile(path)
        self.bytes_written += array.nbytes
        if last is not None:
            os.remove(last[1].path)
        ref = FileRef(path, array.dtype.str, int(array.size))
        self._last[name] = (array.copy(), ref)  # a copy: callers may change theirs
        return ref

    def close(self) -> None:
        self._finalizer()


# --------------------------------------------------------------------- pools
# one chunk at a time per process (chunks seed the global RNGs); read as backends.CHUNK_LOCK
CHUNK_LOCK = threading.Lock()
fresh_in_forked_child(globals(), "CHUNK_LOCK", threading.Lock)


#: seconds an idle loky worker waits for the next run before it ends (joblib's)
IDLE_SECONDS = 300
#: numerical libraries' thread pools: one thread in each loky worker unless set here
THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
               "BLIS_NUM_THREADS", "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS")
_KEPT_LOCK = threading.Lock()


class LocalPool(Pool):
    """Worker processes of this machine on a loky ``ProcessPoolExecutor``, each running a
    loop that takes the pool's chunks (:mod:`.pools.loops`). ``"loky"``: at ``close()``
    the workers are kept (``interrupt.KEPT``) for the next run of as many;
    ``"multiprocessing"``: started that way, closed with the pool. A Ctrl-C, a chunk
    over time or a lost worker ends them at once; a retry gets fresh ones."""

    local = True

    def __init__(self, kind: str, n_workers: int):
        self.kind, self.n_workers = kind, n_workers
        self.files = SharedFiles()
        self._executor: Any = None
        self._loops: Loops | None = None

    def _workers(self) -> Any:
        from joblib.externals.loky import ProcessPoolExecutor
        if self.kind != "loky":
            return ProcessPoolExecutor(self.n_workers, context=multiprocessing.get_context(),
                                       initializer=watch_parent)
        with _KEPT_LOCK:  # runs in other threads open pools too
            executor, size = KEPT.pop() if KEPT else (None, 0)
        if size == self.n_workers:
            return executor
        if executor is not None:
            executor.shutdown(wait=True, kill_workers=True)
        return ProcessPoolExecutor(self.n_workers, timeout=IDLE_SECONDS, initializer=watch_parent,
                                   env={var: os.environ.get(var, "1") for var in THREAD_VARS})

    def put(self, name: str, value: Any) -> FileRef:
        if not isinstance(value, np.ndarray):
            value = np.frombuffer(bytes(value), np.uint8)
        return self.files.put_array(name, value)

    def run_chunks(self, fn: Callable[..., Any], args_list: Sequence[tuple],
                   done: dict | None = None, timeout: float | None = None) -> list:
        done = {} if done is None else done
        todo = [i for i in range(len(args_list)) if i not in done]
        try:
            if self._loops is None:
                self._executor = self._workers()
                self._loops = Loops(self._executor, self.n_workers, self.files.folder)
            self._loops.run(fn, args_list, todo, done, timeout)  # each chunk timed
        except BaseException as exc:  # answers may be on their way: the workers go
            self.abort()  # fresh ones for a retry
            if isinstance(exc, (EOFError, OSError, RuntimeError)) and not isinstance(
                    exc, (BrokenExecutor, TimeoutError)):  # a lost worker (not a late chunk)
                raise BrokenExecutor(f"{type(exc).__name__}: {exc}") from exc
            raise
        return in_order(done, len(args_list))

    def _end(self, keep: bool) -> None:
        """Close the loops; end the workers, or keep loky's for the next run of as many."""
        if self._loops is not None:
            self._loops.close()
        executor, self._executor, self._loops = self._executor, None, None
        if executor is not None and keep and self.kind == "loky":
            with _KEPT_LOCK:
                KEPT.append((executor, self.n_workers))
                executor = KEPT.pop(0)[0] if len(KEPT) > 1 else None
        if executor is not None:  # multiprocessing's, or the one kept before
            executor.shutdown(wait=True, kill_workers=True)

    def abort(self) -> None:
        self._end(keep=False)

    def close(self) -> None:
        self._end(keep=True)
        self.files.close()


def open_pool(choice: tuple[Any, int], max_workers: int | None = None,
              here: bool = True) -> Pool | None:
    """The pool ``choice`` names, or None for one worker where scores may run here (``here``);
    on this machine at most ``max_workers`` processes (a run's largest generation)."""
    kind, n_jobs = choice
    if kind == "ray":
        return RayPool(n_jobs)
    if kind not in (None, "loky", "multiprocessing"):
        return DaskPool(kind, n_jobs)
    n_workers = max(1, min(n_jobs, max_workers or n_jobs))
    return None if kind is None or n_workers == 1 and here else LocalPool(kind, n_workers)
