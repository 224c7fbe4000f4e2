"""A pool on a Ray cluster: one :class:`~.runner.Runner` actor (``num_cpus=1``) per CPU
of the cluster. Ray never restarts an actor nor retries its calls (a lost actor is the
engine's to handle, as on loky); a chunk over its time has its actor killed. Parcels over
:data:`OBJECT_STORE_FROM` bytes go through Ray's object store (fetched once per node).
"""
from __future__ import annotations

import contextlib
import itertools
import os
import signal
import time
from typing import Any, Callable

from ..extras import require
from . import WorkerLost
from .base import ActorPool
from .runner import Runner

OBJECT_STORE_FROM = 1 << 20  # bytes
#: seconds new actors have to start (their first answer) before they are given up
START_TIMEOUT = 120


class RayRunner(Runner):
    """The actors' class: Ray names their processes after it (``ray::RayRunner``)."""


class RayPool(ActorPool):
    """Chunks on a Ray cluster (``ray.init()`` is called if Ray is not running).
    ``n_jobs`` caps the actors (-1: one per CPU of the cluster)."""

    runner = RayRunner

    def __init__(self, n_jobs: int = -1):
        super().__init__(n_jobs)
        self.ray = require("ray", "ray")
        if not self.ray.is_initialized():  # RAY_ADDRESS (if set) names a running cluster
            handler = signal.getsignal(signal.SIGTERM)  # the run's (stops it as Ctrl-C)
            self.ray.init(address=os.environ.get("RAY_ADDRESS"), include_dashboard=False,
                          log_to_driver=False)
            with contextlib.suppress(ValueError):  # ray.init's exits (no resume hint)
                signal.signal(signal.SIGTERM, handler)
        self._actor_class = self.ray.remote(num_cpus=1, max_restarts=0,
                                            max_task_retries=0)(self.runner)
        self._ids = itertools.count(1)  # the actors' keys
        self._refs: dict[int, Any] = {}  # parcel id -> object ref of its value
        self._runners()

    def _cpus(self) -> int:
        return int(self.ray.cluster_resources().get("CPU", 0))

    def _runners(self) -> list[int]:
        cpus = self._cpus()
        want = cpus if self.n_jobs < 1 else min(cpus, self.n_jobs)
        new = {next(self._ids): self._actor_class.remote()
               for _ in range(want - len(self._actors))}
        if new:  # before any chunk is timed: a start is not a slow task
            self._start(new)
        return sorted(self._actors)[:want]

    def _start(self, new: dict[int, Any]) -> None:
        """Keep the actors of ``new`` that answer; kill the others once they die, or
        after :data:`START_TIMEOUT` s, or once the cluster has no CPUs."""
        ray = self.ray
        keys = {actor.pid.remote(): key for key, actor in new.items()}
        pending = list(keys)
        deadline = time.monotonic() + START_TIMEOUT
        while pending and time.monotonic() < deadline:
            ready, pending = ray.wait(pending, num_returns=len(pending), timeout=1.0)
            for ref in ready:
                try:
                    ray.get(ref)
                except ray.exceptions.RayError:  # it died starting
                    ray.kill(new[keys[ref]], no_restart=True)
                else:
                    self._actors[keys[ref]] = new[keys[ref]]
            if pending and not self._cpus():
                break
        for ref in pending:
            ray.kill(new[keys[ref]], no_restart=True)

    def _submit(self, key: int, fn: Callable, args: list, sends: list, forget: list) -> Any:
        sends = [self._by_ref(s) for s in sends]
        return self._actors[key].run.remote(fn, args, sends, forget)

    def _by_ref(self, send: tuple) -> tuple:
        key, kind, *data = send
        if kind != "value" or getattr(data[0][1], "nbytes", 0) < OBJECT_STORE_FROM:
            return send
        ref = self._refs.get(key)
        if ref is None:
            ref = self._refs[key] = self.ray.put(data[0])
            for old in [k for k in self._refs if k in self.tracker.dropped]:
                del self._refs[old]
        return (key, kind, ("ray", ref))

    def _result(self, ref: Any, timeout: float | None) -> Any:
        try:
            return self.ray.get(ref, timeout=timeout)
        except self.ray.exceptions.RayActorError as exc:
            first = str(exc).strip().splitlines()[0] if str(exc) else ""
            raise WorkerLost(f"a Ray actor was lost while scoring ({first})") from exc

    def _stop(self, keys: list[int]) -> None:
        for key in keys:
            with contextlib.suppress(Exception):  # None, or already gone
                self.ray.kill(self._actors.get(key), no_restart=True)

    def close(self) -> None:
        self._stop(list(self._actors))
        self._actors, self._refs = {}, {}
