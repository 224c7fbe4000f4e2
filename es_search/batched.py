"""Helpers for ``Agent.score_batch(self, params, seeds, **kwargs)``: ``params`` maps each
evolved parameter's name to the group's values stacked along a new leading dimension (row
``i``: candidate ``i``, task seed ``seeds[i]``); it returns one score per row, in order."""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np
import torch

from .agent import has_score_batch, own_params  # noqa: F401 (helpers)
from .checks import check, check_int
from .scores import as_scores  # noqa: F401 (a helper)
from .seeding import generators


def group_size(agent: Any) -> int:
    """The engine's group size for ``agent``: its ``score_batch_size`` (candidates per
    ``score_batch()`` call, whatever the workers; groups are cut at fixed candidate
    indices, ``worker.group_bounds``), 0 when it is scored per candidate."""
    if not has_score_batch(agent):
        return 0
    return check_int(f"{type(agent).__name__}.score_batch_size",
                     getattr(agent, "score_batch_size", 0), 0,
                     " (candidates per score_batch() call; 0 scores them one by one)")


def numpy_params(params: Mapping[str, torch.Tensor]) -> dict[str, np.ndarray]:
    """The stacked weights as float64 NumPy arrays (exact for float16/32/64)."""
    return {name: value.detach().to(torch.float64).numpy() for name, value in params.items()}


def candidate_rngs(seeds: Sequence[int], *key: int) -> list[np.random.Generator]:
    """One ``numpy.random.Generator`` per candidate: ``default_rng(SeedSequence(seeds[i],
    spawn_key=key))``, from its task seed alone, never the rest of the group. ``key``
    names the purpose (e.g. ``1`` for sampled actions): one candidate, several streams."""
    seeds = list(seeds)
    for i, s in enumerate(seeds):  # a float would be truncated to another's stream
        integer = isinstance(s, (int, np.integer)) and not isinstance(s, bool)
        if not integer or s < 0:
            raise (ValueError if integer else TypeError)(
                f"candidate_rngs() takes the task seeds score_batch() got (non-negative "
                f"integers); seeds[{i}] is {s!r}")
    return generators(seeds, key)


def vmap_call(module: torch.nn.Module, params: Mapping[str, torch.Tensor], *args: Any,
              in_dims: Any = None, chunk_size: int | None = None) -> Any:
    """``module(*args)`` once per candidate with its stacked weights ``params`` (other
    parameters and buffers as they are), the outputs stacked along a new leading
    dimension. ``args`` are shared unless ``in_dims`` (``torch.func.vmap``'s, for
    ``args``: ``(0,)`` when each candidate has its own first input) says otherwise."""
    from torch.func import functional_call, vmap
    names = dict(module.named_parameters())
    unknown = sorted(set(params) - set(names) - set(dict(module.named_buffers())))
    if unknown:
        raise KeyError(f"{type(module).__name__} has no parameter or buffer named "
                       f"{', '.join(map(repr, unknown))}")
    if in_dims is None:
        in_dims = (None,) * len(args)
    check("in_dims", in_dims, isinstance(in_dims, tuple) and len(in_dims) == len(args),
          f"a tuple with one entry per argument ({len(args)})")

    def one(p: Mapping[str, torch.Tensor], *inputs: Any) -> Any:
        return functional_call(module, dict(p), inputs)

    return vmap(one, in_dims=(0,) + in_dims, chunk_size=chunk_size)(dict(params), *args)
