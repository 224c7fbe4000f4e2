"""Task seeds: one independent stream per (run seed, generation, candidate), derived with
:class:`numpy.random.SeedSequence`, never from the worker that runs the task, so a run
gives the same result on 1 core or a cluster (generation ``-1``: the starting agent;
``2**32 - 1``: the end's selection test); and the blocks that guard the global RNGs.
"""
from __future__ import annotations

import contextlib
import functools
import os
import random
import threading
from typing import Any, Iterator, Sequence

import numpy as np
import torch

from .checks import check_int
from .seed_sequences import MASK32, as_uint64, seed_sequence_words, seed_words, spawned


def task_seed(seed: int, generation: int, index: int) -> int:
    """The 64-bit seed of candidate ``index`` of ``generation`` in a run seeded ``seed``.

    >>> task_seed(0, 0, 0) == task_seed(0, 0, 0)
    True
    >>> len({task_seed(0, g, i) for g in range(3) for i in range(3)})
    9
    """
    if not (type(seed) is type(generation) is type(index) is int
            and seed >= 0 and generation >= -1 and index >= 0):
        seed = check_int("seed", seed, 0, " (the run's seed)")
        generation = check_int("generation", generation, -1,
                               " (-1 is the starting agent's evaluation)")
        index = check_int("index", index, 0, " (the candidate's index in its generation)")
    return spawned(seed, (generation + 1,), (index,))[0]


def build_seeded(seed: int, factory: Any, *args: Any, **kwargs: Any) -> Any:
    """``factory(*args, **kwargs)`` under global RNGs seeded from the run's ``seed`` (a
    stream apart from every task's), the caller's RNG state restored after: an agent's
    random initial weights from the run's seed.

    >>> build_seeded(0, random.random) == build_seeded(0, random.random) != random.random()
    True
    """
    with preserved_global_rngs():
        seed_global_rngs(stream_seed(seed))
        return factory(*args, **kwargs)


def task_seeds(seed: int, generation: int, start: int, stop: int) -> list[int]:
    """``[task_seed(seed, generation, i) for i in range(start, stop)]`` (tested equal)."""
    return spawned(seed, (generation + 1,), range(start, stop))


def stream_seed(seed: int, *key: int) -> int:
    """A 64-bit seed for a strategy's own draws (``key`` names the purpose)."""
    key = (0, *key)
    return spawned(seed, key[:-1], key[-1:])[0]


def stream_seeds(seed: int, key: Sequence[int], last: Sequence[int]) -> list[int]:
    """``[stream_seed(seed, *key, k) for k in last]`` (tested equal)."""
    return spawned(seed, (0, *key), last)


def generators(seeds: Sequence[int], key: Sequence[int] = ()) -> list[np.random.Generator]:
    """``[Generator(PCG64(SeedSequence(s, spawn_key=key))) for s in seeds]``, their
    states computed at once for 4 seeds or more in [0, 2^64) (tested equal)."""
    seeds, key = [int(s) for s in seeds], tuple(int(k) for k in key)
    if len(seeds) < 4 or min(seeds + list(key) + [0]) < 0 or max(seeds) >> 64:
        return [np.random.Generator(np.random.PCG64(np.random.SeedSequence(s, spawn_key=key)))
                for s in seeds]
    array = np.array(seeds, dtype=np.uint64)
    low = (array & np.uint64(MASK32)).astype(np.uint32)
    high = (array >> np.uint64(32)).astype(np.uint32)
    # a spawn key pads the seed's words to 4; without one, absent words hash as 0 words
    entropy = [low, high, 0, 0] + [word for k in key for word in seed_words(k)]
    states = as_uint64(seed_sequence_words(entropy, 8))
    return [np.random.Generator(np.random.PCG64(_Precomputed(state, s, key)))
            for state, s in zip(states, seeds)]


class _Precomputed(np.random.bit_generator.ISpawnableSeedSequence):
    """``SeedSequence(seed, spawn_key=key)`` whose ``generate_state(4, np.uint64)``
    (PCG64's) was computed beforehand; anything else goes to the real one."""

    def __init__(self, state: np.ndarray, seed: int, key: tuple):
        self._state, self._seed, self._key = state, seed, key

    @functools.cached_property
    def real(self) -> np.random.SeedSequence:
        return np.random.SeedSequence(self._seed, spawn_key=self._key)

    def generate_state(self, n_words: int, dtype: Any = np.uint32) -> np.ndarray:
        if n_words == len(self._state) and np.dtype(dtype) == np.uint64:
            return self._state.copy()
        return self.real.generate_state(n_words, dtype)

    def spawn(self, n_children: int) -> list:
        return self.real.spawn(n_children)


def seed_global_rngs(seed: int) -> None:
    """Seed Python's ``random``, NumPy's global RNG and torch's CPU generator (not by
    ``torch.manual_seed``, which also queues a lazy CUDA seed and costs ~100x more)."""
    random.seed(seed)
    np.random.seed(seed & MASK32)
    torch.default_generator.manual_seed(seed)


