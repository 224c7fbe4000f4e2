"""The agent on its way to the workers: pickled once per run as a skeleton (its evolved
parameters stripped), unpickled once per worker process and cached there with what the
run's calls share (the centre, the shared state, the ``score_kwargs``).
"""
from __future__ import annotations

import collections
import copy
import os
from typing import Any, Mapping

import torch

from . import backends as _backends
from .agent import Agent
from .batched import group_size, has_score_batch
from .pickling import cloudpickle


def skeleton_bytes(agent: Agent) -> bytes:
    """The agent pickled with its evolved parameters stripped to one shared zero, and
    their strides (what :func:`worker_agent` unpickles).

    An expanded zero-dim tensor pickles as a single element, so the skeleton's size does
    not grow with the number of evolved parameters. The strides rebuild each parameter
    in this process's memory layout (a transposed weight, ``channels_last``), in which
    ``jitter_weights`` draws its noise. The skeleton holds this process's group size as
    its own ``score_batch_size``: a worker that imports the agent's class gets the class
    as its module defines it, without a change made to it in this process.
    """
    skeleton = copy.deepcopy(agent)
    strides = [p.stride() for _, p in skeleton.evolved_parameters()]
    for _, p in skeleton.evolved_parameters():
        p.data = torch.zeros((), dtype=p.dtype).expand(p.shape)
    if has_score_batch(agent):
        skeleton.score_batch_size = group_size(agent)
    return cloudpickle.dumps((skeleton, strides))


_WORKER_AGENTS: "collections.OrderedDict[str, Agent]" = collections.OrderedDict()
_WORKER_CACHE_SIZE = 4
_SHARED: dict[str, tuple[Any, Any]] = {}  # token -> (reference, loaded shared state)
_CENTRES: dict[str, tuple[Any, Any]] = {}  # token -> (reference, loaded centre)
_KWARGS: dict[str, Mapping[str, Any]] = {}  # token -> the run's score_kwargs


def worker_agent(token: str, skeleton: Any) -> Agent:
    """The agent for ``token``, unpickled once per worker process and cached.

    ``skeleton`` is the pickled skeleton or a reference to it (``backends.load``; read
    only when this process has not cached the token yet).
    """
    agent = _WORKER_AGENTS.get(token)
    if agent is None:
        try:
            agent, strides = cloudpickle.loads(_backends.load(skeleton))
        except ModuleNotFoundError as exc:
            import socket
            raise ModuleNotFoundError(
                f"a worker process ({socket.gethostname()}, pid {os.getpid()}) cannot "
                f"import {exc.name!r}, which the agent needs: install it where the "
                f"workers run, or send it with the agent: "
                f"cloudpickle.register_pickle_by_value({exc.name}) before the run (the "
                f"command line does this for path/to/file.py:Class)", name=exc.name
            ) from exc
        for (_, p), stride in zip(agent.evolved_parameters(), strides):
            # the main process's memory layout: jitter_weights' randn_like draws in it
            p.data = torch.empty_strided(p.shape, stride, dtype=p.dtype)
        _WORKER_AGENTS[token] = agent
        while len(_WORKER_AGENTS) > _WORKER_CACHE_SIZE:
            old, _ = _WORKER_AGENTS.popitem(last=False)
            _SHARED.pop(old, None)
            _CENTRES.pop(old, None)
            _KWARGS.pop(old, None)
    return agent


def cached_payload(token: str, center: Any, score_kwargs: Any, shared: Any
                   ) -> tuple[Any, Mapping[str, Any], Any]:
    """The generation's centre, the run's ``score_kwargs`` and the shared state behind
    what the pool's ``put`` returned for them (``worker.Payload``'s fields), each loaded
    once per worker process (and generation) for the run ``token``."""
    return (_centre(token, center), _score_kwargs(token, score_kwargs),
            _shared_state(token, shared))


def _centre(token: str, ref: Any) -> Any:
    """The centre behind ``ref``, loaded once per worker and generation: a generation cut
    into several chunks per worker maps (and page-faults) a large centre once, not once
    per chunk. A reference names a file written once (``SharedFiles``), so an equal
    reference is the same centre."""
    if not isinstance(ref, _backends.FileRef):
        return ref
    cached = _CENTRES.get(token)
    if cached is not None and cached[0] == ref:
        return cached[1]
    centre = _backends.load(ref)
    _CENTRES[token] = (ref, centre)
    return centre


def _shared_state(token: str, ref: Any) -> Any:
    """The shared state behind ``ref``, unpickled once per worker and generation."""
    if ref is None:
        return None
    cached = _SHARED.get(token)
    if cached is not None and cached[0] == ref:
        return cached[1]
    state = cloudpickle.loads(_backends.load(ref))
    _SHARED[token] = (ref, state)
    return state


def _score_kwargs(token: str, ref: Any) -> Mapping[str, Any]:
    """The run's ``score_kwargs`` behind ``ref`` (None: none), unpickled once per worker:
    put once per run like the skeleton, so a data set passed as a keyword crosses to
    each worker once, not with every chunk of every generation."""
    if ref is None:
        return {}
    kwargs = _KWARGS.get(token)
    if kwargs is None:
        kwargs = _KWARGS[token] = cloudpickle.loads(_backends.load(ref))
    return kwargs
