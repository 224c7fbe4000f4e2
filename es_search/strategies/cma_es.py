"""CMA-ES through pycma's ask/tell (optional extra ``cma``), seeded by es_search."""
from __future__ import annotations

import dataclasses
import functools
import math
import pickle
import threading
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from ..candidates import Candidate
from ..checks import check_choice, check_dict, check_int, check_positive_float, did_you_mean
from ..extras import require
from ..seed_sequences import MASK32
from ..seeding import fresh_in_forked_child, preserved_global_rngs, stream_seed
from .base import Rebuild, Strategy, worst_finite

#: the purpose key of the strategy's own random streams (see es_search.seeding)
_STREAM = 0xC3A


@functools.lru_cache(maxsize=16)  # ask and tell of a generation: one derivation (~8 us)
def _draws_seed(seed: int, generation: int) -> int:
    """The 64-bit seed of ``generation``'s draws: its low 32 bits seed ``ask``'s, its
    high 32 bits ``tell``'s (pycma's default ``tell`` draws nothing)."""
    return stream_seed(seed, _STREAM, generation)


#: the generator pycma draws from (a legacy RandomState: seeded as ``np.random.seed``
#: seeds NumPy's global one, it draws the same numbers), and the lock around its use
_RNG = np.random.RandomState()
_RNG_LOCK = threading.RLock()
fresh_in_forked_child(globals(), "_RNG_LOCK", threading.RLock)


def _global_randn(*shape: int) -> np.ndarray:
    """pycma's ``randn`` option: standard normals from ``_RNG``, which ``ask``/``tell``
    seed per generation (the caller's global generators are not touched).

    pycma's default, the bound method ``np.random.randn``, would pickle a snapshot of
    the generator with the strategy, and every unpickled copy would then repeat the
    same draws; a module-level function pickles by name.
    """
    return _RNG.standard_normal(shape)


#: a state holds its pycma object live; every this many tells it is also pickled
#: (bounding how far a reused state's object is replayed from, see :class:`_Live`)
_PICKLE_EVERY = 64


class _Live:
    """A state's pycma object, live (a state pickles it as bytes).

    ``take()`` hands it to one ``ask`` (asking and telling change it); a state asked
    again rebuilds it from ``source``: the object pickled (bytes), or ``(strategy,
    parent state, generation, scores)``: the parent's object asked and told again as
    in that generation (the same seeded draws). ``depth``: tells since the last
    pickled one.
    """

    def __init__(self, es: Any, source: "bytes | tuple", depth: int = 0):
        self.es, self.source, self.depth = es, source, depth

    def peek(self) -> Any:
        if self.es is None and isinstance(self.source, bytes):
            self.es = pickle.loads(self.source)
        elif self.es is None:
            strategy, parent, generation, scores = self.source
            candidates = strategy._ask(parent, generation)
            self.es = _take(strategy._tell(parent, generation, candidates, scores, None).es)
        return self.es

    def take(self) -> Any:
        es, self.es = self.peek(), None
        return es

    def __reduce__(self):  # a live object is never changed: ask takes it first
        source = self.source if isinstance(self.source, bytes) else pickle.dumps(
            self.peek(), protocol=5)
        return bytes, (source,)


def _take(es: "bytes | _Live") -> Any:
    """A pycma object of a state's own (``CMAESState.es``) to ask and tell."""
    return pickle.loads(es) if isinstance(es, bytes) else es.take()


class Asked(list):
    """The candidates ``ask`` gave, with ``asked``: ``(state.es, generation, the pycma
    object after its ask, its solutions)``, which ``tell`` takes over (once) instead of
    unpickling and asking again; pickles as a plain list."""

    def __init__(self, candidates: list, asked: tuple):
        super().__init__(candidates)
        self.asked = asked

    def __reduce__(self):
        return list, (list(self),)


#: the restart schemes (``CMAES(restarts=...)``)
RESTARTS = ("ipop", "bipop")


