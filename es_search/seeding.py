"""Task seeds: one independent stream per (run seed, generation, candidate).

Every scoring task gets its own seed, derived with :class:`numpy.random.SeedSequence`
from the run's seed, the generation and the candidate's index -- never from the worker
that happens to run it or from completion order. That is what makes a run give the
same result on 1 core, 16 cores or a cluster.

Generation ``-1`` is the evaluation of the starting agent, before generation 0;
generation ``2**32 - 1``, which no run reaches, is the end's selection test
(:mod:`es_search.selection`).

:func:`task_seeds`, :func:`stream_seeds` and :func:`generators` compute many seeds or
generators at once (:mod:`es_search.seed_sequences`), bit for bit what ``SeedSequence``
gives one at a time (a chunk's task seeds, a group's streams, a generation's noise).
"""
from __future__ import annotations

import os
import random
import threading
from typing import Any, Sequence

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
    return _spawned(seed, (generation + 1, index))


def _spawned(seed: int, key: Sequence[int]) -> int:
    """The 64-bit seed of ``SeedSequence(seed, spawn_key=key)``."""
    if seed >= 0 and min(key) >= 0 and key[-1] <= MASK32:
        return spawned(seed, key[:-1], key[-1:])[0]
    return int(np.random.SeedSequence(seed, spawn_key=tuple(key)).generate_state(
        1, np.uint64)[0])


def build_seeded(seed: int, factory: Any, *args: Any, **kwargs: Any) -> Any:
    """``factory(*args, **kwargs)`` under global RNGs seeded from the run's ``seed`` (a
    stream apart from every task's: a one-element spawn key; tasks have two), the
    caller's RNG state restored after: an agent's random initial weights from the run's
    seed, so that the same command gives the same run (the command line and the control
    benchmark build their agents so).

    >>> build_seeded(0, random.random) == build_seeded(0, random.random) != random.random()
    True
    """
    with preserved_global_rngs():
        seed_global_rngs(_spawned(seed, (0,)))
        return factory(*args, **kwargs)


def task_seeds(seed: int, generation: int, start: int, stop: int) -> list[int]:
    """``[task_seed(seed, generation, i) for i in range(start, stop)]``, the words the
    tasks share hashed once (:func:`~es_search.seed_sequences.spawned`; tested equal)."""
    if min(seed, generation + 1, start) < 0 or stop - 1 > MASK32:
        return [task_seed(seed, generation, i) for i in range(start, stop)]
    return spawned(seed, (generation + 1,), range(start, stop))


def stream_seed(seed: int, *key: int) -> int:
    """A 64-bit seed for a strategy's own draws (``key`` names the purpose)."""
    return _spawned(seed, (0, *key))


def stream_seeds(seed: int, key: Sequence[int], last: Sequence[int]) -> list[int]:
    """``[stream_seed(seed, *key, k) for k in last]``, the words they share hashed once
    (tested equal)."""
    last, key = [int(k) for k in last], [int(k) for k in key]
    if min([seed, *key, *last], default=0) < 0 or max(last, default=0) > MASK32:
        return [stream_seed(seed, *key, k) for k in last]
    return spawned(seed, (0, *key), last)


