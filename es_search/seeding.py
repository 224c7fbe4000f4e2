"""Task seeds: one independent stream per (run seed, generation, candidate).

Every scoring task gets its own seed, derived with :class:`numpy.random.SeedSequence`
from the run's seed, the generation and the candidate's index -- never from the worker
that happens to run it or from completion order. That is what makes a run give the
same result on 1 core, 16 cores or a cluster.

Generation ``-1`` is the evaluation of the starting agent, before generation 0;
generation ``2**32 - 1``, which no run reaches, is the end's selection test
(:mod:`es_search.selection`).

:func:`task_seeds`, :func:`stream_seeds` and :func:`generators` compute many seeds or
generators at once (:func:`seed_sequence_words`), bit for bit what ``SeedSequence``
gives one at a time (a chunk's task seeds, a group's streams, a generation's noise).
"""
from __future__ import annotations

import functools
import os
import random
import threading

from typing import Any, Sequence

import numpy as np
import torch

from .checks import check_int

_MASK32 = 0xFFFF_FFFF


def task_seed(seed: int, generation: int, index: int) -> int:
    """The 64-bit seed of candidate ``index`` of ``generation`` in a run seeded ``seed``.

    >>> task_seed(0, 0, 0) == task_seed(0, 0, 0)
    True
    >>> len({task_seed(0, g, i) for g in range(3) for i in range(3)})
    9
    """
    if not (type(seed) is type(generation) is type(index) is int
            and seed >= 0 and generation >= -1 and index >= 0):
        seed, generation, index = _task(seed, generation, index)
    sequence = np.random.SeedSequence(seed, spawn_key=(generation + 1, index))
    return int(sequence.generate_state(1, np.uint64)[0])


def _task(seed: Any, generation: Any, index: Any) -> tuple[int, int, int]:
    """``task_seed``'s arguments as ints, or an error naming the one that is wrong."""
    values = []
    for name, value, low, note in (
            ("seed", seed, 0, "the run's seed"),
            ("generation", generation, -1, "-1 is the starting agent's evaluation"),
            ("index", index, 0, "the candidate's index in its generation")):
        values.append(check_int(name, value, low, f" ({note})"))
    return values[0], values[1], values[2]


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


@functools.lru_cache(maxsize=None)
def _chain(init: int, mult: int, count: int) -> tuple:
    """The first ``count`` (before, after) pairs of a hashmix constant chain."""
    pairs, const = [], init
    for _ in range(count):
        pairs.append((const, (const * mult) & _MASK32))
        const = pairs[-1][1]
    return tuple(pairs)


def _a_pairs(start: int, count: int) -> tuple:
    """The entropy-mixing constants from the ``start``-th hashmix on."""
    return _chain(_INIT_A, _MULT_A, start + count)[start:]


def _columns(pairs: Sequence) -> tuple[np.ndarray, np.ndarray]:
    """(before, after) of ``pairs`` as uint32 columns, one row per pair."""
    array = np.array(pairs, dtype=np.uint32)
    return array[:, :1], array[:, 1:]


def _hash_rows(values, before: np.ndarray, after: np.ndarray) -> np.ndarray:
    """:func:`_hash` of ``values`` (rows, or one row or int broadcast) with one constant
    pair per row, in uint32."""
    value = (np.asarray(values, dtype=np.uint32) ^ before) * after
    return value ^ (value >> 16)


