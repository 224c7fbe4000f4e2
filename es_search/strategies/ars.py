"""ARS: Augmented Random Search (Mania, Guy & Recht 2018), version V2-t."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..candidates import Candidate
from ..checks import check, check_int, check_positive_float
from .antithetic import Antithetic, antithetic_pairs, even_population, noise_sum
from .base import Rebuild, worst_finite


@dataclass(frozen=True)
class ARSState:
    center: np.ndarray  # M_j, the policy parameters (flat)
    sigma: float  # nu, the (fixed) exploration noise
    seed: int  # the run's seed: direction k of generation j is noise(seed, j, k, n)


class ARS(Antithetic):
    """ARS V2-t: antithetic directions, the top ``b`` of them, a step scaled by sigma_R.

    Augmented Random Search (Mania, Guy & Recht 2018, "Simple random search of static
    linear policies is competitive for reinforcement learning", Algorithm 2, V2-t).
    Each generation ``j`` asks for the ``2N`` policies ``M_j +- nu * delta_k`` of
    ``N = directions`` standard normal directions (only seeds travel), then::

        order the directions by max(r_k+, r_k-), keep the top b      # line 6
        sigma_R = std of the 2b returns kept
        M_{j+1} = M_j + alpha / (b * sigma_R) * sum_k (r_k+ - r_k-) delta_k   # line 7

    V2's observation normalisation (line 8) belongs to the agent (the gym policies'
    ``normalize="running"``). Non-finite returns count as the generation's worst finite
    one; no finite return, or ``sigma_R = 0``, leaves ``M`` where it is. ``nu`` is fixed.

    Arguments (Mania et al.'s names in brackets): ``population``, ``2 * directions``
    (even); ``sigma`` [nu], default 0.03; ``directions`` [N], default ``population / 2``
    (8 when neither is given; both given must agree); ``top`` [b], the directions used
    in the update, ``1 <= b <= N``, default N (no selection: V2); ``step_size``
    [alpha], default 0.02. The paper's V2-t settings: Hopper N=8, b=4, alpha=0.01,
    nu=0.025; HalfCheetah N=32, b=4, alpha=0.02, nu=0.03.

    Example::

        >>> import numpy as np
        >>> from es_search.strategies import ARS
        >>> strategy = ARS(directions=2, top=1, step_size=0.1, sigma=0.1)
        >>> state = strategy.init(np.zeros(3), 0.0, seed=0)
        >>> [(c.sign, c.key) for c in strategy.ask(state, generation=0)]
        [(1.0, 0), (-1.0, 0), (1.0, 1), (-1.0, 1)]
        >>> state = strategy.tell(state, 0, strategy.ask(state, 0), [1.0, 0.0, 0.2, 0.3],
        ...                       rebuild=None)
        >>> bool(np.abs(state.center).max() > 0)
        True
    """

    name = "ars"

    def __init__(self, population: int | None = None, sigma: float = 0.03,
                 directions: int | None = None, top: int | None = None,
                 step_size: float = 0.02):
        if population is not None:
            population = even_population(self.name, population)
        if directions is None:
            directions = 8 if population is None else population // 2
        directions = check_int("directions", directions, 1)
        check("population", population, population in (None, 2 * directions),
              f"2 * directions ({2 * directions})",
              f"pass {{population={2 * directions}}} or leave directions out")
        self.directions, self.population = directions, 2 * directions
        self.top = directions if top is None else check_int("top", top, 1)
        check("top", self.top, self.top <= directions, f"<= directions ({directions})",
              "use a smaller top or more directions")
        self.initial_sigma = check_positive_float("sigma", sigma)
        self.step_size = check_positive_float("step_size", step_size)

    def init(self, center: np.ndarray, center_score: float, seed: int) -> ARSState:
        # Algorithm 2, line 2: M_0 is the starting policy (the paper's 0; here the agent's)
        return ARSState(np.array(center, dtype=np.float64), self.initial_sigma, int(seed))

    def _tell(self, state: ARSState, generation: int, candidates: Sequence[Candidate],
              scores: list[float], rebuild: Rebuild) -> ARSState:
        # lines 4-5 (ask): directions delta_k (seeds); policies M_j +- nu delta_k
        values = worst_finite(scores)
        if values is None:
            return state
        keys, plus, minus = antithetic_pairs(self.name, candidates, values)
        if not keys:
            return state
        r_plus = np.array([plus[k] for k in keys])
        r_minus = np.array([minus[k] for k in keys])
        # line 6: sort the directions by max(r+, r-) (ties: the earlier key first)
        order = np.argsort(-np.maximum(r_plus, r_minus), kind="stable")
        kept = order[:min(self.top, len(keys))]
        # line 7: sigma_R, the standard deviation of the 2b returns used in the update
        sigma_r = float(np.std(np.concatenate([r_plus[kept], r_minus[kept]])))
        if not sigma_r > 0.0 or not math.isfinite(sigma_r):
            return state
        weights = {keys[i]: r_plus[i] - r_minus[i] for i in kept}
        # sum_k (r_k+ - r_k-) delta_k
        step = noise_sum(state.seed, generation, weights, state.center.size)
        center = state.center + self.step_size / (len(kept) * sigma_r) * step
        return ARSState(center, state.sigma, state.seed)
