"""Argument checks that fail at the call, with a message that says how to fix it."""
from __future__ import annotations

import inspect
import math
import numbers
import os
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np
import torch

from .agent import Agent, has_score_batch, overrides
from .errors import SettingError


def check_is_agent(agent: Any) -> None:
    """Refuse anything but an :class:`~es_search.Agent` instance that scores."""
    name = type(agent).__name__
    if isinstance(agent, type) and issubclass(agent, Agent):
        raise TypeError(f"agent must be an instance of {agent.__name__}, got the class "
                        f"itself: pass {agent.__name__}(...)")
    if not isinstance(agent, Agent):
        raise TypeError(f"agent must be an es_search.Agent (a torch.nn.Module with a "
                        f"score() method), got {name}")
    if "_parameters" not in vars(agent):  # torch's own error names an attribute
        raise TypeError(f"{name} is not set up as a torch.nn.Module: its __init__ must "
                        f"call super().__init__() before anything else")
    if not overrides(agent, "score") and not has_score_batch(agent):
        raise TypeError(f"{name} does not define score(): write score(self) returning a "
                        f"number, higher is better (or score_batch(self, params, seeds) "
                        f"for groups of candidates)")


def check_evolved(agent: Agent) -> None:
    """Refuse an agent with nothing to evolve, or whose ``evolved_parameters()`` are not
    ``(name, tensor)`` pairs of its own floating-point ``state_dict()`` entries."""
    cls = type(agent).__name__
    method = f"{cls}.evolved_parameters()"
    try:
        pairs = list(agent.evolved_parameters())
    except TypeError:  # not iterable
        pairs = [None]
    if not all(isinstance(p, tuple) and len(p) == 2 for p in pairs):
        raise TypeError(f"{method} must return a list of (name, parameter) pairs, as "
                        f"named_parameters() gives them")
    state = agent.state_dict(keep_vars=True)
    for name, tensor in pairs:
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"{method} gave {name!r}: {type(tensor).__name__}, not a tensor")
        if state.get(name) is not tensor:
            owner = next((key for key, value in state.items() if value is tensor), None)
            fix = (f"it is {owner!r} there (e.g. self.a.named_parameters(prefix='a'))"
                   if owner else "register it as a Parameter or a buffer of the agent")
            raise ValueError(f"{method} names a tensor {name!r}, which is not the agent's "
                             f"state_dict() entry of that name: best weights are saved and "
                             f"loaded by these names, so give each its state_dict() name "
                             f"({fix})")
        if not tensor.is_floating_point():
            raise TypeError(f"{method} gives {name!r}, a {tensor.dtype} tensor: only "
                            f"floating-point tensors can evolve")
    names = [name for name, _ in pairs]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ValueError(f"{method} gives {repeated} more than once")
    if sum(t.numel() for _, t in pairs) == 0:
        skipped = [f"{name} ({p.dtype})" for name, p in agent.named_parameters()
                   if not p.is_floating_point()]
        also = (f"; its parameters {', '.join(skipped)} are not floating-point, and only "
                f"those evolve" if skipped else "")
        raise ValueError(f"{cls} has no evolved parameters, so there is nothing to "
                         f"search: give it a floating-point torch.nn.Parameter (or "
                         f"override evolved_parameters()){also}")


def check(name: str, value: Any, ok: Any, rule: str, fix: str = "", got: bool = True,
          error: type[SettingError] = SettingError) -> Any:
    """``value`` when ``ok`` holds, else ``error(name, value, rule, fix, got)`` (a
    :class:`SettingError`, or a subclass)."""
    if not ok:
        raise error(name, value, rule, fix, got)
    return value


def check_bool(name: str, value: Any) -> bool:
    return bool(check(name, value, isinstance(value, (bool, np.bool_)), "True or False"))


def check_choice(name: str, value: Any, choices: Any, note: str = "") -> Any:
    return check(name, value, isinstance(value, str) and value in choices,
                 f"one of {', '.join(map(repr, choices))}{note}{did_you_mean(value, choices)}")


def check_dict(name: str, value: Any, what: str) -> dict:
    """``value`` (None: empty) as a dict; ``what``: the rule."""
    return dict(check(name, value, value is None or isinstance(value, Mapping), what) or {})


def check_path(name: str, value: Any, what: str = "a folder path") -> Path:
    """``value`` (a non-empty str or path) as a Path, ``~`` expanded."""
    check(name, value, isinstance(value, (str, os.PathLike)) and os.fspath(value),
          f"{what} (str or pathlib.Path, not empty)")
    return Path(value).expanduser()


def _integral(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))


