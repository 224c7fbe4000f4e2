"""The unit of evolution: a ``torch.nn.Module`` with a ``score()``."""
from __future__ import annotations

import contextlib
import copy
import os
from typing import Any, Mapping, Sequence

import numpy as np
import torch

from .scores import as_scores


class Agent(torch.nn.Module):
    """Base class for everything es_search evolves. Subclass it and write ``score()``.

    Example::

        >>> import torch, es_search
        >>> class Quadratic(es_search.Agent):
        ...     def __init__(self):
        ...         super().__init__()
        ...         self.w = torch.nn.Parameter(torch.zeros(3), requires_grad=False)
        ...     def score(self):
        ...         return -float(((self.w - 3) ** 2).sum())
        >>> result = es_search.run(Quadratic(), generations=30, sigma=0.5, n_jobs=1,
        ...                        progress=False)
        >>> result.best_score > -27.0
        True

    What evolves: every floating-point parameter (``evolved_parameters()``; override it
    to evolve a subset). ``requires_grad`` plays no role: no gradients are used.

    Randomness: before each candidate's ``jitter_weights()`` and ``score()`` run,
    es_search seeds Python's ``random``, NumPy's global RNG and torch's CPU generator
    with that task's own seed, and sets ``self.task_seed`` to it (an ``int`` below 2**64;
    ``None`` outside a run). ``score()`` runs under ``torch.no_grad()``. Use it to seed anything else, e.g.
    ``env.reset(seed=self.task_seed % 2**31)`` or ``np.random.default_rng(self.task_seed)``.

    Common random numbers: ``self.generation_seed`` (an ``int`` below 2**64; ``None``
    outside a run) is the same for every candidate of a generation and differs between
    generations. Seeding episodes from it instead of ``task_seed``
    (``env.reset(seed=self.generation_seed % 2**31)``) makes every candidate of a
    generation play the same episodes, so their scores differ by their weights only.
    """

    task_seed: int | None = None
    generation_seed: int | None = None

    #: candidates per ``score_batch()`` call when the agent defines one (0: score them
    #: one by one with ``score()``). A fixed number, whatever the worker count.
    score_batch_size: int = 32

    # ------------------------------------------------------------------ the user's part
    def score(self, **kwargs: Any) -> float:
        """Return this agent's fitness, higher is better. ``kwargs`` are the run's
        ``score_kwargs``.

        An agent that defines only ``score_batch()`` need not write it: the default
        scores the agent's own weights as a group of one (:func:`score_one`).
        """
        if has_score_batch(self):
            return score_one(self, **kwargs)
        raise NotImplementedError(
            f"{type(self).__name__} must implement score(self, **kwargs) -> float")

    def score_batch(self, params: Mapping[str, torch.Tensor], seeds: Sequence[int],
                    **kwargs: Any) -> Sequence[float]:
        """Optional: score a group of candidates in one call; one score per candidate.

        - ``params``: dict name -> tensor, each evolved parameter (``evolved_parameters()``)
          of the group's candidates stacked along a new leading dimension: row ``i`` is
          candidate ``i``. Each candidate was built exactly as for ``score()`` (the
          centre, then its seeded ``jitter_weights()`` or noise), then stacked.
        - ``seeds``: the candidates' task seeds (ints below 2**64), in row order. Draw
          candidate ``i``'s randomness from ``seeds[i]`` only
          (``es_search.batched.candidate_rngs(seeds)``), never from a stream shared by
          the group: its score must not depend on which others share its group.
        - ``kwargs``: the run's ``score_kwargs``.
        - returns a list, 1-D array or tensor of ``len(seeds)`` real numbers, in order.

        The engine calls it on groups of ``score_batch_size`` candidates cut at fixed
        indices (group ``g`` holds candidates ``[g * size, (g + 1) * size)``, the last
        one possibly smaller; a remainder of at most ``size // 4``, such as a hill
        climber's re-evaluated parent, joins the last group, which then holds up to
        ``1.25 * size``), the same groups whatever ``n_jobs`` or backend, so runs
        stay identical for any worker count even when a row's last bits depend on the
        group's size (e.g. a batched matrix product). It runs under ``torch.no_grad()``
        with the global RNGs seeded from the group's first task seed; ``self`` holds the
        generation's centre (and shared state; anything else that an overridden
        ``jitter_weights()`` changes holds the group's last candidate's value, so such
        a ``jitter_weights`` should change evolved parameters only), ``self.task_seed`` is None and
        ``self.generation_seed`` is the generation's. Shared statistics: ``task_report()``
        is called once after each ``score_batch()``; its report stands for the whole group
        (at the group's first candidate, None at the others). Agents without it (or with
        ``score_batch_size = 0``) are scored one candidate per ``score()`` call.
        ``es_search.batched.vmap_call(self, params, x)`` runs the agent's ``forward``
        over all rows at once. Make ``score()`` compute what one row computes (the
        default ``score()`` does exactly that): failures are replayed, and a failing
        group is re-scored, one candidate at a time through ``score()``.
        ``es_search.check_score_batch(agent)`` checks all this on a few candidates.

        Example (a linear model scored on a data set ``x``, ``y``)::

            def score_batch(self, params, seeds):
                pred = es_search.batched.vmap_call(self, params, x)  # (group, n)
                return -((pred - y) ** 2).mean(dim=1)

            def forward(self, x):
                return self.linear(x).squeeze(-1)
        """
        raise NotImplementedError(f"{type(self).__name__} does not define score_batch()")

    # ------------------------------------------------------------------ shared statistics
    # Optional: state that is not evolved but learnt from the scoring tasks themselves,
    # e.g. running observation statistics. The engine keeps it worker-count invariant:
    #   1. a worker calls ``task_report()`` after each ``score()`` and sends it back
    #      with the score;
    #   2. after each generation the main process calls ``merge_reports(reports)`` with
    #      the generation's reports *in candidate order* (whichever worker ran them);
    #   3. ``shared_state()`` then travels to the workers with the next generation's
    #      centre (``load_shared_state`` there), and is saved in the checkpoint and with
    #      the best weights (``best_weights.pt``, ``Result.best_weights``).
    # The defaults do nothing, so agents without statistics pay nothing.

    def task_report(self) -> Any:
        """What the task just scored reports to the main process (picklable), or None.

        Called in the worker right after ``score()``; e.g. the count, mean and M2 of the
        observations the task saw and its environment steps.
        """
        return None

    def merge_reports(self, reports: list) -> Mapping[str, float] | None:
        """Fold one generation's reports (in candidate order, ``None`` for tasks that
        reported nothing or failed) into this agent's shared state.

        Return counters to accumulate in the history (e.g. ``{"steps": 12_000}`` gives
        each record a cumulative ``steps``), or None.
        """
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
        """Figures of this agent measured outside the search, by name (default: none).

        ``es-search run`` prints them for the best weights and the final centre at the end
        of a run and writes them to ``test.json`` in its folder; ``es-search test DIR``
        measures them again (under ``torch.no_grad()``, as ``score()``).
        Override it with what says whether a trained agent is good, on data or episodes
        the search never scored: held-out accuracy, true returns of fresh episodes. The
        built-in problems do (``digits``: accuracies; control tasks: test returns).
        """
        return {}

    # ------------------------------------------------------------------ weights as dicts
    def evolved_parameters(self) -> list[tuple[str, torch.nn.Parameter]]:
        """The ``(name, parameter)`` pairs that evolve, in a fixed order."""
        return [(name, p) for name, p in self.named_parameters() if p.is_floating_point()]

    def get_weights(self) -> dict[str, torch.Tensor]:
        """Independent copies of the evolved parameters, by name."""
        return {name: p.detach().clone() for name, p in self.evolved_parameters()}

    def set_weights(self, weights: Mapping[str, Any]) -> None:
        """Load a dict of weights; a subset of names is fine.

        Names may be evolved parameters or any other entry of ``state_dict()`` (as
        ``load_state_dict(strict=False)`` allows); values are tensors or array-likes of
        the entry's shape.
        """
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
        """Perturb the evolved parameters in place with N(0, sigma^2) noise.

        Draws from torch's global generator, which es_search seeds per task. Override
        it for other moves: the blog post's steps in {-1, 0, +1} are
        ``p.add_(sigma * (torch.randint(3, p.shape) - 1))``.
        """
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
        if not params:
            return np.zeros(0)
        return torch.cat(params).numpy()

    def set_flat(self, vector: np.ndarray) -> None:
        """Load a vector laid out as ``get_flat()`` returns it."""
        vector = torch.as_tensor(np.asarray(vector))
        params = [p for _, p in self.evolved_parameters()]
        size = sum(p.numel() for p in params)
        if vector.ndim != 1 or vector.numel() != size:
            raise ValueError(f"{type(self).__name__} evolves {size} values; got a vector of "
                             f"shape {tuple(vector.shape)}")
        offset = 0  # (no_grad() costs more than the copies of a small agent: only if needed)
        with torch.no_grad() if torch.is_grad_enabled() else contextlib.nullcontext():
            for p in params:
                n = p.numel()
                p.copy_(vector[offset:offset + n].view_as(p))
                offset += n

    def clone(self) -> "Agent":
        """An independent deep copy."""
        return copy.deepcopy(self)


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


def has_score_batch(agent: Any) -> bool:
    """Whether ``agent`` defines its own ``score_batch`` (the base class's does not)."""
    method = getattr(type(agent), "score_batch", None)
    return method is not None and method is not Agent.score_batch


def own_params(agent: Any) -> dict[str, torch.Tensor]:
    """``agent``'s evolved weights as a group of one (``score_batch``'s ``params``)."""
    return {name: p.detach().unsqueeze(0) for name, p in agent.evolved_parameters()}


def score_one(agent: Any, **kwargs: Any) -> float:
    """``agent.score_batch`` on a group of one: the agent's own weights and task seed.

    ``Agent.score()`` does this for agents that define only ``score_batch``; it is what
    the per-candidate path (``score_batch_size = 0``, ``replay_task``,
    ``es_search.evaluate``) runs.
    """
    seed = agent.task_seed if agent.task_seed is not None else 0
    return as_scores(agent.score_batch(own_params(agent), [seed], **kwargs), 1, agent)[0]
