"""The runner that lives in each Dask or Ray worker process (an actor) and runs chunks
there, and the payloads it keeps. A :class:`Parcel` is sent to a runner once, as its
value (float64 arrays exact in float32 travel as float32: :func:`encode`) or, when the
runner holds what it derives from, as a recipe ``fn(*args)`` that the runner checks
against the value's CRC-32 (a mismatch asks for the value).
"""
from __future__ import annotations

import itertools
import os
import zlib
from typing import Any, Callable, NamedTuple, Sequence

import numpy as np

from ..seeding import own_python_random

_IDS = itertools.count(1)


class Ref(NamedTuple):
    """A payload in a runner's store, by id (a few bytes on the wire)."""

    id: int


class Mismatch(NamedTuple):
    """A runner's answer when a recipe did not give the expected bytes, or when it
    lacks a payload (sent with a call not arrived yet): the pool sends the value."""

    id: int


class Parcel:
    """A value sent to each runner at most once. ``recipe``: ``(fn, args)`` such that
    ``fn(*args)`` (``args`` may name other payloads) equals the value, bit for bit."""

    def __init__(self, value: Any, recipe: tuple[Callable, tuple] | None = None):
        self.id = next(_IDS)
        self.value = value
        self.recipe = recipe
        self.crc = crc(value) if recipe is not None else None
        self.values_sent = 0  # copies sent whole
        self.recipes_sent = 0  # copies derived by a runner


def crc(value: Any) -> int:
    if isinstance(value, np.ndarray):
        return zlib.crc32(np.ascontiguousarray(value).view(np.uint8))
    return zlib.crc32(value if isinstance(value, (bytes, bytearray)) else repr(value).encode())


def encode(value: Any) -> Any:
    """``value``, smaller on the wire when that is exact (float64 -> float32)."""
    if isinstance(value, np.ndarray) and value.dtype == np.float64 and value.size >= 1024:
        small = value.astype(np.float32)
        if np.array_equal(small.astype(np.float64), value, equal_nan=True):
            return ("f32", small)
    return ("raw", value)


def decode(data: Any) -> Any:
    kind, value = data
    if kind == "ray":  # (kind, value) in Ray's object store (ray_pool)
        import ray
        kind, value = ray.get(value)
    return value.astype(np.float64) if kind == "f32" else value


class Runner:
    """Lives in one worker process; holds payloads and runs chunks one at a time."""

    def __init__(self) -> None:
        self.store: dict[int, Any] = {}

    def pid(self) -> int:
        return os.getpid()

    def _resolve(self, args: Sequence[Any]) -> list | Mismatch:
        missing = [a.id for a in args if isinstance(a, Ref) and a.id not in self.store]
        if missing:
            return Mismatch(missing[0])
        return [self.store[a.id] if isinstance(a, Ref) else a for a in args]

    def run(self, fn: Callable, args: Sequence[Any], sends: Sequence[tuple],
            forget: Sequence[int] = ()) -> Any:
        """``(True, fn(*args))``, ``(False, exception)`` if it raised, or a :class:`Mismatch`."""
        try:
            for key, kind, *data in sends:
                if kind == "value":
                    self.store[key] = decode(data[0])
                    continue
                recipe_fn, recipe_args, expected = data
                resolved = self._resolve(recipe_args)
                if isinstance(resolved, Mismatch):
                    return resolved
                value = recipe_fn(*resolved)
                if crc(value) != expected:
                    return Mismatch(key)
                self.store[key] = value
            resolved = self._resolve(args)
            if isinstance(resolved, Mismatch):
                return resolved
            try:
                with own_python_random():  # the worker's event loop draws from it too
                    return True, fn(*resolved)
            except Exception as exc:  # noqa: BLE001 - re-raised by the pool, in order
                return False, exc
        finally:  # after the sends: a recipe may derive from what is forgotten
            for key in forget:
                self.store.pop(key, None)


class Tracker:
    """The pool's side: which payloads each runner holds, and what to send it."""

    def __init__(self) -> None:
        self.held: dict[Any, set[int]] = {}  # runner key -> parcel ids
        self.named: dict[str, Parcel] = {}
        self.dropped: set[int] = set()

    def put(self, name: str, value: Any, recipe: tuple | None = None) -> Parcel:
        """A new parcel under ``name``; the runners forget the last one at their next call."""
        previous = self.named.get(name)
        parcel = self.named[name] = Parcel(value, recipe)
        if previous is not None:
            self.dropped.add(previous.id)
        return parcel

    def message(self, runner: Any, args: Sequence[Any],
                whole: frozenset[int] = frozenset()) -> tuple[list, list, list]:
        """``(args, sends, forget)`` for a call to ``runner``; ``whole``: payload ids
        to send as values even if a recipe would do (after a mismatch)."""
        held = self.held.setdefault(runner, set())
        sends: list[tuple] = []
        out = []
        for p in args:
            if isinstance(p, Parcel) and p.id not in held:
                if p.recipe is not None and p.id not in whole and all(
                        d.id in held for d in p.recipe[1] if isinstance(d, Parcel)):
                    fn, rargs = p.recipe
                    sends.append((p.id, "recipe", fn,
                                  tuple(Ref(a.id) if isinstance(a, Parcel) else a
                                        for a in rargs), p.crc))
                    p.recipes_sent += 1
                else:
                    sends.append((p.id, "value", encode(p.value)))
                    p.values_sent += 1
                held.add(p.id)
            out.append(Ref(p.id) if isinstance(p, Parcel) else p)
        forget = sorted(held & self.dropped)
        held.difference_update(forget)
        return out, sends, forget

    def forget_sent(self, runner: Any, ids: Sequence[int]) -> None:
        """The runner could not hold these (its call failed)."""
        self.held.get(runner, set()).difference_update(ids)
