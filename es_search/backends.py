"""joblib backends for the evaluation engine: which one, how many workers, how to send.

- ``prepare(backend)`` checks a backend *name* at construction time: ``"dask"`` needs
  dask.distributed and a running ``Client``; ``"ray"`` is registered with joblib on
  first use (``ray.util.joblib``). Missing packages raise an ``ImportError`` naming the
  extra that installs them.
- ``SharedFiles``: on a backend whose workers are processes of *this* machine (loky,
  multiprocessing) the agent's skeleton and each generation's centre are written once to
  a private folder (``/dev/shm`` when there is one) and travel as a small
  :class:`FileRef`: the bytes sent per chunk do not grow with the number of parameters.
  Other backends (dask, ray, custom) get the arrays inline, pickled once per chunk.
- ``is_loky(parallel)``: whether the evaluator can use the loky executor's futures
  directly (joblib's result loop polls every 10 ms, a floor on each generation's time);
  ``submit_all`` runs start-up and timing rounds that way.
"""
from __future__ import annotations

import concurrent.futures
import os
import shutil
import tempfile
import threading
import weakref
from typing import Any, Callable, NamedTuple, Sequence

import joblib
import numpy as np

from .plotting import require

_RAY_REGISTERED = False


def prepare(backend: Any) -> Any:
    """Check (and for ray, register) a backend given by name; returns what to give
    ``joblib.Parallel(backend=...)``."""
    global _RAY_REGISTERED
    if backend == "ray" and not _RAY_REGISTERED:
        require("ray", "ray")
        ray_joblib = require("ray.util.joblib", "ray")
        ray_joblib.register_ray()
        _RAY_REGISTERED = True
    elif backend == "dask":
        distributed = require("distributed", "dask")
        try:
            distributed.get_client()
        except ValueError:
            raise ValueError(
                "backend='dask' runs on the active dask.distributed Client, and there is "
                "none: create one first, e.g. `from dask.distributed import Client; "
                "client = Client('tcp://scheduler:8786')` (or Client() for a local "
                "cluster); on the command line pass --scheduler tcp://host:8786") from None
        # joblib knows "dask" by name only inside parallel_config(); an instance works
        # in Parallel(backend=...) too
        from joblib._dask import DaskDistributedBackend
        return DaskDistributedBackend()
    return backend


def _backend_class(parallel: joblib.Parallel) -> str:
    return type(parallel._backend).__name__


def is_local(parallel: joblib.Parallel) -> bool:
    """True when the workers are processes of this machine that can read our files."""
    from joblib._parallel_backends import LokyBackend, MultiprocessingBackend
    return type(parallel._backend) in (LokyBackend, MultiprocessingBackend)


def worker_count(parallel: joblib.Parallel) -> int:
    """How many chunks a generation is cut into: one per worker process."""
    n = max(1, int(parallel._effective_n_jobs()))
    if _backend_class(parallel) == "DaskDistributedBackend":
        # chunks in one dask worker process take turns (they share the global RNGs),
        # so one chunk per process, not per thread
        n = min(n, max(1, len(parallel._backend.client.nthreads())))
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


def _shm_root() -> str | None:
    root = "/dev/shm"
    return root if os.path.isdir(root) and os.access(root, os.W_OK) else None


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
        self._previous: str | None = None
        self.bytes_written = 0

    def put_bytes(self, name: str, data: bytes) -> FileRef:
        path = os.path.join(self.folder, name)
        with open(path, "wb") as f:
            f.write(data)
        self.bytes_written += len(data)
        return FileRef(path, "", len(data))

    def put_center(self, generation: int, center: np.ndarray) -> FileRef:
        """Write this generation's centre; the previous generation's file is removed."""
        center = np.ascontiguousarray(center)
        path = os.path.join(self.folder, f"center-{generation}.bin")
        center.tofile(path)
        self.bytes_written += center.nbytes
        if self._previous is not None and self._previous != path:
            try:
                os.remove(self._previous)
            except OSError:  # pragma: no cover - e.g. still open on Windows
                pass
        self._previous = path
        return FileRef(path, center.dtype.str, int(center.size))

    def close(self) -> None:
        self._finalizer()


# --------------------------------------------------------------------- dispatch
def is_loky(parallel: joblib.Parallel) -> bool:
    """True when ``parallel`` runs on a live loky executor (futures can be used)."""
    from joblib._parallel_backends import LokyBackend
    backend = parallel._backend
    return type(backend) is LokyBackend and getattr(backend, "_workers", None) is not None


def submit_all(parallel: joblib.Parallel, calls: Sequence[Callable[[], Any]]) -> list:
    """Run ``calls`` on ``parallel``'s workers; their results (in no particular order:
    used for start-up and timing rounds)."""
    if not is_loky(parallel):
        return list(parallel(joblib.delayed(call)() for call in calls))
    futures = [parallel._backend.submit(call) for call in calls]
    concurrent.futures.wait(futures)
    return [future.result() for future in futures]


# one chunk at a time per process: dask runs several tasks per worker process in threads,
# and a chunk seeds the process-wide random generators
CHUNK_LOCK = threading.Lock()
