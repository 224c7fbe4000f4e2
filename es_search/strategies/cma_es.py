"""CMA-ES through pycma's ask/tell (optional extra ``cma``), seeded by es_search."""
from __future__ import annotations

import math
import pickle
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from ..candidates import Candidate
from ..checks import check_int, check_positive_float
from ..plotting import require
from ..seeding import preserved_global_rngs, stream_seed
from .base import Rebuild, Strategy

#: the purpose key of the strategy's own random streams (see es_search.seeding)
_STREAM = 0xC3A


def _global_randn(*shape: int) -> np.ndarray:
    """pycma's ``randn`` option: standard normals from NumPy's *global* generator.

    pycma's default, the bound method ``np.random.randn``, would pickle a snapshot of
    the global generator with the strategy, and every unpickled copy would then repeat
    the same draws; a module-level function pickles by name and draws from the global
    generator, which ``ask``/``tell`` seed per generation.
    """
    return np.random.standard_normal(shape)


@dataclass(frozen=True)
class CMAESState:
    es: bytes  # pycma's CMAEvolutionStrategy, pickled (so the state is immutable)
    center: np.ndarray  # pycma's mean
    sigma: float  # pycma's overall step size
    seed: int  # the run's seed


class CMAES(Strategy):
    """CMA-ES through pycma's ask/tell, seeded by es_search (extra: cma).

    CMA-ES (Hansen & Ostermeier 2001; Hansen 2016, "The CMA Evolution Strategy: A
    Tutorial") as implemented by pycma's ``CMAEvolutionStrategy``, driven through its
    ``ask``/``tell`` interface. Needs the optional extra ``cma``.

    Candidates are explicit vectors (``Candidate("vector", vector=x)``): pycma samples
    them in the main process. Seeding: before each ``ask`` (and ``tell``) NumPy's
    global generator, which pycma samples from, is seeded with
    ``es_search.seeding.stream_seed(seed, ...)`` for that generation inside
    ``preserved_global_rngs()``, so the same seed gives the same run and the caller's
    own random state is untouched. The pycma object is kept pickled in the state: the
    state is a frozen value that a checkpoint can pickle, and ``tell`` replays the
    generation's (deterministic) ``ask`` on the unpickled object before telling it.

    Scores are maximised; pycma minimises, so it is told ``-score``. pycma cannot take
    NaN or infinities: a non-finite score (NaN, +inf or -inf) is told as the worst
    finite value of its generation (so it ranks last, tied); a generation with no finite
    score leaves the state unchanged (the next generation samples afresh).

    ``population`` defaults to pycma's ``4 + floor(3 ln n)``; ``sigma`` is pycma's
    ``sigma0``. ``options`` is a dict of further pycma options (``cma.CMAOptions()``),
    e.g. ``{"CMA_diagonal": True}`` for many weights; ``popsize``, ``seed`` and the
    verbosity options are set by es_search. pycma's own stopping criteria are not
    applied: the run goes on for its ``generations`` (a callback can stop it earlier).

    Example::

        >>> import numpy as np
        >>> from es_search.strategies import CMAES
        >>> strategy = CMAES(population=6, sigma=0.5)
        >>> state = strategy.init(np.zeros(3), -27.0, seed=0)
        >>> candidates = strategy.ask(state, generation=0)
        >>> len(candidates), candidates[0].kind
        (6, 'vector')
        >>> scores = [-float(((c.vector - 3) ** 2).sum()) for c in candidates]
        >>> new = strategy.tell(state, 0, candidates, scores, rebuild=None)
        >>> new is not state and bool(np.abs(new.center).max() > 0)
        True
    """

    name = "cma-es"

    def __init__(self, population: int | None = None, sigma: float = 0.1,
                 options: Mapping[str, Any] | None = None):
        self.population = None if population is None else check_int(
            "population", population, 2)
        self.initial_sigma = check_positive_float("sigma", sigma)
        if options is not None and not isinstance(options, Mapping):
            raise TypeError(f"options must be a dict of pycma options, got "
                            f"{type(options).__name__}")
        self.options = dict(options or {})
        taken = {"popsize", "seed", "randn", "verbose", "verb_disp", "verb_log"} & set(
            self.options)
        if taken:
            raise ValueError(f"options {sorted(taken)} are set by es_search; use "
                             f"population=... and the run's seed instead")
        self._cma = require("cma", "cma")
        unknown = [k for k in self.options if k not in self._cma.CMAOptions.defaults()]
        if unknown:
            raise ValueError(f"unknown pycma options {unknown}; see cma.CMAOptions()")

    def _pycma_options(self, n: int, seed: int) -> dict:
        options = dict(self.options)
        # seed=NaN: pycma does not seed anything itself; ask/tell seed per generation
        options.update(verbose=-9, verb_disp=0, verb_log=0, seed=float("nan"),
                       randn=_global_randn)
        if self.population is not None:
            options["popsize"] = self.population
        return options

    def popsize(self, n: int) -> int:
        """Candidates per generation for ``n`` evolved values."""
        return self.population or 4 + int(3 * math.log(n))

    def init(self, center: np.ndarray, center_score: float, seed: int) -> CMAESState:
        center = np.array(center, dtype=np.float64)
        if center.size < 2:
            raise ValueError("cma-es needs at least 2 evolved values (pycma's limit); "
                             "use adaptive-hill-climb for a single one")
        with preserved_global_rngs():
            np.random.seed(stream_seed(seed, _STREAM) % 2 ** 32)
            es = self._cma.CMAEvolutionStrategy(center, self.initial_sigma,
                                                self._pycma_options(center.size, seed))
        return CMAESState(pickle.dumps(es), np.array(es.mean, dtype=np.float64),
                          float(es.sigma), int(seed))

    def _ask(self, state: CMAESState, generation: int) -> tuple[Any, list[np.ndarray]]:
        es = pickle.loads(state.es)
        with preserved_global_rngs():
            np.random.seed(stream_seed(state.seed, _STREAM, generation) % 2 ** 32)
            solutions = es.ask()
        return es, [np.array(x, dtype=np.float64) for x in solutions]

    def ask(self, state: CMAESState, generation: int) -> list[Candidate]:
        return [Candidate("vector", vector=x) for x in self._ask(state, generation)[1]]

    def tell(self, state: CMAESState, generation: int, candidates: Sequence[Candidate],
             scores: Sequence[float], rebuild: Rebuild) -> CMAESState:
        es, solutions = self._ask(state, generation)  # the same draws as ask() made
        if len(candidates) != len(solutions) or not all(
                c.kind == "vector" and np.array_equal(c.vector, x)
                for c, x in zip(candidates, solutions)):
            raise ValueError(f"cma-es was told about candidates that are not the ones "
                             f"ask(state, generation={generation}) gave")
        if len(scores) != len(solutions):
            raise ValueError(f"got {len(scores)} scores for {len(solutions)} candidates")
        finite = [float(s) for s in scores if math.isfinite(s)]
        if not finite:
            return state
        worst = min(finite)
        # pycma minimises: tell it -score; non-finite scores count as the worst finite one
        values = [-(float(s) if math.isfinite(s) else worst) for s in scores]
        with preserved_global_rngs():
            np.random.seed(stream_seed(state.seed, _STREAM, generation, 1) % 2 ** 32)
            es.tell(solutions, values)
        return CMAESState(pickle.dumps(es), np.array(es.mean, dtype=np.float64),
                          float(es.sigma), state.seed)

    def config(self) -> dict:
        return {"name": self.name, "population": self.population,
                "sigma": self.initial_sigma, "options": dict(self.options)}

    def __getstate__(self):  # the module object does not pickle
        state = self.__dict__.copy()
        state.pop("_cma", None)
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._cma = require("cma", "cma")
