"""Checking, before any work, that an agent can be copied and sent to worker processes:
:func:`check_agent` names the attribute (a lock, an open file) that cannot be pickled.

Example::

    >>> import threading, torch, es_search
    >>> from es_search.pickling import check_agent
    >>> class Locked(es_search.Agent):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.w = torch.nn.Parameter(torch.zeros(2))
    ...         self.lock = threading.Lock()
    >>> check_agent(Locked(), workers=True)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    es_search.pickling.UnpicklableAgentError: Locked cannot be copied: its attribute agent.lock (a _thread.lock) cannot be pickled ...
"""
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
                for name, child in value.items():
                    yield f"{path}.{name}", child
            else:
                yield f"{path}.{key}", value
    elif isinstance(obj, dict):
        for key, value in obj.items():
            yield f"{path}[{key!r}]", value
    elif isinstance(obj, (list, tuple, set, frozenset)):
        for i, value in enumerate(obj):
            yield f"{path}[{i}]", value
    elif hasattr(obj, "__dict__") and not isinstance(obj, type):
        for key, value in vars(obj).items():
            yield f"{path}.{key}", value


def find_culprit(obj: Any, dumps: Callable[[Any], Any], path: str = "agent",
                 depth: int = 0) -> tuple[str, Any, BaseException] | None:
    """The deepest ``(path, object, error)`` below ``obj`` that ``dumps`` refuses; None
    if ``dumps(obj)`` works."""
    try:
        dumps(obj)
        return None
    except Exception as exc:
        error = exc
    if depth < _MAX_DEPTH:
        for child_path, child in _children(obj, path):
            found = find_culprit(child, dumps, child_path, depth + 1)
            if found is not None:
                return found
    return path, obj, error


def _kind(obj: Any) -> str:
    """``obj``'s type as a message names it (``_thread.lock``, ``generator``)."""
    return f"{type(obj).__module__}.{type(obj).__qualname__}".replace("builtins.", "")


def _complain(agent: Any, what: str, dumps: Callable[[Any], Any], why: str) -> None:
    found = find_culprit(agent, dumps)
    if found is None:  # pragma: no cover - failed once, works now: nothing to name
        return
    path, obj, error = found
    raise UnpicklableAgentError(
        f"{type(agent).__name__} cannot be {what}: its attribute {path} (a {_kind(obj)}) "
        f"cannot be pickled ({type(error).__name__}: {error}). {why} Create such objects "
        f"lazily inside score() (e.g. `if self.env is None: self.env = make_env()`, with "
        f"`self.env = None` in __init__), or leave them out of the pickle with "
        f"__getstate__.") from None


def check_agent(agent: Any, *, workers: bool) -> None:
    """Raise :class:`UnpicklableAgentError` naming the attribute that stops ``agent``
    from being deep-copied or, when ``workers``, cloudpickled."""
    try:
        copy.deepcopy(agent)
    except Exception:
        _complain(agent, "copied", copy.deepcopy,
                  "es_search copies the agent for every run, also with n_jobs=1.")
    if workers:
        try:
            cloudpickle.dumps(agent)
        except Exception:
            _complain(agent, "sent to worker processes", cloudpickle.dumps,
                      "With n_jobs != 1 each worker receives a pickled copy of the agent.")


def check_score_kwargs_pickle(score_kwargs: Any, *, workers: bool, saved: bool) -> None:
    """Raise a TypeError naming the value of ``score_kwargs`` that cannot be pickled,
    when ``workers`` or the run folder (``saved``) need them pickled."""
    if not score_kwargs or not (workers or saved):
        return
    try:
        cloudpickle.dumps(dict(score_kwargs))
        return
    except Exception:
        found = find_culprit(dict(score_kwargs), cloudpickle.dumps, "score_kwargs")
    if found is None:  # pragma: no cover - failed once, works now: nothing to name
        return
    path, obj, error = found
    why = " and ".join(part for part, needed in (
        ("each worker receives them pickled (n_jobs != 1)", workers),
        ("the run folder saves them (out=)", saved)) if needed)
    raise TypeError(
        f"{path} (a {_kind(obj)}) cannot be pickled ({type(error).__name__}: {error}), and "
        f"{why}. Pass values that pickle (data, numbers, functions), or build such an "
        f"object inside score() from ones that do.") from None
