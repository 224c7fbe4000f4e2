"""The unit of evolution: a ``torch.nn.Module`` with a ``score()``."""
from __future__ import annotations

import contextlib
import copy
import inspect
import os
import sys
from typing import Any, Mapping, Sequence

import numpy as np
import torch

from .scores import as_scores


class Agent(torch.nn.Module):
    """Base class for everything es_search evolves. Subclass it and write ``score()``::

        >>> import torch, es_search
        >>> class Quadratic(es_search.Agent):
        ...     def __init__(self):
        ...         super().__init__()
        ...         self.w = torch.nn.Parameter(torch.zeros(3), requires_grad=False)
        ...     def score(self):
        ...         return -float(((self.w - 3) ** 2).sum())
        >>> es_search.run(Quadratic(), generations=30, sigma=0.5, n_jobs=1,
        ...               progress=False).best_score > -27.0
        True

    Every floating-point parameter evolves (override ``evolved_parameters()`` to choose),
    without gradients (``score()`` runs under ``torch.no_grad()``).
    Before each candidate's ``jitter_weights()`` and ``score()``, es_search seeds
    ``random``, NumPy and torch with the task's seed and sets ``self.task_seed`` to it
    (None outside a run); ``self.generation_seed`` is the same for a whole generation.
    ``self.selecting`` is True in the end's selection test (``Result.chosen``): a score
    shaped for the search (a bonus removed, rewards clipped) returns what the user tests.
    """

    task_seed: int | None = None
    generation_seed: int | None = None
    selecting: bool = False

    #: candidates per ``score_batch()`` call (0: one ``score()`` call each)
    score_batch_size: int = 32

    def __new__(cls, *args: Any, **kwargs: Any) -> "Agent":
        agent = super().__new__(cls)  # its arguments by name, if plain: a run's spec
        object.__setattr__(agent, "_arguments", _named(cls, args, kwargs))
        return agent

    # ------------------------------------------------------------------ the user's part
    def score(self, **kwargs: Any) -> float:
        """This agent's fitness, higher is better; ``kwargs``: the run's ``score_kwargs``
        (default: a group of one through ``score_batch()``)."""
        if has_score_batch(self):
            return score_one(self, **kwargs)
        raise NotImplementedError(
            f"{type(self).__name__} must implement score(self, **kwargs) -> float")

    def score_batch(self, params: Mapping[str, torch.Tensor], seeds: Sequence[int],
                    **kwargs: Any) -> Sequence[float]:
        """Optional: one score per candidate of a group (README: Batched scoring).
        ``params``: name -> tensor, each evolved parameter of the group stacked along a
        new leading dimension (row ``i``: candidate ``i``); ``seeds``: their task seeds.
        Row ``i``'s randomness comes from ``seeds[i]`` only (``batched.candidate_rngs``),
        and ``score()`` computes what one row computes (failures are replayed through
        it); ``self`` holds the generation's centre (``task_seed`` None), and
        ``task_report()`` is called once per group. ``es_search.check_score_batch``
        checks this."""
        raise NotImplementedError(f"{type(self).__name__} does not define score_batch()")

    # ------------------------------------------------------------------ shared statistics
    # state learnt from the tasks: task_report() in the worker, merge_reports() in the
    # main process in candidate order, shared_state() sent with the next centre

    def task_report(self) -> Any:
        """What the task just scored reports to the main process (picklable), or None."""
        return None

    def merge_reports(self, reports: list) -> Mapping[str, float] | None:
        """Fold one generation's reports (None: nothing, or failed) into the shared state;
        return counters the history accumulates (``{"steps": 12_000}``), or None."""
        return None

    def shared_state(self) -> dict[str, torch.Tensor]:
        """The non-evolved state the workers need, by ``state_dict()`` name (default {})."""
        return {}

    def load_shared_state(self, state: Mapping[str, Any]) -> None:
        """Load what ``shared_state()`` returned (default: ``set_weights``)."""
        if state:
            self.set_weights(state)

    # ------------------------------------------------------------------ after the search
    def test_scores(self) -> dict[str, float]:
        """Figures measured outside the search, by name (default: none), e.g. held-out
        accuracy (``test.json`` of ``es-search run`` and ``es-search test DIR``)."""
        return {}

    # ------------------------------------------------------------------ weights as dicts
    def evolved_parameters(self) -> list[tuple[str, torch.nn.Parameter]]:
        """The ``(name, parameter)`` pairs that evolve, in a fixed order."""
        return [(name, p) for name, p in self.named_parameters() if p.is_floating_point()]

    def get_weights(self) -> dict[str, torch.Tensor]:
        """Independent copies of the evolved parameters, by name."""
        return {name: p.detach().clone() for name, p in self.evolved_parameters()}

    def set_weights(self, weights: Mapping[str, Any]) -> None:
        """Load ``state_dict()`` entries (a subset is fine), tensors or array-likes."""
        if not isinstance(weights, Mapping):
            hint = (" (a saved file: agent.set_weights(torch.load(path)))"
                    if isinstance(weights, (str, os.PathLike)) else "")
            raise TypeError(f"set_weights() takes a dict of name -> tensor, "
                            f"not {type(weights).__name__}{hint}")
        state = self.state_dict(keep_vars=True)
        with torch.no_grad():
            for name, value in weights.items():
                if name not in state:
                    known = ", ".join(sorted(state)) or "none"
                    raise KeyError(f"{type(self).__name__} has no weight named {name!r} "
                                   f"(it has: {known})")
                target = state[name]
                value = torch.as_tensor(value, dtype=target.dtype)
                if value.shape != target.shape:
                    raise ValueError(f"weight {name!r} of {type(self).__name__} has shape "
                                     f"{tuple(target.shape)}, got {tuple(value.shape)}")
                target.copy_(value)

    def jitter_weights(self, sigma: float) -> None:
        """Add N(0, sigma^2) noise from torch's global generator (seeded per task) to the
        evolved parameters; override it for other moves."""
        with torch.no_grad():
            for _, p in self.evolved_parameters():
                p.add_(torch.randn_like(p), alpha=sigma)

    # ------------------------------------------------------------------ weights as vectors
    def num_evolved(self) -> int:
        """The number of evolved scalars."""
        return sum(p.numel() for _, p in self.evolved_parameters())

    def get_flat(self) -> np.ndarray:
        """The evolved parameters as one float64 vector (exact for float16/32/64)."""
        params = [p.detach().reshape(-1).to(torch.float64) for _, p in self.evolved_parameters()]
        return torch.cat(params).numpy() if params else np.zeros(0)

    def set_flat(self, vector: np.ndarray) -> None:
        """Load a vector laid out as ``get_flat()`` returns it."""
        vector = torch.as_tensor(np.asarray(vector))
        params = [p for _, p in self.evolved_parameters()]
        sizes = [p.numel() for p in params]
        if vector.ndim != 1 or vector.numel() != sum(sizes):
            raise ValueError(f"{type(self).__name__} evolves {sum(sizes)} values; got a "
                             f"vector of shape {tuple(vector.shape)}")
        # no_grad() costs more than the copies of a small agent: only if needed
        with torch.no_grad() if torch.is_grad_enabled() else contextlib.nullcontext():
            for p, part in zip(params, vector.split(sizes)):
                p.copy_(part.view_as(p))

    def clone(self) -> "Agent":
        """An independent deep copy."""
        return copy.deepcopy(self)


