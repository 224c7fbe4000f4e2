"""A pool on a Ray cluster: one actor per CPU, each running one chunk at a time.

- **Workers**: one :class:`~.runner.Runner` actor (``num_cpus=1``) per CPU of the
  cluster, counted at each call, so that nodes that join are used from the next
  generation on. Actors are never restarted by Ray (``max_restarts=0``) and their
  calls never retried by Ray: a lost actor is the engine's to handle, as on loky.
- **Payloads** (:meth:`RayPool.put`): sent to each actor once and kept there; a value
  over :data:`OBJECT_STORE_FROM` bytes is put in Ray's object store once
  (``ray.put``) and each actor fetches it from there (once per node in the store).
- **Lost workers**: a call whose actor died raises :class:`~es_search.pools.WorkerLost`
  (after the other chunks have finished); the engine scores those candidates again
  with the same seeds. A chunk over its time has its actor killed.
"""
from __future__ import annotations

import os
import time
from typing import Any, Callable, Sequence

from ..plotting import require
from . import WorkerLost
from .runner import Mismatch, Payload, Runner, Tracker

OBJECT_STORE_FROM = 1 << 20  # bytes


def _ray() -> Any:
    ray = require("ray", "ray")
    if not ray.is_initialized():
        # RAY_ADDRESS (if set) names a running cluster; otherwise a local one starts
        ray.init(address=os.environ.get("RAY_ADDRESS"), include_dashboard=False,
                 log_to_driver=False)
    return ray


class RayRunner(Runner):
    """A :class:`Runner` that can also fetch values from Ray's object store."""

    def run(self, fn: Callable, args: Sequence[Any], sends: Sequence[tuple],
            forget: Sequence[int] = ()) -> Any:
        import ray
        sends = [(key, kind, ("raw", ray.get(data[0][1])) if data[0][0] == "ray"
                  else data[0]) if kind == "value" else (key, kind, *data)
                 for key, kind, *data in sends]
        return super().run(fn, args, sends, forget)


