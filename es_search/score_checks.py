"""Checks of an agent's scores, in this process: :func:`check_repeatable` (does a score
depend on what the agent scored before? ``run()`` and ``evaluate()`` warn first) and
:func:`check_score_batch` (does ``score_batch`` score each row on its own?)."""
from __future__ import annotations

import hashlib
import math
from typing import Any, Mapping

import torch

from .agent import Agent, overrides
from .batched import group_size, has_score_batch
from .candidates import Candidate
from .checks import (check_dict, check_int, check_evolved, check_is_agent, check_number,
                     check_positive_float, check_score_kwargs, check_seed)
from .errors import literal, render, warn_user
from .pickling import check_agent, cloudpickle
from .scores import NotAScore, same_score
from .seeding import in_process_tasks, task_seed
from .settings import SCORE_KWARGS, recorded
from .worker import Payload, run_group, run_task, score_alone


class UnrepeatableScoreWarning(RuntimeWarning):
    """An agent scored one candidate twice under one task seed and got two results."""


class ScoreBatchMismatch(ValueError):
    """``score_batch`` gave a candidate a score that depends on the rest of its group
    (or differs from ``score()``)."""


#: attributes of every ``nn.Module`` (torch's bookkeeping) and es_search's per-task seeds
_INTERNAL = frozenset(vars(torch.nn.Module())) | {"task_seed", "generation_seed",
                                                  "selecting"}


def check_repeatable(agent: Any, *, seed: int = 0,
                     score_kwargs: Mapping[str, Any] | None = None) -> str | None:
    """Score a copy of ``agent`` twice as the task ``(seed, -1, 0)``: None when the
    scores and ``task_report()`` agree bit for bit, else a message saying what differed
    and how to fix it. The global RNGs are kept; what ``score()`` raises propagates."""
    check_agent(agent, workers=True)  # as a run does: named, not pickle's TypeError
    problem = repeat_and_score(agent, seed=seed, score_kwargs=score_kwargs)[0]
    return problem and render(problem)


def warn_if_unrepeatable(agent: Any, seed: int,
                         score_kwargs: Mapping[str, Any] | None) -> None:
    """Warn when :func:`check_repeatable` finds a problem (an error is left to the first
    task, which names its seed)."""
    try:
        problem = repeat_and_score(agent, seed=seed, score_kwargs=score_kwargs)[0]
    except Exception:  # noqa: BLE001 - the first task reports it, with its seed
        return
    if problem:
        warn_user(problem, UnrepeatableScoreWarning, template=True)


def repeat_and_score(agent: Any, *, seed: int = 0,
                     score_kwargs: Mapping[str, Any] | None = None
                     ) -> tuple[str | None, float]:
    """:func:`check_repeatable`'s answer (a :func:`~es_search.errors.render` template)
    and the starting agent's score."""
    check_is_agent(agent)
    check_evolved(agent)  # as a run does: an agent with nothing to evolve is refused
    seed = check_seed(seed)
    score_kwargs = check_dict("score_kwargs", score_kwargs, SCORE_KWARGS)
    first = agent.clone()
    (a, report_a), (b, report_b) = _repeat(first, seed, score_kwargs, times=2)
    same = same_score(a, b)
    if same and _digest(report_a) == _digest(report_b):
        return None, a
    once = agent.clone()  # once against twice: what the second call changed, not the first
    try:
        _repeat(once, seed, score_kwargs, times=1)
        before = _state(once)
        changed = [name for name, digest in _state(first).items()
                   if before.get(name) != digest]
    except Exception:  # noqa: BLE001 - the message goes without the names
        changed = []
    what = (f"its score() gave {a!r} and then {b!r}" if not same else
            "its task_report() differed (the scores did not)")
    text = (f"{type(agent).__name__} is not repeatable: scored twice in a row under the "
            f"same task seed (one copy of the starting agent), {what}. Its runs then "
            f"change with n_jobs and with which worker scores which candidate (each "
            f"worker keeps one agent for all its tasks). ")
    if changed:
        text += f"Changed in the agent between the two calls: {literal(', '.join(changed))}. "
    else:
        text += ("Nothing in the agent changed between the two calls, so the score draws "
                 "on something outside it: the clock, a random generator of its own that "
                 "es_search does not seed (e.g. numpy.random.default_rng() without a "
                 "seed), a file, another process. ")
    return text + (
        "Fix: reset such state at the start of score() (or keep it in local variables), "
        "and draw randomness from the seeded global RNGs or self.task_seed. If scores are "
        "meant to vary, a run takes {repeat_check=False} to skip this check."), a


def _payload(agent: Agent, score_kwargs: Mapping[str, Any]) -> Payload:
    return Payload(agent.get_flat(), score_kwargs, dict(agent.shared_state()) or None)


def _repeat(agent: Any, seed: int, score_kwargs: dict, times: int) -> list[tuple[float, Any]]:
    """(score, report) of ``times`` runs of task ``(seed, -1, 0)``, as a run scores it."""
    payload, center = _payload(agent, score_kwargs), Candidate("center")
    with in_process_tasks():
        if group_size(agent):  # as the run scores it: score_batch, here a group of one
            return [(values[0], report) for values, report in (
                run_group(agent, payload, [center], seed, -1, 0) for _ in range(times))]
        return [run_task(agent, payload, center, seed, -1, 0) for _ in range(times)]


def _digest(value: Any) -> bytes | None:
    """A digest equal values share (tensors by ``settings.recorded``); None if unpicklable."""
    try:
        return hashlib.sha256(cloudpickle.dumps(recorded(value))).digest()
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


