"""The agent on its way to the workers: pickled once per run as a skeleton (its evolved
parameters stripped), unpickled once per worker process and cached with its payload."""
from __future__ import annotations

import collections
import copy
import os
from typing import Any, Callable, Mapping

import torch

from . import backends as _backends
from .agent import Agent
from .batched import group_size, has_score_batch
from .pickling import cloudpickle


def skeleton_bytes(agent: Agent) -> bytes:
    """The agent pickled with its evolved parameters stripped to one shared zero, and
    their strides (a worker rebuilds each in this process's memory layout, in which
    ``jitter_weights`` draws), holding this process's group size as its own
    ``score_batch_size`` (a worker imports the class as its module defines it)."""
    skeleton = copy.deepcopy(agent)
    strides = [p.stride() for _, p in skeleton.evolved_parameters()]
    for _, p in skeleton.evolved_parameters():
        p.data = torch.zeros((), dtype=p.dtype).expand(p.shape)
    if has_score_batch(agent):
        skeleton.score_batch_size = group_size(agent)
    return cloudpickle.dumps((skeleton, strides))


#: token -> the run's agent and loaded payload, in this worker process (the last few runs)
_RUNS: "collections.OrderedDict[str, dict[str, Any]]" = collections.OrderedDict()
_CACHED_RUNS = 4


def worker_agent(token: str, skeleton: Any) -> Agent:
    """The agent of the run ``token``, unpickled from ``skeleton`` (or the reference to it
    the pool's ``put`` returned) once per worker process and cached."""
    run = _RUNS.get(token)
    if run is None:
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
            p.data = torch.empty_strided(p.shape, stride, dtype=p.dtype)
        run = _RUNS[token] = {"agent": agent}
        while len(_RUNS) > _CACHED_RUNS:
            _RUNS.popitem(last=False)
    return run["agent"]


def cached_payload(token: str, center: Any, score_kwargs: Any, shared: Any
                   ) -> tuple[Any, Mapping[str, Any], Any]:
    """``worker.Payload``'s fields behind what the pool's ``put`` returned, for the run
    ``token`` (after :func:`worker_agent`): the ``score_kwargs`` loaded once per run, the
    others once per generation (a reference names a file written once)."""
    run = _RUNS[token]
    if isinstance(center, _backends.FileRef):
        center = _loaded(run, "center", center, lambda: _backends.load(center))
    kwargs = {} if score_kwargs is None else _loaded(
        run, "score_kwargs", None, lambda: cloudpickle.loads(_backends.load(score_kwargs)))
    if shared is not None:
        shared = _loaded(run, "shared", shared,
                         lambda: cloudpickle.loads(_backends.load(shared)))
    return center, kwargs, shared


def _loaded(run: dict[str, Any], name: str, key: Any, load: Callable[[], Any]) -> Any:
    """``run[name]``'s value, ``load()``-ed again when ``key`` differs from its own."""
    cached = run.get(name)
    if cached is None or cached[0] != key:
        cached = run[name] = (key, load())
    return cached[1]
