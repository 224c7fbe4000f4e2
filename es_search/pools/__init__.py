"""Worker pools: the loop each local worker runs (:mod:`.loops`), and the cluster pools,
Dask's (:mod:`.dask_pool`) and Ray's (:mod:`.ray_pool`), with the actors' runners and
payloads (:mod:`.runner`, :mod:`.centres`) and the error of a lost worker (:class:`WorkerLost`).
"""
from __future__ import annotations

from concurrent.futures import BrokenExecutor


class WorkerLost(BrokenExecutor):
    """A worker process (or node) left the cluster while it held chunks."""
