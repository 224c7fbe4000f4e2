"""Task seeds: one independent stream per (run seed, generation, candidate).

Every scoring task gets its own seed, derived with :class:`numpy.random.SeedSequence`
from the run's seed, the generation and the candidate's index -- never from the worker
that happens to run it or from completion order. That is what makes a run give the
same result on 1 core, 16 cores or a cluster.

Generation ``-1`` is the evaluation of the starting agent, before generation 0.

:func:`task_seeds` and :func:`seed_sequence_words` compute many seeds at once, bit for
bit what ``SeedSequence`` gives one at a time (a batched group's seeds and streams).
"""
from __future__ import annotations

import random

from typing import Any

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


def build_seed(seed: int) -> int:
    """The seed the command line builds a problem's agent under (its random initial
    weights), so that the same command gives the same run: a stream apart from every
    task's (a one-element spawn key; tasks have two).

    >>> build_seed(0) == build_seed(0) != task_seed(0, -1, 0)
    True
    """
    sequence = np.random.SeedSequence(seed, spawn_key=(0,))
    return int(sequence.generate_state(1, np.uint64)[0])


def build_seeded(seed: int, factory: Any, *args: Any, **kwargs: Any) -> Any:
    """``factory(*args, **kwargs)`` under global RNGs seeded with :func:`build_seed`, the
    caller's RNG state restored after: an agent's random initial weights from the run's
    seed (the command line and the control benchmark build their agents so)."""
    with preserved_global_rngs():
        seed_global_rngs(build_seed(seed))
        return factory(*args, **kwargs)


# numpy.random.SeedSequence's hash constants (numpy/random/bit_generator.pyx)
_INIT_A, _MULT_A, _INIT_B, _MULT_B = 0x43B0D7E5, 0x931E8875, 0x8B51F9DD, 0x58F38DED
_MIX_L, _MIX_R = 0xCA01F9DD, 0x4973F715


def seed_words(n: int) -> list[int]:
    """``n`` as SeedSequence reads an int: 32-bit words, least significant first."""
    words = [n & _MASK32]
    while n > _MASK32:
        n >>= 32
        words.append(n & _MASK32)
    return words


def _hash(value, const: int, mult: int):
    """``((value ^ const) * mult) ^ (... >> 16)`` in uint32: SeedSequence's hashmix step
    (``value`` a Python int or a uint32 array)."""
    if isinstance(value, int):
        value = ((value ^ const) * mult) & _MASK32
    else:
        value = (value ^ np.uint32(const)) * np.uint32(mult)
    return value ^ (value >> 16)


def _mix(x, y):
    # a shared word's product in Python, any array's in uint32 (which wraps, silently)
    x = np.uint32((_MIX_L * x) & _MASK32) if isinstance(x, int) else np.uint32(_MIX_L) * x
    y = np.uint32((_MIX_R * y) & _MASK32) if isinstance(y, int) else np.uint32(_MIX_R) * y
    if isinstance(x, np.generic) and isinstance(y, np.generic):
        result = (int(x) - int(y)) & _MASK32
    else:
        result = x - y
    return result ^ (result >> 16)


def seed_sequence_words(entropy: list, n_words: int) -> list:
    """``SeedSequence``'s pool and ``generate_state(n_words)`` (uint32 words), for many
    sequences at once: ``entropy`` is the assembled entropy, one item per word, each a
    Python int shared by every sequence or a uint32 array with one word per sequence
    (as ``get_assembled_entropy()`` lays it out: the run entropy padded to 4 words,
    then the spawn key's). Words every sequence shares are hashed once, in Python.
    """
    const = _INIT_A

    def hashmix(value):
        nonlocal const
        before, const = const, (const * _MULT_A) & _MASK32
        return _hash(value, before, const)

    pool = [hashmix(word) for word in list(entropy[:4]) + [0] * (4 - len(entropy))]
    for src in range(4):
        for dst in range(4):
            if src != dst:
                pool[dst] = _mix(pool[dst], hashmix(pool[src]))
    for word in entropy[4:]:
        for dst in range(4):
            pool[dst] = _mix(pool[dst], hashmix(word))
    out, const = [], _INIT_B
    for k in range(n_words):
        before, const = const, (const * _MULT_B) & _MASK32
        out.append(_hash(pool[k % 4], before, const))
    return out


def task_seeds(seed: int, generation: int, start: int, stop: int) -> list[int]:
    """``[task_seed(seed, generation, i) for i in range(start, stop)]``, at once
    (:func:`seed_sequence_words`, tested equal; ``task_seed`` costs ~6 us each)."""
    if stop <= start:
        return []
    if min(seed, generation + 1, start) < 0 or stop - 1 > _MASK32:
        return [task_seed(seed, generation, i) for i in range(start, stop)]
    run = seed_words(seed)
    index = np.arange(start, stop, dtype=np.uint64).astype(np.uint32)
    entropy = run + [0] * (4 - len(run)) + seed_words(generation + 1) + [index]
    return as_uint64(seed_sequence_words(entropy, 2))[:, 0].tolist()


def as_uint64(words: list) -> np.ndarray:
    """uint32 words (arrays of one word per sequence), in pairs, as
    ``generate_state(..., np.uint64)`` views them: ``(sequences, len(words) // 2)``."""
    state = np.stack([np.asarray(w, dtype=np.uint32) for w in words], axis=-1)
    return np.ascontiguousarray(state).view(np.uint64)


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
