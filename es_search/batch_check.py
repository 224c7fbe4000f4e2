"""``check_score_batch``: does an agent's ``score_batch`` score each row on its own?

A run with batching equals the run without it only when a row's score depends on its
weights, its seed and ``score_kwargs`` alone. Two easy mistakes break that: randomness
from a stream the group shares, and statistics across the group. This check scores the
same candidates in several groupings (and through ``score()``) and names any that differ.

Example::

    import es_search
    from es_search.problems import load_problem

    agent = load_problem("pendulum")()
    scores = es_search.check_score_batch(agent, population=8)   # raises if a row differs
"""
from __future__ import annotations

import math
from typing import Any, Mapping

from .agent import Agent
from .batched import group_size, has_score_batch
from .candidates import Candidate
from .checks import (check_int, check_is_agent, check_number, check_positive_float,
                     check_score_kwargs, check_seed)
from .scores import NotAScore, same_score
from .seeding import preserved_global_rngs, task_seed
from .worker import Payload, run_group, score_alone


_HOW_TO_FIX = (
    "A row's score must depend on params row i, seeds[i] and score_kwargs only: draw "
    "row i's randomness from es_search.batched.candidate_rngs(seeds)[i] (the global RNGs "
    "are seeded once per group), compute no statistics across rows, and make score() "
    "compute what one row computes. (Runs stay identical for any worker count either "
    "way, but change with score_batch_size and differ from the per-candidate path.)")


class ScoreBatchMismatch(ValueError):
    """``score_batch`` gave a candidate a score that depends on the rest of its group
    (or differs from ``score()``)."""


def check_score_batch(agent: Agent, *, population: int = 8, sigma: float = 0.1,
                      seed: int = 0, score_kwargs: Mapping[str, Any] | None = None,
                      rtol: float = 1e-6, atol: float = 1e-9) -> list[float]:
    """Score ``population`` candidates (generation 0's, jittered with ``sigma``) as one
    group, as two, one by one and through the agent's own ``score()`` if any; raise
    :class:`ScoreBatchMismatch` naming those whose scores differ, else return their
    scores. Scores agree within ``atol + rtol * |score|`` (a row's last bits may depend
    on the group's size); ``rtol=0, atol=0`` asks for identical rows."""
    check_is_agent(agent)
    if not has_score_batch(agent):
        raise TypeError(f"{type(agent).__name__} does not define score_batch(); there is "
                        f"nothing to check (its candidates are scored by score())")
    group_size(agent)  # a bad score_batch_size fails here, as run() would refuse it
    population = check_int("population", population, 2)
    sigma = check_positive_float("sigma", sigma)
    seed = check_seed(seed)
    for name, value in (("rtol", rtol), ("atol", atol)):
        check_number(name, value, "a number >= 0", lambda v: v >= 0)
    check_score_kwargs(agent, dict(score_kwargs or {}))
    work = agent.clone()
    payload = Payload(work.get_flat(), dict(score_kwargs or {}), work.shared_state() or None)
    candidates = [Candidate("jitter", sigma)] * population
    half = population // 2
    layouts = {f"a group of {population}": [(0, population)],
               f"groups of {half} and {population - half}": [(0, half), (half, population)],
               "groups of one": [(i, i + 1) for i in range(population)]}
    scored: dict[str, list[float]] = {}
    with preserved_global_rngs():
        for name, bounds in layouts.items():
            scored[name] = []
            for a, b in bounds:
                try:
                    scored[name] += run_group(work, payload, candidates[a:b], seed, 0, a)[0]
                except NotAScore:
                    raise
                except Exception as exc:
                    raise ScoreBatchMismatch(_raised(work, payload, candidates, seed, a, b,
                                                     name, exc)) from exc
        if has_own_score(agent):
            scored["score()"] = score_alone(work, payload, candidates, seed, 0, 0)[0]
    reference = scored[f"a group of {population}"]
    differ = [i for i in range(population)
              if not all(_close(s[i], reference[i], rtol, atol) for s in scored.values())]
    if differ:
        lines = [f"  candidate {i} (task seed {task_seed(seed, 0, i)}): "
                 + ", ".join(f"{s[i]!r} in {name}" for name, s in scored.items())
                 for i in differ[:3]]
        more = f"\n  ... and {len(differ) - 3} more" if len(differ) > 3 else ""
        grouped = [s for name, s in scored.items() if name != "score()"]
        if all(_close(s[i], reference[i], rtol, atol) for s in grouped for i in differ):
            headline = (f"{type(agent).__name__}.score_batch() and its score() disagree on "
                        f"{len(differ)} of {population} candidates (score_batch gives each "
                        f"the same score in every grouping):\n")
            fix = ("Make score() compute what score_batch() computes for one row (or "
                   "delete score(): a group of one is then scored through score_batch()).")
        else:
            headline = (f"{type(agent).__name__}.score_batch() scores {len(differ)} of "
                        f"{population} candidates differently depending on the rest of "
                        f"the call:\n")
            fix = _HOW_TO_FIX + _jitter_note(agent)
        raise ScoreBatchMismatch(headline + "\n".join(lines) + more + "\n" + fix)
    return reference


def _jitter_note(agent: Agent) -> str:
    """A note for an agent whose ``jitter_weights()`` may change more than ``params``."""
    from .agent import Agent as Base
    if type(agent).jitter_weights is Base.jitter_weights:
        return ""
    return (f"\n{type(agent).__name__} overrides jitter_weights(): score_batch() gets each "
            f"candidate's evolved parameters (params), nothing else; a buffer or attribute "
            f"that jitter_weights() changes holds the last candidate's value for the whole "
            f"group. Let jitter_weights() change evolved parameters only, or set "
            f"score_batch_size = 0.")


def _raised(agent: Agent, payload: Payload, candidates: list, seed: int, a: int, b: int,
            layout: str, exc: Exception) -> str:
    """What to say when ``score_batch`` raised on candidates ``a`` to ``b - 1``: which
    raise alone, or that the group does."""
    culprits = []
    for i in range(a, b):
        try:
            run_group(agent, payload, candidates[i:i + 1], seed, 0, i)
        except Exception:  # noqa: BLE001 - named below
            culprits.append(i)
    what = f"{type(exc).__name__}: {exc}"
    name = type(agent).__name__
    if culprits:
        return (f"{name}.score_batch() raised ({what}) in {layout}; alone, candidate"
                f"{'s' if len(culprits) > 1 else ''} "
                + ", ".join(f"{i} (task seed {task_seed(seed, 0, i)})" for i in culprits)
                + " raise too: score_batch() fails on those rows (a run stops there with "
                  "a ScoreError naming them, or with on_error='worst' scores them -inf)")
    return (f"{name}.score_batch() raised ({what}) on candidates {a}-{b - 1} together "
            f"in {layout}, though each of them scores alone: the group as a whole is at "
            f"fault (its size, or something computed across its rows)")


def has_own_score(agent: Agent) -> bool:
    """Whether ``agent``'s class writes its own ``score()``."""
    return type(agent).score is not Agent.score


def _close(a: float, b: float, rtol: float, atol: float) -> bool:
    if same_score(a, b):
        return True
    return math.isfinite(a) and math.isfinite(b) and abs(a - b) <= atol + rtol * abs(b)
