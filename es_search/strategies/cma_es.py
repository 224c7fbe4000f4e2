"""CMA-ES through pycma's ask/tell (optional extra ``cma``), seeded by es_search."""
from __future__ import annotations

import copy
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
    """Its low 32 bits seed ``ask``'s draws, its high 32 bits ``tell``'s."""
    return stream_seed(seed, _STREAM, generation)


#: the generator pycma draws from (a legacy RandomState: it draws what NumPy's global
#: one would, seeded alike), and the lock around its use
_RNG = np.random.RandomState()
_RNG_LOCK = threading.RLock()
fresh_in_forked_child(globals(), "_RNG_LOCK", threading.RLock)


def _global_randn(*shape: int) -> np.ndarray:
    """pycma's ``randn`` option: normals from ``_RNG``, seeded per generation. (pycma's
    default, the bound ``np.random.randn``, would pickle a snapshot of the generator,
    and every unpickled copy would repeat its draws; a function pickles by name.)"""
    return _RNG.standard_normal(shape)


def _mean(es: Any) -> np.ndarray:
    """pycma's mean as a point of the search space (its ``result.xfavorite``): options
    such as ``bounds``, ``typical_x`` or ``fixed_variables`` map its internal mean there."""
    return np.array(es.gp.pheno(es.mean, into_bounds=es.boundary_handler.repair),
                    dtype=np.float64)


#: pycma's stopping criteria (with every ``tol...`` option): read by its ``stop()``,
#: which only restarts consult
_STOPS = {"ftarget", "maxfevals", "maxiter", "timeout", "termination_callback"}

_PICKLE_EVERY = 64  # generations between pickled states: a reused state's longest replay


class _Live:
    """A told state's pycma object, live until one ``ask`` takes it (asking and telling
    change it). A state asked again rebuilds it: ``replay``, ``(strategy, parent state,
    generation, scores)``, asks and tells the parent's object again (the same seeded
    draws). Pickles as the object's bytes."""

    def __init__(self, es: Any, replay: tuple):
        self.es, self.replay = es, replay

    def peek(self) -> Any:
        if self.es is None:
            strategy, parent, generation, scores = self.replay
            asked = strategy.ask(parent, generation)
            self.es = _take(strategy._tell(parent, generation, asked, scores, None).es)
        return self.es

    def take(self) -> Any:
        es, self.es = self.peek(), None
        return es

    def __reduce__(self):
        return bytes, (pickle.dumps(self.peek(), protocol=5),)


def _take(es: "bytes | _Live") -> Any:  # a pycma object of a state's own to ask and tell
    return pickle.loads(es) if isinstance(es, bytes) else es.take()


class Asked(list):
    """The candidates ``ask`` gave, with ``asked``: ``(state.es, generation, the pycma
    object after its ask, its solutions)``, which ``tell`` takes over (once) instead of
    asking again; pickles as a plain list."""

    def __init__(self, candidates: list, asked: tuple):
        super().__init__(candidates)
        self.asked = asked

    def __reduce__(self):
        return list, (list(self),)


@dataclass(frozen=True)
class CMAESState:
    es: bytes | _Live  # pycma's CMAEvolutionStrategy, pickled or live (see _Live)
    center: np.ndarray  # pycma's mean
    sigma: float  # pycma's overall step size
    seed: int  # the run's seed
    # restarts (IPOP/BIPOP); the defaults describe the first run
    x0: np.ndarray | None = None  # where every run starts (None: no restarts)
    restarts: int = 0  # runs started after the first (the small ones: less large_runs)
    regime: str = "first"  # this run's regime: "first", "large" or "small" (BIPOP)
    large_runs: int = 0  # runs of the large regime started so far
    large_evals: int = 0  # evaluations of the finished large runs (BIPOP's budget)
    small_evals: int = 0  # evaluations of the finished first and small runs
    popsize0: int = 0  # the first run's population (the default lambda)
    maxiter0: float = 0.0  # the first run's iteration limit


