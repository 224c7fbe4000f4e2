"""numpy's ``SeedSequence`` for many sequences at once, bit for bit (tested equal): the
words they share (the run seed, the generation) are hashed once, the rest per sequence
(numpy/random/bit_generator.pyx has the algorithm)."""
from __future__ import annotations

import functools
from typing import Any, Iterable, Sequence

import numpy as np

#: the generation of the end's selection test's tasks (:mod:`es_search.selection`), which
#: no search reaches
SELECTION_GENERATION = 2 ** 32 - 1

MASK32 = 0xFFFF_FFFF

# numpy.random.SeedSequence's hash constants (numpy/random/bit_generator.pyx)
_INIT_A, _MULT_A, _INIT_B, _MULT_B = 0x43B0D7E5, 0x931E8875, 0x8B51F9DD, 0x58F38DED
_MIX_L, _MIX_R = 0xCA01F9DD, 0x4973F715


def seed_words(n: int) -> list[int]:
    """``n`` as SeedSequence reads an int: 32-bit words, least significant first."""
    if n < 0:
        raise ValueError(f"a seed or spawn key must be a non-negative integer, not {n}")
    words = [n & MASK32]
    while n > MASK32:
        n >>= 32
        words.append(n & MASK32)
    return words


def _hash(value: Any, const: Any, mult: Any) -> Any:
    """SeedSequence's hashmix step, on Python ints or uint32 arrays (wrapping)."""
    value = ((value ^ const) * mult) & MASK32
    return value ^ (value >> 16)


def _mix(x: Any, y: Any) -> Any:
    """SeedSequence's mix of two words, Python ints or uint32 arrays."""
    result = (_MIX_L * x - _MIX_R * y) & MASK32
    return result ^ (result >> 16)


@functools.lru_cache(maxsize=None)
def _chain(init: int, mult: int, count: int) -> tuple:
    """The first ``count`` (before, after) pairs of a hashmix constant chain."""
    pairs, const = [], init
    for _ in range(count):
        pairs.append((const, (const * mult) & MASK32))
        const = pairs[-1][1]
    return tuple(pairs)


def _a_pairs(start: int, count: int) -> tuple:
    """The entropy-mixing constants from the ``start``-th hashmix on."""
    return _chain(_INIT_A, _MULT_A, start + count)[start:]


def _columns(pairs: Sequence) -> tuple[np.ndarray, np.ndarray]:
    """(before, after) of ``pairs`` as uint32 columns, one row per pair."""
    array = np.array(pairs, dtype=np.uint32)
    return array[:, :1], array[:, 1:]


def _as_rows(words: list, n: int) -> np.ndarray:
    """A uint32 row of ``n`` per word (an int, or an array of ``n``)."""
    return np.stack([np.broadcast_to(np.asarray(w, dtype=np.uint32), (n,)) for w in words])


def spawned(seed: int, key: Sequence[int], last: Iterable[int]) -> list[int]:
    """``[SeedSequence(seed, spawn_key=(*key, k)).generate_state(1, np.uint64)[0] for k
    in last]`` (tested equal).

    The words of ``seed`` and ``key`` are hashed once (:func:`_shared_pool`, cached);
    a ``k`` in [0, 2^32) is then one entropy word mixed into the pool, of which the
    output's two words read only the first two: ~0.8 us a seed (``SeedSequence``: ~7 us).
    """
    run = seed_words(seed)
    words = run + [0] * (4 - len(run)) + [w for k in key for w in seed_words(k)]
    (p0, p1, _, _), step = _shared_pool(tuple(words))
    (b0, a0), (b1, a1) = _a_pairs(step, 2)
    (c0, d0), (c1, d1) = _chain(_INIT_B, _MULT_B, 2)
    seeds = []
    for k in last:
        if not 0 <= k <= MASK32:  # two words or more: hashed whole
            pool = _shared_pool(tuple(words + seed_words(k)))[0]
            seeds.append(_hash(pool[0], c0, d0) | _hash(pool[1], c1, d1) << 32)
            continue
        h = ((k ^ b0) * a0) & MASK32
        x = (_MIX_L * p0 - _MIX_R * (h ^ (h >> 16))) & MASK32
        w0 = (((x ^ (x >> 16)) ^ c0) * d0) & MASK32
        h = ((k ^ b1) * a1) & MASK32
        x = (_MIX_L * p1 - _MIX_R * (h ^ (h >> 16))) & MASK32
        w1 = (((x ^ (x >> 16)) ^ c1) * d1) & MASK32
        seeds.append((w0 ^ (w0 >> 16)) | (w1 ^ (w1 >> 16)) << 32)
    return seeds


def seed_sequence_words(entropy: list, n_words: int) -> list:
    """``SeedSequence``'s ``generate_state(n_words)`` (uint32 words) for many sequences
    at once: ``entropy`` is the assembled entropy (``get_assembled_entropy()``: the run
    entropy padded to 4 words, then the spawn key's), each word a Python int every
    sequence shares or a uint32 array with one word per sequence. Shared words are
    hashed once, in Python; from the first word that varies on, the pool is a (4, n)
    array and independent hashmix steps run as one array operation each.
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
        pool, step = _first_pool(entropy[:4], len(entropy[shared]))
        rest = entropy[4:]
    for word in rest:
        pool = _mix(pool if not isinstance(pool, list) else _as_rows(pool, len(word)),
                    _hash(word, *_columns(_a_pairs(step, 4))))
        step += 4
    out = _chain(_INIT_B, _MULT_B, n_words)  # generate_state's constants
    if isinstance(pool, list):
        return [_hash(pool[k % 4], before, after) for k, (before, after) in enumerate(out)]
    return list(_hash(pool[[k % 4 for k in range(n_words)]], *_columns(out)))


@functools.lru_cache(maxsize=64)
def _shared_pool(words: tuple) -> tuple[tuple, int]:
    """The pool (Python ints) after ``words`` (4 or more, shared) and how many hashmix
    constants that used; a word after the 4th is mixed into the (cached) pool before it."""
    if len(words) > 4:
        pool, step = _shared_pool(words[:-1])
        return tuple(_mix(p, _hash(words[-1], before, after))
                     for p, (before, after) in zip(pool, _a_pairs(step, 4))), step + 4
    pool, step = _first_pool(list(words), 1)
    return tuple(int(p) for p in pool[:, 0]), step


def _first_pool(words: list, n: int) -> tuple[np.ndarray, int]:
    """The (4, n) pool after the first 4 entropy words (ints, or arrays of ``n``)."""
    pool = _hash(_as_rows(words, n), *_columns(_a_pairs(0, 4)))
    step = 4
    for src in range(4):
        others = [d for d in range(4) if d != src]
        pool[others] = _mix(pool[others], _hash(pool[src], *_columns(_a_pairs(step, 3))))
        step += 3
    return pool, step


def as_uint64(words: list) -> np.ndarray:
    """uint32 words (arrays of one word per sequence), in pairs, as
    ``generate_state(..., np.uint64)`` views them: ``(sequences, len(words) // 2)``."""
    state = np.stack([np.asarray(w, dtype=np.uint32) for w in words], axis=-1)
    return np.ascontiguousarray(state).view(np.uint64)
