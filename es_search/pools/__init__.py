"""Worker pools on clusters: Dask (:mod:`.dask_pool`) and Ray (:mod:`.ray_pool`).

Each runs a generation's chunks on its own futures (no joblib in between): one chunk
per worker process at a time, payloads sent once per worker (Dask: scattered to every
worker; Ray: put once in the object store), workers that join between generations
used at the next one, and a worker lost mid-generation reported as a
:class:`WorkerLost` (a ``BrokenExecutor``) for the chunks it held, so that the engine
scores them again with the same seeds, as on loky.
"""
from __future__ import annotations

from concurrent.futures import BrokenExecutor
from typing import Any


class WorkerLost(BrokenExecutor):
    """A worker process (or node) left the cluster while it held chunks."""


def is_client(backend: Any) -> bool:
    """True for a ``distributed.Client`` (without importing distributed)."""
    return any(c.__module__.startswith("distributed") and c.__name__ == "Client"
               for c in type(backend).__mro__)
