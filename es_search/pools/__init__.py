"""Worker pools: the loop each local worker runs (:mod:`.loops`), and the pools on
clusters, Dask (:mod:`.dask_pool`) and Ray (:mod:`.ray_pool`): one actor per worker
process, payloads sent to each worker once (:mod:`.runner`) or derived there
(:mod:`.centres`), a lost worker's chunks scored again as on loky (:class:`WorkerLost`).
"""
from __future__ import annotations

from concurrent.futures import BrokenExecutor


class WorkerLost(BrokenExecutor):
    """A worker process (or node) left the cluster while it held chunks."""