def fresh_in_forked_child(namespace: dict, name: str, make: Any) -> None:
    """Give a forked child ``make()`` as ``namespace[name]`` (a module's lock: a pool may
    fork a worker while another thread holds it; the child must not inherit a lock that
    no thread of it will release). POSIX only; readers look the name up at each use."""
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=lambda: namespace.__setitem__(name, make()))


#: held while a block uses the process's global RNGs or torch's thread count: runs in two
#: threads take turns a batch at a time (re-entrant: a score() may start a run)
PROCESS_LOCK = threading.RLock()
fresh_in_forked_child(globals(), "PROCESS_LOCK", threading.RLock)
#: ``[depth, state]``: how many blocks that keep the caller's global RNGs are open, and
#: the state the outermost one saved
_kept: list = [0, None]
fresh_in_forked_child(globals(), "_kept", lambda: [0, None])


@contextlib.contextmanager
def kept_global_rngs() -> Iterator[None]:
    """Context manager (a run): the global RNGs are as they were on entry after the
    block; blocks inside it leave them as their tasks left them. Of nested and
    concurrent blocks, the first to open saves, the last to close restores."""
    with PROCESS_LOCK:
        if _kept[0] == 0:
            _kept[1] = (random.getstate(), np.random.get_state(), torch.get_rng_state())
        _kept[0] += 1
    try:
        yield
    finally:
        with PROCESS_LOCK:
            _kept[0] -= 1
            if _kept[0] == 0:
                (python_state, numpy_state, torch_state), _kept[1] = _kept[1], None
                random.setstate(python_state)
                np.random.set_state(numpy_state)
                torch.set_rng_state(torch_state)


@contextlib.contextmanager
def preserved_global_rngs() -> Iterator[None]:
    """Context manager around a batch of tasks in the caller's process: the global RNGs
    are as they were on entry after the block (inside a :func:`kept_global_rngs` block:
    after that one), and no other thread's block runs meanwhile."""
    with PROCESS_LOCK, kept_global_rngs():
        yield


@contextlib.contextmanager
def single_torch_thread() -> Iterator[None]:
    """Context manager: torch uses one intra-op thread inside the block, as every scoring
    task does (in a worker or here), so reductions sum in the same order whatever the path.
    The count is process-wide: the block holds ``PROCESS_LOCK`` against other threads' runs."""
    with PROCESS_LOCK:
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            yield
        finally:
            torch.set_num_threads(threads)


@contextlib.contextmanager
def in_process_tasks() -> Iterator[None]:
    """Context manager around tasks scored or built in the caller's process as a worker
    would: :func:`preserved_global_rngs` and :func:`single_torch_thread`."""
    with preserved_global_rngs(), single_torch_thread():
        yield


#: ``random``'s module-level functions: the bound methods of its one shared Random
_RANDOM_FUNCTIONS = tuple(name for name, f in vars(random).items()
                          if isinstance(getattr(f, "__self__", None), random.Random))


class own_python_random:
    """Context manager: in this thread, ``random``'s module-level functions draw from a
    ``random.Random`` of the block's own (a Dask worker's event loop, in another thread,
    draws from ``random`` while a task runs); ``random.seed`` seeds both.

    >>> import random, threading
    >>> with own_python_random():
    ...     random.seed(1)
    ...     t = threading.Thread(target=random.random); t.start(); t.join()  # the loop
    ...     a = random.random()
    >>> random.seed(1); a == random.random()
    True
    """

    def __enter__(self) -> "own_python_random":
        own = random.Random()
        with _ROUTE_LOCK:
            if not _ROUTES:
                _SHARED.update((name, getattr(random, name)) for name in _RANDOM_FUNCTIONS)
                for name in _RANDOM_FUNCTIONS:
                    setattr(random, name, _routed(name))
            own.setstate(_SHARED["getstate"]())
            _ROUTES[threading.get_ident()] = own
        return self

    def __exit__(self, *exc_info: object) -> None:
        with _ROUTE_LOCK:
            _ROUTES.pop(threading.get_ident(), None)
            if not _ROUTES:
                for name, function in _SHARED.items():
                    setattr(random, name, function)
                _SHARED.clear()


#: thread id -> its own Random while an own_python_random block is open in it
_ROUTES: dict[int, random.Random] = {}
#: random's own module-level functions while routed
_SHARED: dict[str, Any] = {}
_ROUTE_LOCK = threading.Lock()


def _routed(name: str) -> Any:
    """``random.NAME`` that draws from the calling thread's own Random, if it has one."""
    shared = getattr(random, name)
    if name == "seed":
        def seed(*args: Any, **kwargs: Any) -> None:
            own = _ROUTES.get(threading.get_ident())
            if own is not None:
                own.seed(*args, **kwargs)
            shared(*args, **kwargs)
        return seed

    def draw(*args: Any, **kwargs: Any) -> Any:
        own = _ROUTES.get(threading.get_ident())
        return (shared if own is None else getattr(own, name))(*args, **kwargs)
    draw.__name__ = name
    return draw
