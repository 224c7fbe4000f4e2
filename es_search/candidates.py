"""How a candidate is described, relative to the generation's centre, and built by the
worker that scores it, from that description and the task's seed."""
from __future__ import annotations

from typing import Any, Iterator, NamedTuple, Sequence

import numpy as np
import torch

from .agent import overrides
from .seeding import generators, stream_seed, stream_seeds

#: the kinds of candidate a strategy may ask for
KINDS = ("center", "jitter", "noise", "vector", "weights")


class Candidate(NamedTuple):
    """One candidate, relative to the generation's centre.

    - ``Candidate("center")``: the centre itself (e.g. to re-evaluate a parent);
    - ``Candidate("jitter", sigma)``: the centre, then ``agent.jitter_weights(sigma)``
      under the task's seed (the user's own jitter is honoured);
    - ``Candidate("noise", sigma, sign, key)``: centre + sign * sigma * eps, eps ~ N(0, I)
      drawn from ``(run seed, generation, key)``; antithetic pairs share ``key``;
      ``Candidate("noise", sigma, sign, key, vector=scale)``: centre + sign * scale * eps
      with ``scale`` an array of per-value standard deviations (``sigma`` unused);
    - ``Candidate("vector", vector=v)``: an explicit flat vector;
    - ``Candidate("weights", vector=d)``: the centre with a dict of weights loaded over it.
    """

    kind: str
    sigma: float = 0.0
    sign: float = 1.0
    key: int = 0
    vector: Any = None


class Shared(NamedTuple):
    """A candidate's ``vector`` as ``flat[start:stop].reshape(shape)`` (:func:`share_vectors`)."""

    start: int
    stop: int
    shape: tuple


#: floating-point vectors of at least this many bytes are shared (:func:`share_vectors`)
SHARE_FROM = 1 << 16


def share_vectors(candidates: Sequence[Candidate]
                  ) -> tuple[list[Candidate], np.ndarray | None]:
    """``candidates`` with each large floating-point ``vector`` (PGPE's scales, CMA-ES's
    points) replaced by its :class:`Shared` place in one flat float64 array, returned
    too (None: none), put in the pool once per generation instead of pickled with every
    chunk. A float16 or float32 vector comes back as float64: the same weights."""
    places: dict[int, Shared] = {}
    parts: list[np.ndarray] = []
    size, shared = 0, []
    for c in candidates:
        v = c.vector
        if isinstance(v, np.ndarray) and v.dtype.kind == "f" and v.itemsize <= 8 \
                and v.nbytes >= SHARE_FROM:
            place = places.get(id(v))
            if place is None:
                place = places[id(v)] = Shared(size, size + v.size, v.shape)
                parts.append(v.reshape(-1).astype(np.float64, copy=False))
                size += v.size
            c = c._replace(vector=place)
        shared.append(c)
    return shared, (np.concatenate(parts) if parts else None)


def take_vectors(candidates: Sequence[Candidate], flat: np.ndarray | None
                 ) -> Sequence[Candidate]:
    """The candidates :func:`share_vectors` described, their vectors views of ``flat``."""
    if flat is None:
        return candidates
    return [c._replace(vector=flat[c.vector.start:c.vector.stop].reshape(c.vector.shape))
            if isinstance(c.vector, Shared) else c for c in candidates]


def noise(seed: int, generation: int, key: int, size: int) -> np.ndarray:
    """The standard normal vector of a ``"noise"`` candidate (float64, read-only). The
    last one drawn is kept: an antithetic pair's second member usually follows."""
    ident = (seed, generation, key, size)
    if _LAST_NOISE[0] != ident:
        rng = np.random.default_rng(stream_seed(seed, 1, generation, key))
        eps = rng.standard_normal(size)
        eps.flags.writeable = False
        _LAST_NOISE[:] = [ident, eps]
    return _LAST_NOISE[1]


#: (seed, generation, key, size) and the noise vector last drawn in this process
_LAST_NOISE: list = [None, None]


def noise_streams(seed: int, generation: int, keys: Sequence[int]
                  ) -> dict[int, np.random.Generator]:
    """For each distinct key, a fresh generator whose one ``standard_normal(size)`` draw is
    ``noise(seed, generation, key, size)``, all seeded at once (~14 us a key otherwise)."""
    distinct = list(dict.fromkeys(int(k) for k in keys))
    return dict(zip(distinct, generators(stream_seeds(seed, (1, generation), distinct))))


def noise_vectors(seed: int, generation: int, keys: Sequence[int], size: int
                  ) -> Iterator[tuple[int, np.ndarray]]:
    """``(key, noise(seed, generation, key, size))`` for each distinct key, in order, one
    vector drawn at a time (what a strategy's ``tell`` sums over)."""
    for key, stream in noise_streams(seed, generation, keys).items():
        yield key, stream.standard_normal(size)


