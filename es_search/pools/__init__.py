"""Worker pools: the loop each local worker runs (:mod:`.loops`, used by
``backends.LocalPool``), and the pools on clusters, Dask (:mod:`.dask_pool`) and Ray
(:mod:`.ray_pool`).

A cluster pool runs a generation's chunks on one actor per worker process (no joblib in
between; :mod:`.base`): one chunk per process at a time, payloads sent to each worker
once and kept there (:mod:`.runner`), a generation's centre kept or derived by the
workers when it is the previous one or a candidate they can rebuild (:mod:`.centres`),
workers that join between generations used at the next one, and a worker lost
mid-generation reported as a :class:`WorkerLost` (a ``BrokenExecutor``) for the chunks
it held, so that the engine scores them again with the same seeds, as on loky.
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
