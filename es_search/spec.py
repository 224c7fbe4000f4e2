"""A run described as data: the problem and its parameters, the strategy and its options,
the size, the length and the seed. Every run has one, ``es_search.run(RunSpec("sphere",
{"dim": 3}, generations=2))``'s or the one ``es_search.run(agent)`` reads off the agent
(:meth:`RunSpec.describing`); the run folder's ``config.json`` keeps it (its ``spec``),
from which ``es-search test``, ``--resume`` and :func:`load_run` rebuild the run."""
from __future__ import annotations

import dataclasses
import inspect
import os
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Mapping

from .agent import class_home
from .checks import (check, check_int, check_positive_float, check_seed, keyword_parameters,
                     score_kwargs_misfit)
from .errors import SettingError, literal
from .files import as_read_back
from .folder import CHECKPOINT, CONFIG, OutFolderError, RunDir
from .problems import BUILTINS, build_problem, load_problem, problem_defaults, resolve_spec
from .seeding import build_seeded
from .settings import check_fields, check_generations, same_state, setting
from .strategies import DEFAULT, STRATEGIES, strategy_from


def _merged(own: Any, given: Any) -> Any:
    """``given`` over ``own``: name by name for a dict, else unless it is None."""
    return {**own, **given} if isinstance(own, dict) else own if given is None else given


