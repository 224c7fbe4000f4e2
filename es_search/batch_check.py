"""``check_score_batch``: does an agent's ``score_batch`` score each row on its own?

A run with batching equals the run without it only when a row's score depends on its
weights, its seed and ``score_kwargs`` alone; randomness from a stream the group shares,
or statistics across the group, break that. Example::

    from es_search.problems import load_problem
    scores = es_search.check_score_batch(load_problem("pendulum")())  # raises if a row differs
"""
from __future__ import annotations

import math
from typing import Any, Mapping

from .agent import Agent
from .batched import group_size, has_score_batch
from .candidates import Candidate
from .checks import (check_int, check_is_agent, check_number, check_positive_float,
                     check_score_kwargs, check_seed, has_own_score)
from .scores import NotAScore, same_score
from .seeding import preserved_global_rngs, task_seed
from .worker import Payload, run_group, score_alone


class ScoreBatchMismatch(ValueError):
    """``score_batch`` gave a candidate a score that depends on the rest of its group
    (or differs from ``score()``)."""


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
        if has_own_score(agent):
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
        fix = ("A row's score must depend on params row i, seeds[i] and score_kwargs only: "
               "draw row i's randomness from es_search.batched.candidate_rngs(seeds)[i] "
               "(the global RNGs are seeded once per group), compute no statistics across "
               "rows, and make score() compute what one row computes. (Runs stay "
               "identical for any worker count either way, but change with "
               "score_batch_size and differ from the per-candidate path.)")
        if type(agent).jitter_weights is not Agent.jitter_weights:
            fix += (f"\n{name} overrides jitter_weights(): score_batch() gets each "
                    f"candidate's evolved parameters (params), nothing else; a buffer or "
                    f"attribute that jitter_weights() changes holds the last candidate's "
                    f"value for the whole group. Let jitter_weights() change evolved "
                    f"parameters only, or set score_batch_size = 0.")
    raise ScoreBatchMismatch(headline + "\n".join(lines) + more + "\n" + fix)


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
    what = f"{type(agent).__name__}.score_batch() raised ({type(exc).__name__}: {exc})"
    if culprits:
        return (f"{what} in {layout}; alone, candidate{'s' if len(culprits) > 1 else ''} "
                + ", ".join(f"{i} (task seed {task_seed(seed, 0, i)})" for i in culprits)
                + " raise too: score_batch() fails on those rows (a run stops there with "
                  "a ScoreError naming them, or with on_error='worst' scores them -inf)")
    return (f"{what} on candidates {a}-{b - 1} together in {layout}, though each of them "
            f"scores alone: the group as a whole is at fault (its size, or something "
            f"computed across its rows)")