def check_score_batch(agent: Agent, *, population: int = 8, sigma: float = 0.1,
                      seed: int = 0, score_kwargs: Mapping[str, Any] | None = None,
                      rtol: float = 1e-6, atol: float = 1e-9) -> list[float]:
    """Score ``population`` candidates (generation 0's, jittered with ``sigma``) as one
    group, as two, one by one and through the agent's own ``score()`` if any; raise
    :class:`ScoreBatchMismatch` naming those whose scores differ, else return their
    scores. Scores agree within ``max(rtol * |score|, atol)`` (a row's last bits may
    depend on the group's size); ``rtol=0, atol=0`` asks for identical rows."""
    check_is_agent(agent)
    name = type(agent).__name__
    if not has_score_batch(agent):
        raise TypeError(f"{name} does not define score_batch(); there is nothing to "
                        f"check (its candidates are scored by score())")
    group_size(agent)  # a bad score_batch_size fails here, as run() would refuse it
    population = check_int("population", population, 2)
    sigma = check_positive_float("sigma", sigma)
    seed = check_seed(seed)
    for tolerance, value in (("rtol", rtol), ("atol", atol)):
        check_number(tolerance, value, "a number >= 0", lambda v: v >= 0)
    score_kwargs = check_dict("score_kwargs", score_kwargs, SCORE_KWARGS)
    check_score_kwargs(agent, score_kwargs)
    work = agent.clone()
    payload = _payload(work, score_kwargs)
    candidates = [Candidate("jitter", sigma)] * population
    half = population // 2
    layouts = {f"a group of {population}": [(0, population)],
               f"groups of {half} and {population - half}": [(0, half), (half, population)],
               "groups of one": [(i, i + 1) for i in range(population)]}
    scored: dict[str, list[float]] = {}
    with in_process_tasks():  # as the workers score them
        for layout, bounds in layouts.items():
            scored[layout] = []
            for a, b in bounds:
                try:
                    scored[layout] += run_group(work, payload, candidates[a:b], seed, 0, a)[0]
                except NotAScore:
                    raise
                except Exception as exc:
                    raise ScoreBatchMismatch(_raised(work, payload, candidates, seed, a, b,
                                                     layout, exc)) from exc
        if overrides(agent, "score"):
            scored["score()"] = score_alone(work, payload, candidates, seed, 0, 0)[0]
    reference = scored[f"a group of {population}"]

    def agree(layouts: list[list[float]], i: int) -> bool:
        return all(same_score(s[i], reference[i]) or math.isclose(
            s[i], reference[i], rel_tol=rtol, abs_tol=atol) for s in layouts)

    differ = [i for i in range(population) if not agree(list(scored.values()), i)]
    if not differ:
        return reference
    lines = [f"  candidate {i} (task seed {task_seed(seed, 0, i)}): "
             + ", ".join(f"{s[i]!r} in {layout}" for layout, s in scored.items())
             for i in differ[:3]]
    more = f"\n  ... and {len(differ) - 3} more" if len(differ) > 3 else ""
    grouped = [s for layout, s in scored.items() if layout != "score()"]
    if all(agree(grouped, i) for i in differ):
        headline = (f"{name}.score_batch() and its score() disagree on {len(differ)} of "
                    f"{population} candidates (score_batch gives each the same score in "
                    f"every grouping):\n")
        fix = ("Make score() compute what score_batch() computes for one row (or delete "
               "score(): a group of one is then scored through score_batch()).")
    else:
        headline = (f"{name}.score_batch() scores {len(differ)} of {population} candidates "
                    f"differently depending on the rest of the call:\n")
        fix = ("A row's score must depend on params row i, seeds[i] and score_kwargs only "
               "(else runs change with score_batch_size): draw row i's randomness from "
               "es_search.batched.candidate_rngs(seeds)[i] (the global RNGs are seeded once "
               "per group), compute no statistics across rows, and make score() compute "
               "what one row computes.")
        if overrides(agent, "jitter_weights"):
            fix += (f"\n{name} overrides jitter_weights(): score_batch() gets each "
                    f"candidate's evolved parameters (params), nothing else; a buffer or "
                    f"attribute that jitter_weights() changes holds the last candidate's "
                    f"value for the whole group. Let jitter_weights() change evolved "
                    f"parameters only, or set score_batch_size = 0.")
    raise ScoreBatchMismatch(headline + "\n".join(lines) + more + "\n" + fix)


def _raised(agent: Agent, payload: Payload, candidates: list, seed: int, a: int, b: int,
            layout: str, exc: Exception) -> str:
    """Why ``score_batch`` raised on candidates ``a`` to ``b - 1``: which raise alone."""
    culprits = []
    for i in range(a, b):
        try:
            run_group(agent, payload, candidates[i:i + 1], seed, 0, i)
        except Exception:  # noqa: BLE001 - named below
            culprits.append(i)
    what = f"{type(agent).__name__}.score_batch() raised ({type(exc).__name__}: {exc})"
    if culprits:
        return (f"{what} in {layout}; alone, candidate{'s' if len(culprits) > 1 else ''} "
                + ", ".join(f"{i} (task seed {task_seed(seed, 0, i)})" for i in culprits)
                + " raise too: score_batch() fails on those rows (a run stops there with "
                  "a ScoreError naming them, or with on_error='worst' scores them -inf)")
    return (f"{what} on candidates {a}-{b - 1} together in {layout}, though each of them "
            f"scores alone: the group as a whole is at fault (its size, or something "
            f"computed across its rows)")