@dataclass
class RunSpec:
    """What defines a run. ``problem``: a built-in name, ``gym:ENV_ID``,
    ``module:Class`` or ``path/file.py:Class`` (found from ``cwd``); ``params``: its
    constructor arguments; the rest as ``es_search.run`` takes them. None: the
    problem's default (:meth:`resolved`)."""

    problem: str
    params: dict = field(default_factory=dict)
    cwd: str = field(default_factory=os.getcwd)
    strategy: str | None = None
    strategy_options: dict = field(default_factory=dict)
    population: int | None = setting(None, partial(check_int, minimum=1))
    sigma: float | None = setting(None, check_positive_float)
    generations: int | None = setting(None, check_generations)
    seed: int | None = setting(None, lambda name, value: check_seed(value))

    def __post_init__(self) -> None:  # checked when made: before anything is loaded
        check_fields(self)

    @classmethod
    def of(cls, values: Mapping[str, Any]) -> RunSpec:
        """The spec of those ``values`` that name its fields (a command line's)."""
        return cls(**{f.name: values[f.name] for f in dataclasses.fields(cls)
                      if f.name in values})

    @classmethod
    def describing(cls, agent: Any, strategy: Any, generations: int, seed: int
                   ) -> RunSpec | None:
        """The spec of a run of ``agent`` by ``strategy``; None where data cannot build them
        again: a class of a function or a notebook, arguments JSON changes (a tensor, a
        tuple), a strategy not in STRATEGIES, or state the arguments do not give (built
        again here from the seed and compared: a buffer drawn from your RNG, an attribute
        set after construction)."""
        kind, options = type(agent), strategy.config()
        where, arguments = class_home(kind), getattr(agent, "_arguments", None)
        if where is None or arguments is None or "<locals>" in kind.__qualname__ or \
                STRATEGIES.get(options["name"]) is not type(strategy) or \
                as_read_back(arguments) != arguments or \
                not same_state(agent, build_seeded(seed, kind, **arguments)):
            return None
        problem = vars(kind).get("_spec") or f"{where}:{kind.__qualname__}"
        return cls({path: name for name, path in BUILTINS.items()}.get(problem, problem),
                   arguments, strategy=options.pop("name"),
                   population=options.pop("population"), sigma=options.pop("sigma"),
                   strategy_options=options, generations=generations, seed=seed)

    @classmethod
    def load(cls, folder: Any) -> RunSpec:
        """The spec of the run in ``folder`` (:class:`~es_search.OutFolderError` if none)."""
        run = RunDir(folder)
        config = run.config
        if not config:
            raise OutFolderError(f"no run folder at {run.path} (a folder with a {CONFIG}: "
                                 f"pass the run's --out DIR)")
        if not config.get("spec"):
            raise OutFolderError(
                f"the agent of the run in {run.path} cannot be built again from its "
                f"{CONFIG} (a class defined in a function or a notebook, constructor "
                f"arguments that are not plain values, state they do not give, or a "
                f"strategy of your own): es_search.Result.load(DIR, agent) reads the run "
                f"with an agent you build")
        return cls(**config["spec"])

    @classmethod
    def resume(cls, folder: Any, overrides: RunSpec) -> RunSpec:
        """The spec that continues the run in ``folder`` (if it has one): ``overrides``
        over the run's own (its options and size only while the strategy is its own).
        Once it has a checkpoint, a problem or ``params`` other than the run's is
        refused; ``run()`` compares the rest."""
        saved = RunDir(folder).config.get("spec")
        if not saved:
            return overrides
        own = cls(**saved)
        if overrides.strategy not in (None, own.strategy):  # its own options and size
            own = dataclasses.replace(own, strategy_options={}, population=None, sigma=None)
        spec = cls(**{f.name: _merged(getattr(own, f.name), getattr(overrides, f.name))
                      for f in dataclasses.fields(cls)})
        if (RunDir(folder).path / CHECKPOINT).exists():
            from .checkpoint import differences
            diff = "; ".join(differences(own.defining(), spec.defining(),
                                         ["problem", "arguments"]))
            check("out", str(folder), not diff, f"holds a run of another problem or "
                  f"constructor arguments: {literal(diff)}", "use the run's problem and "
                  "{params}, or another {out}", got=False)
        return spec

    def problem_class(self) -> type:
        """The problem's class, loaded once per spec (a file is run when loaded)."""
        if "_cls" not in vars(self):
            self._cls = load_problem(self.problem, self.cwd if os.path.isdir(self.cwd)
                                     and self.cwd != os.getcwd() else None)
        return self._cls

    def defining(self) -> dict:
        """What a resume must keep: the problem (a file named from any folder) and its
        constructor arguments, defaults included."""
        defaults = {p.name: p.default for p in keyword_parameters(self.problem_class()) or ()
                    if p.default is not inspect.Parameter.empty}
        return {"problem": resolve_spec(self.problem, self.cwd),
                "arguments": as_read_back({**defaults, **self.params})}

    def resolved(self) -> RunSpec:
        """This spec with the problem's defaults where it gives none; its strategy built
        once, to say which refused option is the problem's default, not the user's."""
        defaults = problem_defaults(self.problem_class())
        strategy = self.strategy or defaults.get("strategy", DEFAULT)
        options = dict(defaults.get("strategy_options") or {}) if (
            strategy == defaults.get("strategy", DEFAULT)) else {}
        spec = dataclasses.replace(
            self, strategy=strategy, strategy_options={**options, **self.strategy_options},
            population=self.population or defaults["population"],
            sigma=self.sigma or defaults["sigma"],
            generations=self.generations or defaults["generations"],
            seed=self.seed or 0)
        spec._cls = self.problem_class()
        try:
            strategy_from(strategy, spec.population, spec.sigma, spec.strategy_options)
        except SettingError as exc:
            if exc.setting not in options or exc.setting in self.strategy_options:
                raise
            default = literal(f"{exc.setting}={exc.value!r}: {self.problem}'s default")
            raise SettingError(exc.setting, exc.value, exc.rule, f"{exc.fix} ({default}; "
                               f"{{strategy_options}} sets another)".lstrip()) from None
        return spec

    def build_agent(self, score_kwargs: Mapping[str, Any] | None = None) -> Any:
        """The problem's agent, its initial weights drawn from the seed; ``score_kwargs``:
        what its run will pass to ``score()``, checked (None: not to be scored here)."""
        agent = build_problem(self.problem_class(), self.params, self.seed or 0, self.problem)
        misfit = None if score_kwargs is None else score_kwargs_misfit(agent, score_kwargs)
        check("score_kwargs", score_kwargs, misfit is None, f"do not fit {literal(misfit)}",
              "give its arguments defaults, take them in __init__ (set by {params}), or "
              "pass them to es_search.run()", got=False)
        return agent


def load_run(out: Any) -> Any:
    """The :class:`~es_search.Result` of a run written by ``es-search run PROBLEM --out
    DIR`` or ``es_search.run(..., out=DIR)``, its agent rebuilt from the run's spec:
    ``load_run("runs/cartpole").chosen_agent().test_scores()``."""
    from .result import Result
    return Result.load(out, RunSpec.load(out).build_agent())