#: the start of the name of a module es_search loads from a file (``path/file.py:Class``)
FILE_MODULES = "es_search_user_"


class RunAtImport(BaseException):
    """Raised by ``run()`` at the top level of a file es_search imports for its agent
    class (es-search test, --resume, ``FILE.py:CLASS``): the import stops there, with
    what the file defines above the call, and the run is not started again. A
    BaseException: a script's ``except Exception`` does not catch it."""


def stop_import_at_run(frame: Any) -> None:
    """Raise :class:`RunAtImport` if ``frame`` (``run()``'s caller) runs, at any depth, in
    the import of a file es_search imports (its ``__name__`` is not ``__main__``): a
    script's top level, or its ``main()`` called from there."""
    while frame is not None:
        if frame.f_code.co_name == "<module>" and str(
                frame.f_globals.get("__name__")).startswith(FILE_MODULES):
            raise RunAtImport
        frame = frame.f_back


def class_home(cls: type) -> str | None:
    """``cls``'s module, or the file of the script run or es_search loaded it from, or of
    a module of the current folder (a script's ``from my_agents import Walker`` and
    ``es-search run my_agents.py:Walker`` name one class)."""
    where, module = cls.__module__, sys.modules.get(cls.__module__)
    if where == "__main__" and getattr(module, "__spec__", None) is not None:
        return module.__spec__.name  # python -m package.module
    path = getattr(module, "__file__", None)
    if where == "__main__" or where.startswith(FILE_MODULES) or (
            "." not in where and path and os.path.dirname(os.path.abspath(path)) == os.getcwd()):
        return path and os.path.abspath(path)
    return where