def build(agent: Any, center: np.ndarray, candidate: Candidate, seed: int,
          generation: int) -> None:
    """Load ``candidate`` into ``agent``. The task's global RNGs must already be seeded."""
    kind = candidate.kind
    if kind == "vector":
        agent.set_flat(candidate.vector)
        return
    if kind == "noise":  # one set_flat: the centre is never loaded on its own
        agent.set_flat(center + _step(candidate, noise(seed, generation, candidate.key,
                                                       center.size)))
        return
    agent.set_flat(center)
    if kind == "center":
        return
    if kind == "jitter":
        agent.jitter_weights(candidate.sigma)
    elif kind == "weights":
        agent.set_weights(candidate.vector)
    else:
        raise ValueError(f"unknown candidate kind {kind!r}; expected one of {KINDS}")


def _step(candidate: Candidate, eps: np.ndarray) -> np.ndarray:
    """A ``"noise"`` candidate's move from the centre, given its noise ``eps``."""
    if candidate.vector is None:
        return (candidate.sign * candidate.sigma) * eps
    return candidate.sign * (candidate.vector * eps)


def build_group(agent: Any, center: np.ndarray, candidates: Sequence[Candidate],
                seeds: Sequence[int], seed: int, generation: int
                ) -> dict[str, torch.Tensor] | None:
    """The evolved weights of ``candidates`` (task seeds ``seeds``), stacked along a new
    leading dimension, bit for bit what :func:`build` loads into ``agent`` for each (the
    same operations on tensors of the same shapes), or None where only :func:`build` can;
    ``agent`` is left holding the centre, the global RNGs untouched."""
    def default(name: str) -> bool:  # neither the class nor the instance overrides it
        return not overrides(agent, name) and name not in vars(agent)

    kinds = {c.kind for c in candidates}
    if (not kinds <= {"center", "jitter", "noise", "vector"} or not default("set_flat")
            or ("jitter" in kinds and not default("jitter_weights"))):
        return None
    evolved = agent.evolved_parameters()
    if "jitter" in kinds and not all(p.is_contiguous() for _, p in evolved):
        return None  # randn_like would draw in the parameter's own memory order
    n = len(candidates)
    agent.set_flat(center)  # the centre's parameters, cast as set_flat casts
    params = {name: p.detach().unsqueeze(0).repeat((n,) + (1,) * p.dim())
              for name, p in evolved}
    flat = [k for k, c in enumerate(candidates) if c.kind in ("noise", "vector")]
    if flat:
        rows = np.empty((len(flat), center.size))
        streams = noise_streams(seed, generation,
                                [candidates[k].key for k in flat if candidates[k].kind == "noise"])
        last: tuple = (None, None)  # an antithetic pair's key and its vector, drawn once
        for row, k in enumerate(flat):
            c = candidates[k]
            if c.kind == "vector":
                rows[row] = np.asarray(c.vector)
                continue
            if last[0] != c.key:
                stream = streams.pop(c.key, None)  # a key met again later: drawn anew
                last = (c.key, stream.standard_normal(center.size) if stream is not None
                        else noise(seed, generation, c.key, center.size))
            np.add(center, _step(c, last[1]), out=rows[row])
        index = torch.tensor(flat)
        sizes = [p.numel() for _, p in evolved]  # each parameter's columns of the rows
        for (name, p), part in zip(evolved, torch.from_numpy(rows).split(sizes, dim=1)):
            params[name][index] = part.reshape((len(flat),) + p.shape).to(p.dtype)
    if "jitter" in kinds:
        _jitter_rows(params, evolved, candidates, seeds)
    return params


def _jitter_rows(params: dict[str, torch.Tensor], evolved: list,
                 candidates: Sequence[Candidate], seeds: Sequence[int]) -> None:
    """Add ``Agent.jitter_weights``'s noise to the rows of the ``"jitter"`` candidates:
    each one's draws from a generator seeded as torch's global one (``randn_like(p)`` is
    ``empty_like(p).normal_()``), one parameter after the other. ``add_(eps, alpha=sigma)``
    runs once per row or, when the rows share ``sigma`` and torch runs on one thread,
    once on all rows laid out with a gap after each: rows that cannot merge into one
    dimension each run the same inner loop as a single row's tensor (tested bit for bit).
    """
    rows = [k for k, c in enumerate(candidates) if c.kind == "jitter"]
    eps = {name: torch.empty((len(rows),) + p.shape, dtype=p.dtype) for name, p in evolved}
    draws = [eps[name].unbind(0) for name, _ in evolved]
    generator = torch.Generator()
    for j, k in enumerate(rows):
        generator.manual_seed(seeds[k])
        for draw in draws:
            draw[j].normal_(generator=generator)
    sigmas = {candidates[k].sigma for k in rows}
    if len(sigmas) > 1 or torch.get_num_threads() != 1:
        for name, _ in evolved:
            for j, k in enumerate(rows):
                params[name][k].add_(eps[name][j], alpha=candidates[k].sigma)
        return
    index = torch.tensor(rows)
    for name, p in evolved:
        size = p.numel()
        gapped = torch.empty((len(rows), size + 1), dtype=p.dtype)[:, :size]
        gapped.copy_(params[name][index].reshape(len(rows), size))
        gapped.add_(eps[name].reshape(len(rows), size), alpha=candidates[rows[0]].sigma)
        params[name][index] = gapped.reshape((len(rows),) + p.shape)
