"""Task seeds: one independent stream per (run seed, generation, candidate).

Every scoring task gets its own seed, derived with :class:`numpy.random.SeedSequence`
from the run's seed, the generation and the candidate's index -- never from the worker
that happens to run it or from completion order. That is what makes a run give the
same result on 1 core, 16 cores or a cluster.

Generation ``-1`` is the evaluation of the starting agent, before generation 0.
"""
from __future__ import annotations

import random

import numpy as np
import torch

_MASK32 = 0xFFFF_FFFF


def task_seed(seed: int, generation: int, index: int) -> int:
    """The 64-bit seed of candidate ``index`` of ``generation`` in a run seeded ``seed``.

    >>> task_seed(0, 0, 0) == task_seed(0, 0, 0)
    True
    >>> len({task_seed(0, g, i) for g in range(3) for i in range(3)})
    9
    """
    sequence = np.random.SeedSequence(seed, spawn_key=(generation + 1, index))
    return int(sequence.generate_state(1, np.uint64)[0])


def stream_seed(seed: int, *key: int) -> int:
    """A 64-bit seed for a strategy's own draws (``key`` names the purpose)."""
    sequence = np.random.SeedSequence(seed, spawn_key=(0, *key))
    return int(sequence.generate_state(1, np.uint64)[0])


def seed_global_rngs(seed: int) -> None:
    """Seed Python's ``random``, NumPy's global RNG and torch's CPU generator.

    ``torch.default_generator.manual_seed`` is used rather than ``torch.manual_seed``:
    the latter also queues a lazy CUDA seed and costs ~100x more per call.
    """
    random.seed(seed)
    np.random.seed(seed & _MASK32)
    torch.default_generator.manual_seed(seed)


class preserved_global_rngs:
    """Context manager: the global RNGs are as they were on entry after the block.

    Used around every batch of tasks, so the caller's own random state is untouched
    by a run, also when the run is a plain in-process loop (``n_jobs=1``).
    """

    def __enter__(self) -> "preserved_global_rngs":
        self._state = (random.getstate(), np.random.get_state(), torch.get_rng_state())
        return self

    def __exit__(self, *exc_info: object) -> None:
        python_state, numpy_state, torch_state = self._state
        random.setstate(python_state)
        np.random.set_state(numpy_state)
        torch.set_rng_state(torch_state)
