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


# numpy.random.SeedSequence's hash constants (numpy/random/bit_generator.pyx)
_INIT_A, _MULT_A, _INIT_B, _MULT_B = 0x43B0D7E5, 0x931E8875, 0x8B51F9DD, 0x58F38DED
_MIX_L, _MIX_R = 0xCA01F9DD, 0x4973F715


def _words(n: int) -> list[int]:
    """``n`` as SeedSequence reads an int: 32-bit words, least significant first."""
    words = [n & _MASK32]
    while n > _MASK32:
        n >>= 32
        words.append(n & _MASK32)
    return words


def task_seeds(seed: int, generation: int, start: int, stop: int) -> list[int]:
    """``[task_seed(seed, generation, i) for i in range(start, stop)]``, at once.

    SeedSequence's hash, transcribed: the words every index shares (the run seed, the
    generation) are mixed once, in Python integers; the index's word and the output in
    NumPy ``uint32`` arithmetic, all indices together (``task_seed`` costs ~6 us each).
    Tested equal to :func:`task_seed`.
    """
    if stop <= start:
        return []
    if min(seed, generation + 1, start) < 0 or stop - 1 > _MASK32:
        return [task_seed(seed, generation, i) for i in range(start, stop)]
    const = _INIT_A  # the hash constant, advanced by every hashmix() call

    def hashmix(value):  # a Python int or a uint32 array
        nonlocal const
        before, const = const, (const * _MULT_A) & _MASK32
        if isinstance(value, int):
            value = ((value ^ before) * const) & _MASK32
        else:
            value = (value ^ np.uint32(before)) * np.uint32(const)
        return value ^ (value >> 16)

    def mix(x, y):
        if isinstance(y, int):
            result = (_MIX_L * x - _MIX_R * y) & _MASK32
        else:
            result = np.uint32(_MIX_L) * x - np.uint32(_MIX_R) * y
        return result ^ (result >> 16)

    run = _words(seed)
    entropy = run + [0] * (4 - len(run)) + _words(generation + 1)
    pool = [hashmix(word) for word in entropy[:4]]
    for src in range(4):
        for dst in range(4):
            if src != dst:
                pool[dst] = mix(pool[dst], hashmix(pool[src]))
    for word in entropy[4:]:
        for dst in range(4):
            pool[dst] = mix(pool[dst], hashmix(word))
    index = np.arange(start, stop, dtype=np.uint64).astype(np.uint32)
    n = len(index)
    for dst in range(4):  # the index's word last: every index at once
        pool[dst] = mix(np.full(n, pool[dst], dtype=np.uint32), hashmix(index))
    words = []
    for k, word in enumerate(pool[:2]):  # generate_state(1, uint64): two words
        mult = (_INIT_B * _MULT_B ** (k + 1)) & _MASK32
        value = (word ^ np.uint32((_INIT_B * _MULT_B ** k) & _MASK32)) * np.uint32(mult)
        words.append((value ^ (value >> 16)).astype(np.uint64))
    return (words[0] | (words[1] << np.uint64(32))).tolist()


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