def class_path(cls: type) -> str:
    """``cls`` as a run's config names it: its :func:`class_home` (else module), its name."""
    return f"{class_home(cls) or cls.__module__}.{cls.__qualname__}"


def plain(value: Any, depth: int = 0) -> bool:
    """Whether JSON keeps ``value`` (short lists and str-keyed dicts, 3 levels deep)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return True
    items = value if type(value) in (list, tuple) else value.values() if (
        type(value) is dict and all(isinstance(key, str) for key in value)) else None
    return items is not None and depth < 3 and len(items) <= 64 and all(
        plain(item, depth + 1) for item in items)


def _named(cls: type, args: tuple, kwargs: dict) -> dict | None:
    """``cls(*args, **kwargs)``'s arguments by name, or None (not bound, or not plain)."""
    if not args and not kwargs:  # also a copy's or an unpickled agent's (its own follow)
        return {}
    try:
        bound = inspect.signature(cls).bind(*args, **kwargs)
    except (TypeError, ValueError):  # arguments __init__ refuses: it says so
        return None
    named: dict = {}
    for name, value in bound.arguments.items():
        kind = bound.signature.parameters[name].kind
        if kind is inspect.Parameter.VAR_POSITIONAL:
            return None
        named.update(value if kind is inspect.Parameter.VAR_KEYWORD else {name: value})
    return named if all(map(plain, named.values())) else None


def weights_of(agent: Agent, flat: Any, shared: Mapping[str, Any] | None = None
               ) -> dict[str, torch.Tensor]:
    """``agent``'s weights dict for the flat vector ``flat`` (as ``get_flat()`` lays it
    out), with copies of the ``shared`` state added; ``agent`` is left as it was."""
    current = agent.get_flat()
    agent.set_flat(flat)
    weights = agent.get_weights()
    agent.set_flat(current)
    if shared:
        weights.update({k: v.clone() if hasattr(v, "clone") else copy.deepcopy(v)
                        for k, v in shared.items()})
    return weights


def overrides(agent: Any, name: str) -> bool:
    """Whether the class of ``agent`` (an agent or a class) defines its own method
    ``name``, not :class:`Agent`'s."""
    method = getattr(agent if isinstance(agent, type) else type(agent), name, None)
    return method is not None and method is not getattr(Agent, name)


def has_score_batch(agent: Any) -> bool:
    """Whether ``agent`` defines its own ``score_batch`` (the base class's does not)."""
    return overrides(agent, "score_batch")


def own_params(agent: Any) -> dict[str, torch.Tensor]:
    """``agent``'s evolved weights as a group of one (``score_batch``'s ``params``)."""
    return {name: p.detach().unsqueeze(0) for name, p in agent.evolved_parameters()}


def score_one(agent: Any, **kwargs: Any) -> float:
    """``agent.score_batch`` on a group of one: the agent's own weights and task seed."""
    seed = agent.task_seed if agent.task_seed is not None else 0
    return as_scores(agent.score_batch(own_params(agent), [seed], **kwargs), 1, agent)[0]
