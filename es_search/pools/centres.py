"""Centres that cluster workers derive instead of receiving: a generation's centre is
often the previous one or one of the previous generation's candidates, which a worker
holding the previous centre rebuilds from its seed (:func:`derive_center`, checked
against the centre's CRC-32). Other centres travel whole, once per worker.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .base import same_bytes

#: centres smaller than this (bytes) always travel whole: a recipe would save nothing
DERIVE_FROM = 1 << 16


def derive_center(token: str, skeleton: Any, base: np.ndarray, candidate: Any, seed: int,
                  generation: int, index: int) -> np.ndarray:
    """In a worker: candidate ``index`` of ``generation`` built around ``base``, flat,
    exactly as :meth:`es_search.evaluation.Engine.rebuild` built it."""
    from ..seeding import in_process_tasks
    from ..worker import Payload, run_task, worker_agent
    agent = worker_agent(token, skeleton)
    with in_process_tasks():
        run_task(agent, Payload(np.asarray(base), {}), candidate, seed, generation, index,
                 score=False)
    return agent.get_flat()


class CentreHistory:
    """The last centre sent to ``pool`` and the candidates rebuilt from it (main process)."""

    def __init__(self, pool: Any, token: str, skeleton: Any, seed: int) -> None:
        self.pool, self.token, self.skeleton, self.seed = pool, token, skeleton, seed
        self.parcel: Any = None  # the centre parcel the workers hold
        self.center: np.ndarray | None = None
        self.rebuilt: list[tuple[int, Any, np.ndarray]] = []  # (index, candidate, flat)
        self.rebuilt_generation: int | None = None  # the generation they belong to
        self.reused = self.derived = self.whole = 0

    def put(self, center: np.ndarray) -> Any:
        """The parcel for ``center``: the one sent before if equal, a derived one if
        ``center`` is a candidate rebuilt from it, else the value."""
        center = np.ascontiguousarray(center)
        if self.center is not None and same_bytes(center, self.center):
            self.reused += 1
            return self.parcel
        recipe = None
        if center.nbytes >= DERIVE_FROM and self.parcel is not None:
            for index, candidate, flat in self.rebuilt:
                if same_bytes(center, flat):
                    recipe = (derive_center, (self.token, self.skeleton, self.parcel, candidate,
                                              self.seed, self.rebuilt_generation, index))
                    break
        self.whole += recipe is None
        self.derived += recipe is not None
        self.parcel = self.pool.put("center", center, recipe=recipe)
        # a copy: a caller that changed its array in place must not look unchanged
        self.center, self.rebuilt = center.copy(), []
        return self.parcel

    def note_rebuilt(self, generation: int, center: np.ndarray, candidate: Any, index: int,
                     flat: np.ndarray) -> None:
        """A candidate the main process rebuilt (e.g. a winner) around ``center``."""
        if self.center is None or not same_bytes(np.asarray(center), self.center):
            return
        if self.rebuilt_generation != generation:
            self.rebuilt, self.rebuilt_generation = [], generation
        self.rebuilt.append((index, candidate, flat))