class RayPool:
    """Chunks on a Ray cluster (``ray.init()`` is called if Ray is not running).
    ``n_jobs`` caps the actors (-1: one per CPU of the cluster)."""

    is_local = False
    name = "ray"

    def __init__(self, n_jobs: int = -1, task_timeout: float | None = None):
        self.ray = _ray()
        self.n_jobs = n_jobs
        self.task_timeout = task_timeout
        self.tracker = Tracker()
        self._actor_class = self.ray.remote(num_cpus=1, max_restarts=0,
                                            max_task_retries=0)(RayRunner)
        self._actors: list[Any] = []
        self._refs: dict[int, Any] = {}  # payload id -> object ref of its value
        self._closed = False
        self.refresh()

    # ------------------------------------------------------------------ workers
    def slots(self) -> int:
        cpus = int(self.ray.cluster_resources().get("CPU", 0))
        return cpus if self.n_jobs < 1 else min(cpus, self.n_jobs)

    def refresh(self) -> list[Any]:
        """One actor per CPU of the cluster now (new ones started, none stopped)."""
        want = max(1, self.slots())
        new = [self._actor_class.remote() for _ in range(want - len(self._actors))]
        if new:  # started before any chunk is timed: a start is not a slow task
            try:
                self.ray.get([a.pid.remote() for a in new], timeout=120)
            except Exception:  # pragma: no cover - no room on the cluster now
                for actor in new:
                    self.ray.kill(actor, no_restart=True)
                new = []
            self._actors += new
        return self._actors[:want]

    def _forget(self, actor: Any) -> None:
        if actor in self._actors:
            self._actors.remove(actor)
        self.tracker.forget_runner(id(actor))

    @property
    def n_workers(self) -> int:
        return max(1, min(len(self._actors), self.slots()))

    # ------------------------------------------------------------------ payloads
    def put(self, value: Any, recipe: tuple[Callable, tuple] | None = None) -> Payload:
        """``value``, sent to each actor once, when a chunk there names it (as a
        top-level argument of :meth:`run_chunks`)."""
        return self.tracker.add(Payload(value, recipe))

    def drop(self, payload: Payload) -> None:
        self.tracker.drop(payload)
        self._refs.pop(payload.id, None)

    # ------------------------------------------------------------------ running
    def run_chunks(self, fn: Callable, args_list: Sequence[tuple],
                   done: dict | None = None) -> list:
        """As :meth:`es_search.pools.dask_pool.DaskPool.run_chunks`, on Ray actors."""
        ray = self.ray
        actors = self.refresh()
        assigned = [actors[i % len(actors)] for i in range(len(args_list))]
        refs = [self._call(a, fn, args) for a, args in zip(assigned, args_list)]
        per_actor = max(assigned.count(a) for a in assigned)
        deadline = (None if self.task_timeout is None else
                    time.monotonic() + self.task_timeout * per_actor)
        results: list = [None] * len(args_list)
        errors: list[BaseException | None] = [None] * len(args_list)
        late: list[Any] = []
        for i, (actor, args) in enumerate(zip(assigned, args_list)):
            while True:
                try:
                    left = None if deadline is None else max(0.0, deadline - time.monotonic())
                    value = ray.get(refs[i], timeout=left)
                except ray.exceptions.GetTimeoutError as exc:
                    late.append(actor)
                    errors[i] = TimeoutError(f"a chunk ran over its time: {exc}")
                except ray.exceptions.RayActorError as exc:
                    self._forget(actor)
                    first = str(exc).strip().splitlines()[0] if str(exc) else ""
                    errors[i] = WorkerLost(f"a Ray actor was lost while scoring ({first})")
                except ray.exceptions.RayTaskError as exc:  # the chunk itself raised
                    errors[i] = _cause(exc)
                else:
                    if isinstance(value, Mismatch):
                        self.tracker.forget_sent(id(actor), [value.id])
                        refs[i] = self._call(actor, fn, args, frozenset([value.id]))
                        continue
                    results[i] = value
                    if done is not None:
                        done[i] = value
                break
        for actor in dict.fromkeys(late):
            self._kill(actor)
        error = next((e for e in errors if e is not None), None)
        if error is not None:
            raise error
        return results

    def _call(self, actor: Any, fn: Callable, args: tuple,
              whole: frozenset[int] = frozenset()) -> Any:
        args, sends, forget = self.tracker.message(id(actor), args, whole)
        sends = [self._by_ref(s) for s in sends]
        return actor.run.remote(fn, args, sends, forget)

    def _by_ref(self, send: tuple) -> tuple:
        key, kind, *data = send
        if kind != "value":
            return send
        encoded = data[0]
        nbytes = getattr(encoded[1], "nbytes", 0)
        if nbytes < OBJECT_STORE_FROM:
            return send
        ref = self._refs.get(key)
        if ref is None:
            ref = self._refs[key] = self.ray.put(encoded[1])
        return (key, kind, ("ray", ref))

    def _kill(self, actor: Any) -> None:
        self._forget(actor)
        try:
            self.ray.kill(actor, no_restart=True)
        except Exception:  # pragma: no cover - already gone
            pass

    # ------------------------------------------------------------------ lifetime
    def abort(self) -> None:
        """Stop what runs now (Ctrl-C): every actor is killed."""
        for actor in list(self._actors):
            self._kill(actor)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            for actor in list(self._actors):
                self._kill(actor)
            self._refs = {}

    def __enter__(self) -> "RayPool":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _cause(exc: BaseException) -> BaseException:
    """The exception a chunk raised, as raised there (Ray wraps it)."""
    cause = getattr(exc, "cause", None)
    if isinstance(cause, BaseException):
        return cause
    try:
        return exc.as_instanceof_cause()
    except Exception:  # pragma: no cover
        return exc