def _mix_rows(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    result = np.uint32(_MIX_L) * x - np.uint32(_MIX_R) * y  # uint32: wraps, silently
    return result ^ (result >> 16)


def _as_rows(words: list, n: int) -> np.ndarray:
    rows = np.empty((len(words), n), dtype=np.uint32)
    for i, word in enumerate(words):
        rows[i] = word
    return rows


def seed_sequence_words(entropy: list, n_words: int) -> list:
    """``SeedSequence``'s pool and ``generate_state(n_words)`` (uint32 words), for many
    sequences at once: ``entropy`` is the assembled entropy, one item per word, each a
    Python int shared by every sequence or a uint32 array with one word per sequence
    (as ``get_assembled_entropy()`` lays it out: the run entropy padded to 4 words,
    then the spawn key's). Words every sequence shares are hashed once, in Python; from
    the first word that varies on, the pool is a (4, n) array and the hashmix steps
    that do not depend on each other (one source word mixed into the three other pool
    words, one entropy word into all four, the output words) run as one array
    operation each.
    """
    entropy = list(entropy)
    entropy[:4] = entropy[:4] + [0] * (4 - len(entropy))  # absent words hash as 0 words
    shared = next((i for i, w in enumerate(entropy) if not isinstance(w, int)),
                  len(entropy))
    pool: Any
    if shared >= 4:  # the pool after the shared words: computed once per prefix
        prefix, step = _shared_pool(tuple(entropy[:shared]))
        pool, rest = list(prefix), entropy[shared:]
    else:
        pool, step = _mixed_pool(entropy[:4], len(entropy[shared]))
        rest = entropy[4:]
    for word in rest:
        pool = _mix_rows(pool if not isinstance(pool, list) else _as_rows(pool, len(word)),
                         _hash_rows(word, *_columns(_a_pairs(step, 4))))
        step += 4
    out = _chain(_INIT_B, _MULT_B, n_words)  # generate_state's constants
    if isinstance(pool, list):
        return [_hash(pool[k % 4], before, after) for k, (before, after) in enumerate(out)]
    return list(_hash_rows(pool[[k % 4 for k in range(n_words)]], *_columns(out)))


@functools.lru_cache(maxsize=64)
def _shared_pool(words: tuple) -> tuple[tuple, int]:
    """The pool (Python ints) after ``words`` (4 or more, every sequence's) and how many
    hashmix constants that used: a run's seed and generation, hashed once."""
    pool = [_hash(w, before, after) for w, (before, after) in zip(words, _a_pairs(0, 4))]
    step = 4
    for src in range(4):
        others = [d for d in range(4) if d != src]
        for d, (before, after) in zip(others, _a_pairs(step, 3)):
            pool[d] = _mix(pool[d], _hash(pool[src], before, after))
        step += 3
    for word in words[4:]:
        for d, (before, after) in enumerate(_a_pairs(step, 4)):
            pool[d] = _mix(pool[d], _hash(word, before, after))
        step += 4
    return tuple(pool), step


def _mixed_pool(words: list, n: int) -> tuple[np.ndarray, int]:
    """The (4, n) pool after the first 4 entropy words, some of which vary."""
    pool = _hash_rows(_as_rows(words, n), *_columns(_a_pairs(0, 4)))
    step = 4
    for src in range(4):
        others = [d for d in range(4) if d != src]
        pool[others] = _mix_rows(pool[others],
                                 _hash_rows(pool[src], *_columns(_a_pairs(step, 3))))
        step += 3
    return pool, step


def task_seeds(seed: int, generation: int, start: int, stop: int) -> list[int]:
    """``[task_seed(seed, generation, i) for i in range(start, stop)]``, at once from 4
    tasks on (:func:`seed_sequence_words`, ~20 us; tested equal; ``task_seed`` costs
    ~9 us each)."""
    if stop <= start:
        return []
    if stop - start < 4 or min(seed, generation + 1, start) < 0 or stop - 1 > _MASK32:
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


def stream_seeds(seed: int, key: Sequence[int], last: Sequence[int]) -> list[int]:
    """``[stream_seed(seed, *key, k) for k in last]``, at once (tested equal)."""
    last, key = [int(k) for k in last], [int(k) for k in key]
    if len(last) < 4 or min([seed, *key, *last]) < 0 or max(last) > _MASK32:
        return [stream_seed(seed, *key, k) for k in last]
    run = seed_words(seed)
    spawn = [word for k in (0, *key) for word in seed_words(k)]
    entropy = run + [0] * (4 - len(run)) + spawn + [np.array(last, dtype=np.uint32)]
    return as_uint64(seed_sequence_words(entropy, 2))[:, 0].tolist()


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
    low = (array & np.uint64(_MASK32)).astype(np.uint32)
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
    np.random.seed(seed & _MASK32)
    torch.default_generator.manual_seed(seed)


#: held by every :class:`preserved_global_rngs` block (and ``worker.single_torch_thread``):
#: the global RNGs and torch's thread count belong to the process, so two runs in two
#: threads (each n_jobs=1) take turns, a batch at a time, instead of reseeding each
#: other's tasks (re-entrant: a score() may start a run); read it with process_state_lock()
_process_state_lock = threading.RLock()


def process_state_lock() -> Any:
    """The process's lock around its global RNGs and torch's thread count (a fresh one
    in a forked child: a pool that forks a worker from one of its threads while another
    thread holds the lock must not hand the worker a lock no thread will release)."""
    return _process_state_lock


def fresh_in_forked_child(namespace: dict, name: str, make: Any) -> None:
    """Give a forked child ``make()`` as ``namespace[name]`` (a module's lock: a pool
    may fork a worker from one of its threads while another thread holds the lock;
    the child must not inherit a lock that no thread of it will release). POSIX only;
    readers look the name up at each use."""
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=lambda: namespace.__setitem__(name, make()))


fresh_in_forked_child(globals(), "_process_state_lock", threading.RLock)


class ProcessStateBlock:
    """Context manager base: ``_save()`` on entry and ``_restore()`` on exit of some of
    the process's own state, with :func:`process_state_lock` held in between."""

    def __enter__(self) -> "ProcessStateBlock":
        self._lock = process_state_lock()
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

    def _save(self) -> None:
        raise NotImplementedError

    def _restore(self) -> None:
        raise NotImplementedError


class preserved_global_rngs(ProcessStateBlock):
    """Context manager: the global RNGs are as they were on entry after the block, and
    no other thread's block runs meanwhile.

    Used around every batch of tasks, so the caller's own random state is untouched
    by a run, also when the run is a plain in-process loop (``n_jobs=1``), and runs in
    several threads of one process give the results they give one after the other.
    """

    def _save(self) -> None:
        self._state = (random.getstate(), np.random.get_state(), torch.get_rng_state())

    def _restore(self) -> None:
        python_state, numpy_state, torch_state = self._state
        random.setstate(python_state)
        np.random.set_state(numpy_state)
        torch.set_rng_state(torch_state)


#: what ``random``'s module-level functions are (bound methods of one shared Random)
_RANDOM_FUNCTIONS = tuple(name for name in (
    "random", "uniform", "triangular", "randint", "choice", "choices", "randrange",
    "sample", "shuffle", "normalvariate", "lognormvariate", "expovariate",
    "vonmisesvariate", "gammavariate", "gauss", "betavariate", "paretovariate",
    "weibullvariate", "getrandbits", "randbytes", "binomialvariate", "getstate",
    "setstate", "seed") if hasattr(random, name))


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