def check_int(name: str, value: Any, minimum: int, note: str = "",
              none_ok: bool = False) -> int | None:
    """``value`` as an int >= ``minimum`` (or None, with ``none_ok``); ``note`` explains
    the value, e.g. " (0: a linear policy)"."""
    if value is None and none_ok:
        return None
    also = " or None" if none_ok else ""
    return int(check(name, value, _integral(value) and value >= minimum,
                     f"an integer >= {minimum}{also}{note}"))


def check_number(name: str, value: Any, rule: str = "a finite number",
                 ok: Callable[[float], bool] = math.isfinite) -> float:
    """``value`` as a float if it is a real number (not a bool) that is ``ok``."""
    real = isinstance(value, numbers.Real) and not isinstance(value, bool)
    return float(check(name, value, real and ok(value), rule))


def check_positive_float(name: str, value: Any) -> float:
    return check_number(name, value, "a positive finite number",
                        lambda v: math.isfinite(v) and v > 0)


def check_n_jobs(value: Any) -> int:
    """joblib's meaning (-1 all cores, 1 a plain loop); None, joblib's default (an
    enclosing ``joblib.parallel_config``'s, else 1), is resolved here to an integer."""
    if value is None:
        import joblib
        return int(joblib.Parallel(n_jobs=None).n_jobs)
    return int(check("n_jobs", value, _integral(value) and value != 0,
                     "an integer other than 0 (0: no workers)",
                     "use {n_jobs=-1} for all cores or {n_jobs=1} for a plain loop in this "
                     "process"))


def check_seed(value: Any) -> int:
    """A run's seed: an integer >= 0 (never None: a run's seed is always recorded)."""
    return int(check("seed", value, _integral(value) and value >= 0,
                     "a non-negative integer"))


def check_score_kwargs(agent: Any, score_kwargs: Mapping) -> None:
    """Refuse ``score_kwargs`` that do not fit the scoring methods of ``agent``'s class."""
    misfit = score_kwargs_misfit(agent, score_kwargs)
    if misfit is not None:
        given = ", ".join(map(repr, score_kwargs)) or "none"
        raise TypeError(f"score_kwargs do not fit {misfit} (score_kwargs given: {given}); "
                        f"pass only the keywords it takes, or add them to its signature")


def score_kwargs_misfit(agent: Any, score_kwargs: Mapping) -> str | None:
    """Why ``score_kwargs`` do not fit a scoring method of ``agent``'s class, e.g.
    "NeedsData.score(data): missing a required argument: 'data'"; else None."""
    for name, leading in (("score", ()), ("score_batch", (None, None))):
        if not overrides(agent, name):
            continue
        try:
            signature = inspect.signature(getattr(agent, name))
        except (TypeError, ValueError):  # no signature to read
            continue
        try:
            signature.bind(*leading, **score_kwargs)
        except TypeError as exc:
            return f"{type(agent).__name__}.{name}{signature}: {exc}"
    return None


def keyword_parameters(cls: type) -> list[inspect.Parameter] | None:
    """The keyword parameters ``cls(...)`` takes, following ``**kwargs`` up the MRO's
    ``__init__`` methods; None when it takes any."""
    found: dict[str, inspect.Parameter] = {}
    for klass in cls.__mro__:
        if "__init__" not in vars(klass):
            continue
        parameters = inspect.signature(klass.__init__).parameters.values()
        for p in parameters:
            if p.name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                found.setdefault(p.name, p)
        if all(p.kind is not p.VAR_KEYWORD for p in parameters):
            return list(found.values())
    return None


def check_keywords(cls: type, given: Any, owner: str, kind: str, error: type = TypeError,
                   hint: str = "", skip: tuple = ()) -> None:
    """Refuse a keyword of ``given`` that ``cls(...)`` does not take, naming ``owner``'s
    ``kind``s."""
    parameters = keyword_parameters(cls)
    known = [p.name for p in parameters or () if p.name not in skip]
    for name in given if parameters is not None else ():
        if name not in known:
            raise error(f"{owner} has no {kind} {name!r}{did_you_mean(name, known)}{hint}; "
                        f"its {kind}s: {', '.join(known) or 'none'}")


def did_you_mean(name: Any, known: Any) -> str:
    """`` (did you mean 'CLOSEST'?)``, or "" when no name of ``known`` is close (case
    aside: ``'PGPE'`` finds ``'pgpe'``)."""
    import difflib
    lowered = {str(k).lower(): k for k in known}
    close = difflib.get_close_matches(str(name).lower(), list(lowered), n=1)
    return f" (did you mean {lowered[close[0]]!r}?)" if isinstance(name, str) and close else ""