@dataclass(frozen=True)
class CMAESState:
    es: bytes | _Live  # pycma's CMAEvolutionStrategy, pickled or live (see _Live)
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
    them in the main process. Seeding: before each ``ask`` (and ``tell``) the
    generator pycma samples from (its ``randn`` option, es_search's own) is seeded with
    ``es_search.seeding.stream_seed(seed, ...)`` for that generation, so the same seed
    gives the same run and the caller's own random state is untouched. The state is a
    frozen value that a checkpoint can pickle; its pycma object stays live (pickled
    with the state) and one ``ask`` takes it over; a state asked again replays how it
    came about. The list ``ask`` returns hands its pycma object over to ``tell``
    (once); other candidates are checked against a replay of the generation's
    (deterministic) ``ask``.

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
        self.restarts = None if restarts is None else check_choice(
            "restarts", restarts, RESTARTS, " or None (no restarts)")
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
        state = CMAESState(pickle.dumps(es, protocol=5), np.array(es.mean, dtype=np.float64),
                           float(es.sigma), int(seed))
        if self.restarts is None:
            return state
        return dataclasses.replace(state, x0=center, popsize0=int(es.popsize),
                                   maxiter0=float(es.opts["maxiter"]))

    def _ask(self, state: CMAESState, generation: int) -> list[Candidate]:
        es = _take(state.es)
        with _RNG_LOCK:
            _RNG.seed(_draws_seed(state.seed, generation) & MASK32)
            solutions = es.ask()
        return Asked([Candidate("vector", vector=np.array(x, dtype=np.float64))
                      for x in solutions],
                     (state.es, generation, es, solutions))

    def _tell(self, state: CMAESState, generation: int, candidates: Sequence[Candidate],
              scores: list[float], rebuild: Rebuild) -> CMAESState:
        # the pycma object ask() drew these candidates with, handed over with them
        # (once); otherwise ask again: the same draws
        asked = candidates.__dict__.pop("asked", None) if isinstance(candidates, Asked) \
            else None
        if asked is None or asked[0] is not state.es or asked[1] != generation:
            asked = self._ask(state, generation).asked
        es, solutions = asked[2], asked[3]
        if len(candidates) != len(solutions) or not (
                all(c.kind == "vector" for c in candidates)
                and np.array_equal([c.vector for c in candidates], solutions)):
            raise ValueError(f"cma-es was told about candidates that are not the ones "
                             f"ask(state, generation={generation}) gave")
        values = worst_finite(scores)
        if values is None:  # the state as it was (its object, taken, is rebuilt)
            return state
        with _RNG_LOCK:  # pycma minimises: tell it -score
            _RNG.seed(_draws_seed(state.seed, generation) >> 32)
            es.tell(solutions, [-float(v) for v in values])
            stopped = self.restarts is not None and bool(es.stop())
        if stopped and self._restarts_left(state):
            return self._restart(state, generation, es.countevals)
        depth = state.es.depth + 1 if isinstance(state.es, _Live) else 1
        kept = _Live(es, (self, state, generation, scores), depth) \
            if depth < _PICKLE_EVERY else _Live(es, pickle.dumps(es, protocol=5))
        return dataclasses.replace(state, es=kept, center=np.array(es.mean, dtype=np.float64),
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
            state, es=pickle.dumps(es, protocol=5), center=np.array(es.mean, dtype=np.float64),
            sigma=float(es.sigma), restarts=state.restarts + 1, regime=regime,
            large_runs=large_runs, small_runs=small_runs, large_evals=large_evals,
            small_evals=small_evals)

    def config(self) -> dict:
        return {"name": self.name, "population": self.population,
                "sigma": self.initial_sigma, "options": dict(self.options),
                "restarts": self.restarts, "max_restarts": self.max_restarts}

    def __getstate__(self):  # the module object does not pickle
        state = self.__dict__.copy()
        state.pop("_cma", None)
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._cma = require("cma", "cma")
