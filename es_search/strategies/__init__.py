"""Strategies by name. One module per strategy; this dict is the only registry."""
from __future__ import annotations

from typing import Any

from ..checks import check_dict, check_keywords, did_you_mean
from ..errors import SettingError
from .base import Rebuild, Strategy
from .adaptive_hill_climb import AdaptiveHillClimb, AdaptiveHillClimbState
from .ars import ARS, ARSState
from .cma_es import CMAES, CMAESState
from .hill_climb import HillClimb, HillClimbState
from .openai_es import OpenAIES, OpenAIESState
from .pgpe import PGPE, PGPEState

#: name -> Strategy class; constructors take ``population`` and ``sigma`` keywords
STRATEGIES: dict[str, type[Strategy]] = {
    HillClimb.name: HillClimb,
    AdaptiveHillClimb.name: AdaptiveHillClimb,
    OpenAIES.name: OpenAIES,
    CMAES.name: CMAES,
    ARS.name: ARS,
    PGPE.name: PGPE,
}

DEFAULT = HillClimb.name


def make_strategy(strategy: Any = DEFAULT, population: int | None = None,
                  sigma: float | None = None, **options: Any) -> Strategy:
    """A Strategy from a registered name (with ``population``, ``sigma`` and the
    strategy's own ``options``) or an instance."""
    sizes = {key: value for key, value in (("population", population), ("sigma", sigma))
             if value is not None}
    if isinstance(strategy, Strategy):
        if given := [*sizes, *(["strategy_options"] if options else [])]:
            raise ValueError(f"the strategy instance {strategy!r} carries its own settings; "
                             f"do not pass {' or '.join(given)} to run() as well (set them "
                             f"when you build it)")
        return strategy
    names = ", ".join(sorted(STRATEGIES))
    if isinstance(strategy, str):
        if strategy not in STRATEGIES:
            raise ValueError(f"unknown strategy {strategy!r}"
                             f"{did_you_mean(strategy, sorted(STRATEGIES))}; choose one of "
                             f"{names} or pass a Strategy instance")
        cls = STRATEGIES[strategy]
        check_keywords(cls, options, f"strategy {strategy!r}", "option",
                       skip=("population", "sigma"))
        return cls(**options, **sizes)
    if isinstance(strategy, type) and issubclass(strategy, Strategy):
        by_name = f" or its name {strategy.name!r}" if strategy.name in STRATEGIES else ""
        raise TypeError(f"strategy is the class {strategy.__name__} itself; pass an "
                        f"instance, {strategy.__name__}(...){by_name}")
    raise TypeError(f"strategy must be a name ({names}) or a Strategy instance, got "
                    f"{type(strategy).__name__}")


def strategy_from(strategy: Any, population: int | None, sigma: float | None,
                  options: Any) -> Strategy:
    """:func:`make_strategy` with the strategy's own ``options`` as a dict (a run's
    ``strategy_options``), which cannot hold ``population`` or ``sigma``."""
    options = check_dict("strategy_options", options, "a dict of the strategy's own "
                         "options (e.g. {{'reevaluate': True}})")
    if own := sorted(set(options) & {"population", "sigma"}):  # settings of their own
        raise SettingError("strategy_options", options, f"the strategy's own options, "
                           f"without {own[0]}", f"give {{{own[0]}}} on its own")
    return make_strategy(strategy, population, sigma, **options)


__all__ = ["STRATEGIES", "DEFAULT", "ARS", "ARSState", "AdaptiveHillClimb",
           "AdaptiveHillClimbState", "CMAES", "CMAESState", "HillClimb", "HillClimbState",
           "OpenAIES", "OpenAIESState", "PGPE", "PGPEState", "Rebuild", "Strategy",
           "make_strategy", "strategy_from"]
