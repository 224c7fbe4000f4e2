"""``check_repeatable``: does an agent's score depend on what it scored before?

A worker keeps one agent for all its tasks, so an agent that keeps state in ``self``
between ``score()`` calls (a counter, an environment reset without a seed) makes a run
change with ``n_jobs`` and scheduling. This check scores a copy of the starting agent
twice under one task seed and compares the scores and ``task_report()`` bit for bit;
``run()``, ``Evaluator`` and ``evaluate()`` call it first (``repeat_check=False`` skips
it) and warn with :class:`UnrepeatableScoreWarning`. Example::

    >>> import torch, es_search
    >>> class Counter(es_search.Agent):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.w = torch.nn.Parameter(torch.zeros(2))
    ...         self.calls = 0
    ...     def score(self):
    ...         self.calls += 1                  # state kept between score() calls
    ...         return -float((self.w ** 2).sum()) - self.calls
    >>> print(es_search.check_repeatable(Counter()))  # doctest: +ELLIPSIS
    Counter is not repeatable: ... Changed in the agent between the two calls: calls. ...
"""
from __future__ import annotations

import hashlib
from typing import Any, Mapping

import torch

from .batched import group_size
from .candidates import Candidate
from .checks import check_dict, check_is_agent, check_seed
from .errors import render, warn_user
from .interrupt import TimeLimit, time_limit
from .pickling import cloudpickle
from .scores import same_score
from .seeding import preserved_global_rngs
from .settings import SCORE_KWARGS, describe
from .worker import Payload, has_hooks, run_group, run_task, single_torch_thread


class UnrepeatableScoreWarning(RuntimeWarning):
    """An agent scored one candidate twice under one task seed and got two results."""


#: attributes of every ``nn.Module`` (torch's bookkeeping) and es_search's per-task seeds
_INTERNAL = frozenset(vars(torch.nn.Module())) | {"task_seed", "generation_seed"}


def check_repeatable(agent: Any, *, seed: int = 0,
                     score_kwargs: Mapping[str, Any] | None = None) -> str | None:
    """Score a copy of ``agent`` twice as the task ``(seed, -1, 0)``; None when both
    calls agree, else a message saying what differed and how to fix it. ``agent`` and
    the global RNGs are left as they were; what ``score()`` raises propagates."""
    problem = repeat_and_score(agent, seed=seed, score_kwargs=score_kwargs)[0]
    return problem and render(problem)


def warn_if_unrepeatable(agent: Any, seed: int, score_kwargs: Mapping[str, Any] | None,
                         task_timeout: float | None) -> None:
    """Warn when :func:`check_repeatable` finds a problem (an error is left to the first
    task, which names its seed); with a ``task_timeout`` the check gets three times it."""
    limit = None if task_timeout is None else 3 * task_timeout
    try:
        with time_limit(limit):
            problem = repeat_and_score(agent, seed=seed, score_kwargs=score_kwargs)[0]
    except TimeLimit:
        warn_user(f"the repeat check (the starting agent scored twice in this process, "
                  f"before the workers start) ran over 3 x {{task_timeout}} = {limit:g} s "
                  f"and was stopped; the run's own tasks are bounded by {{task_timeout}} in "
                  f"the workers ({{repeat_check=False}} skips the check)", template=True)
        return
    except Exception:  # noqa: BLE001 - the first task reports it, with its seed
        return
    if problem:
        warn_user(problem, UnrepeatableScoreWarning, template=True)


def repeat_and_score(agent: Any, *, seed: int = 0,
                     score_kwargs: Mapping[str, Any] | None = None
                     ) -> tuple[str | None, float]:
    """:func:`check_repeatable`'s answer, as a :func:`~es_search.errors.render` template,
    and the first of its two scores (the starting agent's)."""
    check_is_agent(agent)
    seed = check_seed(seed)
    score_kwargs = check_dict("score_kwargs", score_kwargs, SCORE_KWARGS)
    first = agent.clone()
    (a, report_a), (b, report_b) = _score(first, seed, score_kwargs, times=2)
    same = same_score(a, b)
    if same and _digest(report_a) == _digest(report_b):
        return None, a
    # what the second call changed: a copy after one call against ``first`` after two
    # (state created lazily by the first call is not blamed)
    once = agent.clone()
    try:
        _score(once, seed, score_kwargs, times=1)
        before = _state(once)
        changed = [name for name, digest in _state(first).items()
                   if before.get(name) != digest]
    except Exception:  # noqa: BLE001 - the message goes without the names
        changed = []
    what = (f"its score() gave {a!r} and then {b!r}" if not same else
            "its task_report() differed (the scores did not)")
    text = (f"{type(agent).__name__} is not repeatable: scored twice in a row under the "
            f"same task seed (one copy of the starting agent), {what}. Its scores depend "
            f"on what the agent scored before, so its runs change with n_jobs, the "
            f"backend and which worker scores which candidate (each worker keeps one "
            f"agent for all its tasks). ")
    if changed:  # names as a template's text: braces doubled
        names = ", ".join(changed).replace("{", "{{").replace("}", "}}")
        text += f"Changed in the agent between the two calls: {names}. "
    else:
        text += ("Nothing in the agent changed between the two calls, so the score draws "
                 "on something outside it: the clock, a random generator of its own that "
                 "es_search does not seed (e.g. numpy.random.default_rng() without a "
                 "seed), a file, another process. ")
    return text + (
        "Fix: reset such state at the start of score() (or keep it in local variables), "
        "and draw randomness from the seeded global RNGs or self.task_seed. If scores are "
        "meant to vary, pass {repeat_check=False} to skip this check (it costs two "
        "score() calls at the start)."), a


def _score(agent: Any, seed: int, score_kwargs: dict, times: int) -> list[tuple[float, Any]]:
    """(score, report) of ``times`` runs of task ``(seed, -1, 0)``, as a run scores it."""
    shared = (dict(agent.shared_state()) or None) if has_hooks(agent) else None
    payload = Payload(agent.get_flat(), score_kwargs, shared)
    center = Candidate("center")
    with preserved_global_rngs(), single_torch_thread():
        if group_size(agent):  # as the run scores it: score_batch, here a group of one
            return [(values[0], report) for values, report in (
                run_group(agent, payload, [center], seed, -1, 0) for _ in range(times))]
        return [run_task(agent, payload, center, seed, -1, 0) for _ in range(times)]


def _digest(value: Any) -> bytes | None:
    """A digest that equal values share (tensors by ``settings.describe``: their pickles
    hold storage keys); None when ``value`` cannot be pickled."""
    try:
        return hashlib.sha256(cloudpickle.dumps(describe(value))).digest()
    except Exception:  # noqa: BLE001 - an unpicklable value is not compared
        return None


def _state(agent: torch.nn.Module) -> dict[str, bytes | None]:
    """A digest per buffer and per plain attribute of every submodule (dotted names)."""
    state: dict[str, bytes | None] = {}
    for prefix, module in agent.named_modules():
        dot = f"{prefix}." if prefix else ""
        for name, buffer in module.named_buffers(recurse=False):
            state[dot + name] = _digest(buffer)
        for name, value in vars(module).items():
            if name not in _INTERNAL:
                state[dot + name] = _digest(value)
    return state