def generators(seeds: Sequence[int], key: Sequence[int] = ()) -> list[np.random.Generator]:
    """``[Generator(PCG64(SeedSequence(s, spawn_key=key))) for s in seeds]`` (with an
    empty ``key``: ``[default_rng(s) for s in seeds]``), their states computed at once
    for 4 seeds or more in [0, 2^64) (tested equal; ~7 us a ``SeedSequence`` otherwise).
    """
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
    (what PCG64 asks for) was computed beforehand; anything else goes to the real one."""

    def __init__(self, state: np.ndarray, seed: int, key: tuple):
        self._state, self._seed, self._key = state, seed, key
        self._real: Any = None

    def real(self) -> np.random.SeedSequence:
        if self._real is None:
            self._real = np.random.SeedSequence(self._seed, spawn_key=self._key)
        return self._real

    def generate_state(self, n_words: int, dtype: Any = np.uint32) -> np.ndarray:
        if n_words == len(self._state) and np.dtype(dtype) == np.uint64:
            return self._state.copy()
        return self.real().generate_state(n_words, dtype)

    def spawn(self, n_children: int) -> list:
        return self.real().spawn(n_children)


def seed_global_rngs(seed: int) -> None:
    """Seed Python's ``random``, NumPy's global RNG and torch's CPU generator.

    ``torch.default_generator.manual_seed`` is used rather than ``torch.manual_seed``:
    the latter also queues a lazy CUDA seed and costs ~100x more per call.
    """
    random.seed(seed)
    np.random.seed(seed & MASK32)
    torch.default_generator.manual_seed(seed)


#: held by every :class:`ProcessStateBlock` (the global RNGs and torch's thread count
#: belong to the process, so two runs in two threads, each n_jobs=1, take turns, a batch
#: at a time, instead of reseeding each other's tasks; re-entrant: a score() may start a
#: run); a fresh one in a forked child (:func:`fresh_in_forked_child`)
_process_state_lock = threading.RLock()


def fresh_in_forked_child(namespace: dict, name: str, make: Any) -> None:
    """Give a forked child ``make()`` as ``namespace[name]`` (a module's lock: a pool
    may fork a worker from one of its threads while another thread holds the lock;
    the child must not inherit a lock that no thread of it will release). POSIX only;
    readers look the name up at each use."""
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=lambda: namespace.__setitem__(name, make()))


fresh_in_forked_child(globals(), "_process_state_lock", threading.RLock)


class ProcessStateBlock:
    """Context manager base: a subclass's ``_save()`` on entry and ``_restore()`` on
    exit of some of the process's own state, with ``_process_state_lock`` held in
    between."""

    def __enter__(self) -> "ProcessStateBlock":
        self._lock = _process_state_lock
        self._lock.acquire()
        try:
            self._save()
        except BaseException:
            self._lock.release()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        try:
            self._restore()
        finally:
            self._lock.release()


#: ``[depth, state]``: how many blocks that keep the caller's global RNGs are open in
#: the process, and the state the outermost one saved; fresh in a forked child
_kept: list = [0, None]
fresh_in_forked_child(globals(), "_kept", lambda: [0, None])


def _keep() -> None:
    """Open a block that keeps the caller's global RNGs (``_process_state_lock`` held):
    the outermost saves them."""
    kept = _kept
    if kept[0] == 0:
        kept[1] = (random.getstate(), np.random.get_state(), torch.get_rng_state())
    kept[0] += 1


def _give_back() -> None:
    """Close such a block (``_process_state_lock`` held): the outermost restores them."""
    kept = _kept
    kept[0] -= 1
    if kept[0] == 0:
        (python_state, numpy_state, torch_state), kept[1] = kept[1], None
        random.setstate(python_state)
        np.random.set_state(numpy_state)
        torch.set_rng_state(torch_state)


class preserved_global_rngs(ProcessStateBlock):
    """Context manager: the global RNGs are as they were on entry after the block, and
    no other thread's block runs meanwhile.

    Used around every batch of tasks in the caller's process, so the caller's own random
    state is untouched, also by a plain in-process loop (``n_jobs=1``), and runs in
    several threads of one process give the results they give one after the other.
    Inside a :class:`kept_global_rngs` block (a run) the save and restore are that
    block's, once (NumPy's state alone costs ~60 us to save and restore).
    """

    def _save(self) -> None:
        _keep()

    def _restore(self) -> None:
        _give_back()


class kept_global_rngs:
    """Context manager: the global RNGs are as they were on entry after the block; the
    :class:`preserved_global_rngs` blocks inside it, in any thread, leave them as their
    tasks left them. ``run()`` keeps them so for its whole length: between generations
    they hold what the last task left (tasks seed them anyway), and the caller gets its
    own state back at the end. Nested and concurrent blocks count: the first to open
    saves, the last to close restores. Other threads' blocks do not wait meanwhile."""

    def __enter__(self) -> "kept_global_rngs":
        with _process_state_lock:
            _keep()
        return self

    def __exit__(self, *exc_info: object) -> None:
        with _process_state_lock:
            _give_back()


#: ``random``'s module-level functions: the bound methods of its one shared Random
_RANDOM_FUNCTIONS = tuple(name for name, f in vars(random).items()
                          if isinstance(getattr(f, "__self__", None), random.Random))


class own_python_random:
    """Context manager: in this thread, ``random``'s module-level functions draw from
    a ``random.Random`` of the block's own; other threads keep drawing from the shared
    one. A Dask worker runs a long call in a thread beside its event loop, which draws
    from ``random`` meanwhile (tornado's jittered heartbeats, distributed's backoffs):
    without this, the task's seeded ``random.random()`` draws would depend on what the
    loop did. ``random.seed`` in the block seeds both (``from random import random``
    holds the shared one's method). Blocks in several threads at once each get their
    own; the module's functions are put back when the last one ends.

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
            own.setstate(_SHARED["getstate"]())  # as the shared one stood
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