class CMAES(Strategy):
    """CMA-ES through pycma's ask/tell, seeded by es_search (extra: cma).

    CMA-ES (Hansen & Ostermeier 2001; Hansen 2016, "The CMA Evolution Strategy: A
    Tutorial") as pycma's ``CMAEvolutionStrategy`` implements it. Candidates are
    vectors (``Candidate("vector", vector=x)``) that pycma samples in the main process
    from a generator seeded per generation from the run's seed (the caller's random
    state untouched). pycma is told ``-score``; a non-finite score as the worst finite
    one of its generation; a generation with no finite score leaves the state unchanged.

    ``population`` defaults to pycma's ``4 + floor(3 ln n)``; ``sigma`` is pycma's
    ``sigma0``; ``options``, further pycma options (``cma.CMAOptions()``), e.g.
    ``{"CMA_diagonal": True}`` for many weights. Without restarts pycma's stopping
    criteria are not applied (and refused: end a run early with a callback). With
    ``restarts="ipop"`` or ``"bipop"`` (at most ``max_restarts``, default 9), when
    pycma's ``stop()`` reports a criterion (``tolfun``, ``tolx``, ...), the next
    generation starts a fresh pycma run from the starting point, as
    pycma's ``fmin`` does:

    - IPOP (Auger & Hansen 2005): ``lambda = lambda_0 * 2^restarts``, the same ``sigma``;
    - BIPOP (Hansen 2009, "Benchmarking a BI-population CMA-ES on the BBOB-2009
      function testbed"): a *large* run has ``lambda_0 * 2^large_runs`` candidates and
      ``sigma``; a *small* run ``lambda_0 * (2^large_runs)^(U^2)``, step size
      ``sigma * 10^(-2 U')`` and at most half the large runs' evaluations in iterations
      (U, U' uniform in [0, 1]). A small run starts while the first and small runs'
      evaluations are below the large runs'. ``max_restarts`` counts large runs.

    The restart bookkeeping is in the state and every draw is seeded: a resumed run
    restarts as an uninterrupted one. The history's ``sigma`` is the current run's.

    Example::

        >>> import numpy as np
        >>> from es_search.strategies import CMAES
        >>> strategy = CMAES(population=6, sigma=0.5)
        >>> state = strategy.init(np.zeros(3), -27.0, seed=0)
        >>> candidates = strategy.ask(state, generation=0)
        >>> scores = [-float(((c.vector - 3) ** 2).sum()) for c in candidates]
        >>> new = strategy.tell(state, 0, candidates, scores, rebuild=None)
        >>> len(candidates), new is not state, bool(np.abs(new.center).max() > 0)
        (6, True, True)
    """

    name = "cma-es"

    def __init__(self, population: int | None = None, sigma: float = 0.1,
                 options: Mapping[str, Any] | None = None, restarts: str | None = None,
                 max_restarts: int | None = None):
        self.population = check_int("population", population, 2, none_ok=True)
        self.initial_sigma = check_positive_float("sigma", sigma)
        self.options = check_dict("options", options, "a dict of pycma options")
        if taken := {"popsize", "seed", "randn", "verbose", "verb_disp", "verb_log"} & set(
                self.options):
            raise ValueError(f"options {sorted(taken)} are es_search's to set: give population"
                             f"=... and the run's seed; pycma prints nothing and draws from "
                             f"the run's seeded streams")
        known = require("cma", "cma").CMAOptions.defaults()
        if unknown := [k for k in self.options if k not in known]:
            hints = "".join(did_you_mean(k, list(known)) for k in unknown)
            raise ValueError(f"unknown pycma options {unknown}{hints}; see cma.CMAOptions()")
        self.restarts = None if restarts is None else check_choice(
            "restarts", restarts, ("ipop", "bipop"), " or None (no restarts)")
        self.max_restarts = None if self.restarts is None else check_int(  # as config() keeps it
            "max_restarts", 9 if max_restarts is None else max_restarts, 0)
        unused = [k for k in self.options if k in _STOPS or k.startswith("tol")] + (
            ["max_restarts"] if max_restarts is not None else [])
        if self.restarts is None and unused:
            raise ValueError(f"{unused} apply to restarts only (pycma's stop() is not "
                             f"consulted without them): add restarts='ipop' or 'bipop', "
                             f"or end the run early with a callback (e.g. StopAtScore)")

    def _new_es(self, x0: np.ndarray, sigma: float, seed: int, popsize: int | None = None,
                maxiter: float | None = None) -> Any:
        """A pycma object; it seeds nothing itself (seed NaN): ask and tell do."""
        options = {**self.options, "verbose": -9, "verb_disp": 0, "verb_log": 0,
                   "seed": float("nan"), "randn": _global_randn}
        given = {"popsize": popsize or self.population, "maxiter": maxiter}
        options.update({key: value for key, value in given.items() if value is not None})
        with preserved_global_rngs():
            np.random.seed(seed % 2 ** 32)
            try:
                return require("cma", "cma").CMAEvolutionStrategy(x0, sigma, options)
            except ValueError as exc:  # e.g. a start outside options["bounds"]
                raise ValueError(f"pycma cannot start cma-es from the agent's weights with "
                                 f"options={self.options}: {exc}") from exc

    def max_tasks(self, n: int) -> int | None:
        """pycma's population; None with restarts (IPOP and BIPOP grow it)."""
        return None if self.restarts else self.sized(n).population

    def sized(self, n: int) -> CMAES:
        """With pycma's population for ``n`` values, ``4 + floor(3 ln n)``, if none given."""
        if n < 2:
            raise ValueError("cma-es needs at least 2 evolved values (pycma's limit); "
                             "use adaptive-hill-climb for a single one")
        sized = copy.copy(self)
        sized.population = self.population or 4 + int(3 * math.log(n))
        return sized

    def init(self, center: np.ndarray, center_score: float, seed: int) -> CMAESState:
        center = np.array(center, dtype=np.float64)
        self.sized(center.size)  # refuses a size pycma cannot search
        es = self._new_es(center, self.initial_sigma, stream_seed(seed, _STREAM))
        state = CMAESState(pickle.dumps(es, protocol=5), _mean(es),
                           float(es.sigma), int(seed))
        if self.restarts is None:
            return state
        return dataclasses.replace(state, x0=center, popsize0=int(es.popsize),
                                   maxiter0=float(es.opts["maxiter"]))

    def ask(self, state: CMAESState, generation: int) -> list[Candidate]:
        es = _take(state.es)
        with _RNG_LOCK:
            _RNG.seed(_draws_seed(state.seed, generation) & MASK32)
            solutions = es.ask()
        return Asked([Candidate("vector", vector=np.array(x, dtype=np.float64))
                      for x in solutions],
                     (state.es, generation, es, solutions))

    def _tell(self, state: CMAESState, generation: int, candidates: Sequence[Candidate],
              scores: list[float], rebuild: Rebuild) -> CMAESState:
        asked = candidates.__dict__.pop("asked", None) if isinstance(candidates, Asked) \
            else None  # what ask() drew them with, once; otherwise ask again
        if asked is None or asked[0] is not state.es or asked[1] != generation:
            asked = self.ask(state, generation).asked
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
        # as fmin: max_restarts counts large runs; once spent, the current run goes on
        if stopped and state.large_runs < self.max_restarts:
            return self._restart(state, generation, es.countevals)
        kept = _Live(es, (self, state, generation, scores)) \
            if (generation + 1) % _PICKLE_EVERY else pickle.dumps(es, protocol=5)
        return dataclasses.replace(state, es=kept, center=_mean(es),
                                   sigma=float(es.sigma))

    def _restart(self, state: CMAESState, generation: int, evaluations: int) -> CMAESState:
        """A fresh pycma run from ``x0``, with IPOP's or BIPOP's population and sigma."""
        spent = {"large_evals": state.large_evals + evaluations} if state.regime == "large" \
            else {"small_evals": state.small_evals + evaluations}  # the first run: small's
        state = dataclasses.replace(state, restarts=state.restarts + 1, **spent)
        sigma, rng = self.initial_sigma, np.random.default_rng(
            stream_seed(state.seed, _STREAM, generation, 2))
        if self.restarts == "bipop" and state.small_evals < max(1, state.large_evals):
            # Hansen 2009: a small-population run
            state = dataclasses.replace(state, regime="small")
            popsize = max(2, int(state.popsize0 * (2 ** state.large_runs) ** (rng.uniform() ** 2)))
            sigma *= 0.01 ** rng.uniform()
            maxiter = min(state.maxiter0, 0.5 * state.large_evals / popsize)
        else:  # IPOP (Auger & Hansen 2005) and BIPOP's large runs: the population doubles
            state = dataclasses.replace(state, regime="large", large_runs=state.large_runs + 1)
            popsize = state.popsize0 * 2 ** state.large_runs
            maxiter = state.maxiter0 if self.restarts == "bipop" else None
        es = self._new_es(state.x0, sigma, stream_seed(state.seed, _STREAM, generation, 3),
                          popsize, maxiter)
        return dataclasses.replace(state, es=pickle.dumps(es, protocol=5),
                                   center=_mean(es),
                                   sigma=float(es.sigma))
