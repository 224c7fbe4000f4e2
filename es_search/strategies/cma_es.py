"""CMA-ES through pycma's ask/tell (optional extra ``cma``), seeded by es_search."""
from __future__ import annotations

import dataclasses
import math
import pickle
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from ..candidates import Candidate
from ..checks import check_dict, check_int, check_positive_float, did_you_mean
from ..extras import require
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


#: the restart schemes (``CMAES(restarts=...)``)
RESTARTS = ("ipop", "bipop")


@dataclass(frozen=True)
class CMAESState:
    es: bytes  # pycma's CMAEvolutionStrategy, pickled (so the state is immutable)
    center: np.ndarray  # pycma's mean
    sigma: float  # pycma's overall step size
    seed: int  # the run's seed
    # restarts (IPOP/BIPOP); the defaults describe the first run, so that states saved
    # before restarts existed load as such
    x0: np.ndarray | None = None  # where every run starts (None: no restarts)
    restarts: int = 0  # runs started after the first
    regime: str = "first"  # this run's regime: "first", "large" or "small" (BIPOP)
    large_runs: int = 0  # runs of the large regime started so far
    small_runs: int = 0  # runs of the small regime started so far
    large_evals: int = 0  # evaluations of the finished large runs (BIPOP's budget)
    small_evals: int = 0  # evaluations of the finished first and small runs
    popsize0: int = 0  # the first run's population (the default lambda)
    maxiter0: float = 0.0  # the first run's iteration limit


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
    verbosity options are set by es_search. Without restarts pycma's own stopping
    criteria are not applied: the run goes on for its ``generations`` (a callback can
    stop it earlier).

    Restarts (``restarts="ipop"`` or ``"bipop"``, at most ``max_restarts`` of them):
    when pycma's ``stop()`` reports a termination criterion after a generation (e.g.
    ``tolfun``, ``tolflatfitness``, ``tolx``, ``maxiter``), the next generation starts
    a fresh pycma run from the starting point, as pycma's ``fmin`` does:

    - IPOP (Auger & Hansen 2005): each restart doubles the population,
      ``lambda = lambda_0 * 2^restarts``, with the same ``sigma``;
    - BIPOP (Hansen 2009, "Benchmarking a BI-population CMA-ES on the BBOB-2009
      function testbed"): two interlaced regimes. A *large* run doubles the
      population again (``lambda_0 * 2^large_runs``, ``sigma``); a *small* run has
      ``lambda_0 * (2^large_runs)^(U^2)`` candidates, step size
      ``sigma * 10^(-2 U')`` and at most half the large runs' evaluations in
      iterations (U, U' uniform in [0, 1]). A small run starts while the evaluations
      of the first and small runs are below those of the large runs; otherwise a large
      one. As in pycma's ``fmin``, ``max_restarts`` counts large runs (IPOP: all).

    The restart bookkeeping lives in the state (it pickles, so a resumed run restarts
    exactly as an uninterrupted one), and every draw is seeded from the run's seed.
    The history's ``sigma`` is the current run's. After the last restart the run goes
    on as one without restarts.

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
                 options: Mapping[str, Any] | None = None, restarts: str | None = None,
                 max_restarts: int = 9):
        self.population = None if population is None else check_int(
            "population", population, 2)
        self.initial_sigma = check_positive_float("sigma", sigma)
        self.options = check_dict("options", options, "a dict of pycma options")
        taken = {"popsize", "seed", "randn", "verbose", "verb_disp", "verb_log"} & set(
            self.options)
        if taken:
            raise ValueError(f"options {sorted(taken)} are set by es_search; use "
                             f"population=... and the run's seed instead")
        self._cma = require("cma", "cma")
        known = self._cma.CMAOptions.defaults()
        unknown = [k for k in self.options if k not in known]
        if unknown:
            hints = "".join(did_you_mean(k, list(known)) for k in unknown)
            raise ValueError(f"unknown pycma options {unknown}{hints}; see cma.CMAOptions()")
        if restarts is not None and restarts not in RESTARTS:
            raise ValueError(f"restarts must be None (no restarts), 'ipop' or 'bipop'; "
                             f"got {restarts!r}")
        self.restarts = restarts
        self.max_restarts = check_int("max_restarts", max_restarts, 0)

    def _pycma_options(self, popsize: int | None = None,
                       maxiter: float | None = None) -> dict:
        options = dict(self.options)
        # seed=NaN: pycma does not seed anything itself; ask/tell seed per generation
        options.update(verbose=-9, verb_disp=0, verb_log=0, seed=float("nan"),
                       randn=_global_randn)
        popsize = self.population if popsize is None else popsize
        if popsize is not None:
            options["popsize"] = popsize
        if maxiter is not None:
            options["maxiter"] = maxiter
        return options

    def _new_es(self, x0: np.ndarray, sigma: float, options: dict, seed: int) -> Any:
        with preserved_global_rngs():
            np.random.seed(seed % 2 ** 32)
            return self._cma.CMAEvolutionStrategy(x0, sigma, options)

    def popsize(self, n: int) -> int:
        """Candidates per generation for ``n`` evolved values."""
        return self.population or 4 + int(3 * math.log(n))

    def max_tasks(self, n: int) -> int | None:
        """pycma's population; None with restarts (IPOP and BIPOP grow it)."""
        return None if self.restarts is not None else self.popsize(n)

    def check_size(self, n: int) -> None:
        if n < 2:
            raise ValueError("cma-es needs at least 2 evolved values (pycma's limit); "
                             "use adaptive-hill-climb for a single one")

    def init(self, center: np.ndarray, center_score: float, seed: int) -> CMAESState:
        center = np.array(center, dtype=np.float64)
        self.check_size(center.size)
        es = self._new_es(center, self.initial_sigma, self._pycma_options(),
                          stream_seed(seed, _STREAM))
        state = CMAESState(self._frozen(es), np.array(es.mean, dtype=np.float64),
                           float(es.sigma), int(seed))
        if self.restarts is None:
            return state
        return dataclasses.replace(state, x0=center, popsize0=int(es.popsize),
                                   maxiter0=float(es.opts["maxiter"]))

    def _frozen(self, es: Any) -> bytes:
        """``es`` pickled, for a state; the next ``_ask`` of that state takes ``es``
        itself (what unpickling would give) instead of unpickling it again."""
        data = pickle.dumps(es, protocol=5)  # its arrays copied once (4: twice)
        self._told = (data, es)
        return data

    def _thawed(self, state: CMAESState) -> Any:
        told, self._told = self.__dict__.get("_told"), None
        if told is not None and told[0] is state.es:
            return told[1]
        return pickle.loads(state.es)

    def _ask(self, state: CMAESState, generation: int) -> tuple[Any, list[np.ndarray]]:
        es = self._thawed(state)
        with preserved_global_rngs():
            np.random.seed(stream_seed(state.seed, _STREAM, generation) % 2 ** 32)
            solutions = es.ask()
        return es, [np.array(x, dtype=np.float64) for x in solutions]

    def ask(self, state: CMAESState, generation: int) -> list[Candidate]:
        es, solutions = self._ask(state, generation)
        # tell() on this state and generation takes these over instead of unpickling and
        # asking again (the same object either way: a fifth of a generation's time at
        # 2,000 weights); any other tell() starts from state.es, so states stay immutable
        self._asked = (state.es, generation, es, solutions)
        return [Candidate("vector", vector=x.copy()) for x in solutions]

    def _take_asked(self, state: CMAESState, generation: int) -> tuple[Any, list[np.ndarray]]:
        asked, self._asked = self.__dict__.get("_asked"), None
        if asked is not None and asked[0] is state.es and asked[1] == generation:
            return asked[2], asked[3]
        return self._ask(state, generation)

    def tell(self, state: CMAESState, generation: int, candidates: Sequence[Candidate],
             scores: Sequence[float], rebuild: Rebuild) -> CMAESState:
        es, solutions = self._take_asked(state, generation)  # the draws ask() made
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
            stopped = self.restarts is not None and bool(es.stop())
        if stopped and self._restarts_left(state):
            return self._restart(state, generation, es.countevals)
        return dataclasses.replace(state, es=self._frozen(es),
                                   center=np.array(es.mean, dtype=np.float64),
                                   sigma=float(es.sigma))

    def _restarts_left(self, state: CMAESState) -> bool:
        if self.restarts == "ipop":
            return state.restarts < self.max_restarts
        # BIPOP (as pycma's fmin): small runs do not count against max_restarts, but
        # once the large runs are spent the search ends with the current run
        return state.large_runs < self.max_restarts

    def _restart(self, state: CMAESState, generation: int, evaluations: int) -> CMAESState:
        """A fresh pycma run from ``x0``, with IPOP's or BIPOP's population and sigma."""
        small_evals, large_evals = state.small_evals, state.large_evals
        if state.regime == "large":
            large_evals += evaluations
        else:  # the first run counts on the small budget, as in pycma's fmin
            small_evals += evaluations
        large_runs, small_runs = state.large_runs, state.small_runs
        sigma, maxiter = self.initial_sigma, None
        rng = np.random.default_rng(stream_seed(state.seed, _STREAM, generation, 2))
        if self.restarts == "ipop":  # Auger & Hansen 2005: lambda doubles
            regime, large_runs = "large", large_runs + 1
            popsize = state.popsize0 * 2 ** (state.restarts + 1)
        elif small_evals < max(1, large_evals):  # Hansen 2009: a small-population run
            regime, small_runs = "small", small_runs + 1
            spread = (2 ** large_runs) ** (rng.uniform() ** 2)
            popsize = max(2, int(state.popsize0 * spread))
            sigma *= 0.01 ** rng.uniform()
            maxiter = min(state.maxiter0, 0.5 * large_evals / popsize)
        else:  # a large-population run: the population doubles again
            regime, large_runs = "large", large_runs + 1
            popsize = state.popsize0 * 2 ** large_runs
            maxiter = state.maxiter0
        es = self._new_es(state.x0, sigma, self._pycma_options(popsize, maxiter),
                          stream_seed(state.seed, _STREAM, generation, 3))
        return dataclasses.replace(
            state, es=self._frozen(es), center=np.array(es.mean, dtype=np.float64),
            sigma=float(es.sigma), restarts=state.restarts + 1, regime=regime,
            large_runs=large_runs, small_runs=small_runs, large_evals=large_evals,
            small_evals=small_evals)

    def config(self) -> dict:
        config = {"name": self.name, "population": self.population,
                  "sigma": self.initial_sigma, "options": dict(self.options)}
        if self.restarts is not None:  # (absent otherwise: older checkpoints resume)
            config.update(restarts=self.restarts, max_restarts=self.max_restarts)
        return config

    def __getstate__(self):  # the module object does not pickle; a pending ask is dropped
        state = self.__dict__.copy()
        state.pop("_cma", None)
        state.pop("_asked", None)
        state.pop("_told", None)
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._cma = require("cma", "cma")
