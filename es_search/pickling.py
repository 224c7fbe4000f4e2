"""Checking, before any work, that an agent can be copied and sent to worker processes:
:func:`check_agent` names the attribute (a lock, an open file) that cannot be pickled."""
from __future__ import annotations

import copy
from typing import Any, Callable

import torch

try:  # joblib >= 1.6 depends on cloudpickle; older joblib vendors it
    import cloudpickle
except ImportError:  # pragma: no cover
    from joblib.externals import cloudpickle

_MAX_DEPTH = 12


class UnpicklableAgentError(TypeError):
    """The agent (one of its attributes, named in the message) cannot be pickled."""


def _children(obj: Any, path: str):
    """``(path, child)`` pairs one level below ``obj`` (modules flattened by name)."""
    if isinstance(obj, torch.nn.Module):
        for key, value in vars(obj).items():
            if key in ("_modules", "_parameters", "_buffers") and isinstance(value, dict):
                yield from ((f"{path}.{name}", child) for name, child in value.items())
            else:
                yield f"{path}.{key}", value
    elif isinstance(obj, dict):
        yield from ((f"{path}[{key!r}]", value) for key, value in obj.items())
    elif isinstance(obj, (list, tuple, set, frozenset)):
        yield from ((f"{path}[{i}]", value) for i, value in enumerate(obj))
    elif hasattr(obj, "__dict__") and not isinstance(obj, type):
        yield from ((f"{path}.{key}", value) for key, value in vars(obj).items())


def _culprit(obj: Any, dumps: Callable[[Any], Any], path: str, depth: int = 0) -> str | None:
    """``"PATH (a TYPE) cannot be pickled (ERROR)"`` for the deepest part of ``obj`` that
    ``dumps`` refuses (None: ``dumps(obj)`` works)."""
    try:
        dumps(obj)
        return None
    except Exception as exc:
        error = exc
    if depth < _MAX_DEPTH:
        for child_path, child in _children(obj, path):
            found = _culprit(child, dumps, child_path, depth + 1)
            if found is not None:
                return found
    kind = f"{type(obj).__module__}.{type(obj).__qualname__}".replace("builtins.", "")
    return f"{path} (a {kind}) cannot be pickled ({type(error).__name__}: {error})"


def check_agent(agent: Any, *, workers: bool) -> None:
    """Raise :class:`UnpicklableAgentError` naming the attribute that stops ``agent``
    from being deep-copied or, when ``workers``, cloudpickled."""
    checks = [("copied", copy.deepcopy,
               "es_search copies the agent for every run, also with n_jobs=1.")]
    if workers:
        checks.append(("sent to worker processes", cloudpickle.dumps,
                       "With n_jobs != 1 each worker receives a pickled copy of the agent."))
    for what, dumps, why in checks:
        culprit = _culprit(agent, dumps, "agent")
        if culprit is not None:
            raise UnpicklableAgentError(
                f"{type(agent).__name__} cannot be {what}: its attribute {culprit}. "
                f"{why} Create such objects lazily inside score() (e.g. `if self.env "
                f"is None: self.env = make_env()`, with `self.env = None` in "
                f"__init__), or leave them out of the pickle with __getstate__.")


def check_score_kwargs_pickle(score_kwargs: Any, *, workers: bool, saved: bool) -> None:
    """Raise a TypeError naming the value of ``score_kwargs`` that cannot be pickled,
    when ``workers`` or the run folder (``saved``) need them pickled."""
    culprit = (_culprit(dict(score_kwargs), cloudpickle.dumps, "score_kwargs")
               if score_kwargs and (workers or saved) else None)
    if culprit is None:
        return
    why = " and ".join(part for part, needed in (
        ("each worker receives them pickled (n_jobs != 1)", workers),
        ("the run folder saves them (out=)", saved)) if needed)
    raise TypeError(
        f"{culprit}, and {why}. Pass values that pickle (data, numbers, functions), or "
        f"build such an object inside score() from ones that do.")
