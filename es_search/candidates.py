"""How a candidate is described (small enough to travel as a seed) and built.

A strategy describes each candidate relative to the generation's centre vector; the
worker that scores it builds it from that description and the task's seed. Only the
``"vector"`` and ``"weights"`` kinds carry weights over the wire.
"""
from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from .seeding import stream_seed

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
      with ``scale`` an array of per-value standard deviations (``sigma`` is then not
      used; one array shared by a generation's candidates pickles once per chunk);
    - ``Candidate("vector", vector=v)``: an explicit flat vector;
    - ``Candidate("weights", vector=d)``: the centre with a dict of weights loaded over it.
    """

    kind: str
    sigma: float = 0.0
    sign: float = 1.0
    key: int = 0
    vector: Any = None


def noise(seed: int, generation: int, key: int, size: int) -> np.ndarray:
    """The standard normal vector of a ``"noise"`` candidate (float64, read-only).

    The last vector drawn is kept: the two members of an antithetic pair share their
    key and usually run one after the other, so the second one costs nothing.
    """
    ident = (seed, generation, key, size)
    if _LAST_NOISE[0] != ident:
        rng = np.random.default_rng(stream_seed(seed, 1, generation, key))
        eps = rng.standard_normal(size)
        eps.flags.writeable = False
        _LAST_NOISE[:] = [ident, eps]
    return _LAST_NOISE[1]


#: (seed, generation, key, size) and the noise vector last drawn in this process
_LAST_NOISE: list = [None, None]


def build(agent: Any, center: np.ndarray, candidate: Candidate, seed: int,
          generation: int) -> None:
    """Load ``candidate`` into ``agent``. The task's global RNGs must already be seeded."""
    kind = candidate.kind
    if kind == "vector":
        agent.set_flat(candidate.vector)
        return
    if kind == "noise":  # one set_flat: the centre is never loaded on its own
        eps = noise(seed, generation, candidate.key, center.size)
        if candidate.vector is None:
            agent.set_flat(center + (candidate.sign * candidate.sigma) * eps)
        else:
            agent.set_flat(center + candidate.sign * (candidate.vector * eps))
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
