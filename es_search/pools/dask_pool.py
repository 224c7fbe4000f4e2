"""A pool on a dask.distributed cluster: one actor per worker process.

- **Workers**: each Dask worker process gets one :class:`~.runner.Runner` actor. A call
  to an actor goes from this process straight to its worker and back (no scheduler
  hop, no batching interval): a round trip costs about what loky's does. The worker
  list is asked of the scheduler at each call (one small request), so workers that
  join are used from the next generation on.
- **One chunk at a time per process**: an actor runs its calls one after the other,
  and each worker process has one actor, so chunks never share a process's random
  generators.
- **Payloads** (:meth:`DaskPool.put`): sent to each actor once, and kept there; a
  payload with a recipe is derived by the actor from what it holds (see
  :mod:`.runner`).
- **Lost workers**: a call whose worker died fails at once (its connection closes):
  :meth:`DaskPool.run_chunks` raises :class:`~es_search.pools.WorkerLost` for it once
  the other chunks have finished, and the engine scores those candidates again with
  the same seeds on the workers left (or restarted by their nanny).
- **Timeouts**: a chunk over its time has its worker restarted through its nanny, as
  loky kills a worker over time.
"""
from __future__ import annotations

import time
from typing import Any, Callable, Sequence

from ..plotting import require
from . import WorkerLost
from .runner import Mismatch, Payload, Runner, Tracker

_NO_CLIENT = (
    "backend='dask' runs on the active dask.distributed Client, and there is none: "
    "create one first, e.g. `from dask.distributed import Client; client = "
    "Client('tcp://scheduler:8786')` (or Client() for a local cluster), or pass the "
    "client itself as backend=client; on the command line pass --scheduler tcp://host:8786")


def is_client(backend: Any) -> bool:
    """True for a ``distributed.Client`` (without importing distributed)."""
    return any(c.__module__.startswith("distributed") and c.__name__ == "Client"
               for c in type(backend).__mro__)


def get_client(backend: Any = "dask") -> Any:
    """The Client for ``backend`` (``"dask"``: the active one; or a Client)."""
    if is_client(backend):
        return backend
    distributed = require("distributed", "dask")
    try:
        return distributed.get_client()
    except ValueError:
        raise ValueError(_NO_CLIENT) from None


class DaskPool:
    """Chunks on a Dask cluster. ``n_jobs`` caps the workers used (-1: all)."""

    is_local = False
    name = "dask"

    def __init__(self, client: Any = "dask", n_jobs: int = -1,
                 task_timeout: float | None = None):
        self.client = get_client(client)
        self.n_jobs = n_jobs
        self.task_timeout = task_timeout
        self.tracker = Tracker()
        self._actors: dict[str, Any] = {}  # worker address -> actor
        self._busy: list[str] = []
        self._closed = False
        self.refresh()
        if not self._actors:
            raise ValueError(f"the Dask cluster at {self.client.scheduler.address} has "
                             f"no workers; start some (dask worker ADDRESS) first")

    # ------------------------------------------------------------------ workers
    def refresh(self) -> list[str]:
        """Ask the scheduler for its workers; start actors on new ones, forget gone
        ones. Returns the addresses used, in a stable order."""
        addresses = sorted(self.client.nthreads())
        for gone in set(self._actors) - set(addresses):
            self._forget(gone)
        wanted = addresses if self.n_jobs < 1 else addresses[:self.n_jobs]
        new = [a for a in wanted if a not in self._actors]
        futures = [self.client.submit(Runner, actor=True, workers=[a],
                                      allow_other_workers=False, pure=False) for a in new]
        for address, future in zip(new, futures):
            try:
                self._actors[address] = future.result(timeout=60)
            except Exception:  # the worker left meanwhile: not used this time
                pass
        return [a for a in wanted if a in self._actors]

    def _forget(self, address: str) -> None:
        self._actors.pop(address, None)
        self.tracker.forget_runner(address)

    @property
    def n_workers(self) -> int:
        return max(1, len(self._actors))

    # ------------------------------------------------------------------ payloads
    def put(self, value: Any, recipe: tuple[Callable, tuple] | None = None) -> Payload:
        """``value``, sent to each worker once, when a chunk there names it (as a
        top-level argument of :meth:`run_chunks`)."""
        return self.tracker.add(Payload(value, recipe))

    def drop(self, payload: Payload) -> None:
        """The workers may forget ``payload`` (told with their next chunk)."""
        self.tracker.drop(payload)

    # ------------------------------------------------------------------ running
    def run_chunks(self, fn: Callable, args_list: Sequence[tuple],
                   done: dict | None = None) -> list:
        """``fn(*args)`` for each ``args`` of ``args_list``, one worker each; results in
        order. When chunks fail, the first failure in order (not in time) is raised
        after all have finished; ``done`` (if given) gets ``{i: result}`` of those that
        succeeded. A chunk whose worker died raises :class:`WorkerLost`."""
        workers = self.refresh()
        if not workers:
            raise WorkerLost("the Dask cluster has no workers left")
        assigned = [workers[i % len(workers)] for i in range(len(args_list))]
        calls = [self._call(a, fn, args) for a, args in zip(assigned, args_list)]
        self._busy = assigned
        deadline = (None if self.task_timeout is None else
                    time.monotonic() + self.task_timeout * _rounds(assigned))
        results: list = [None] * len(args_list)
        errors: list[BaseException | None] = [None] * len(args_list)
        late: list[str] = []
        for i, (address, args) in enumerate(zip(assigned, args_list)):
            while True:
                try:
                    left = None if deadline is None else max(0.0, deadline - time.monotonic())
                    value = calls[i].result(timeout=left)
                except (TimeoutError, _timeout_error()) as exc:
                    late.append(address)
                    errors[i] = TimeoutError(f"a chunk ran over its time: {exc}")
                except OSError as exc:  # the worker died: its connection closed
                    self._forget(address)
                    errors[i] = WorkerLost(f"the Dask worker {address} was lost while "
                                           f"scoring ({exc})")
                except BaseException as exc:  # noqa: BLE001 - raised below, in order
                    errors[i] = exc
                else:
                    if isinstance(value, Mismatch):  # the recipe did not hold there
                        self.tracker.forget_sent(address, [value.id])
                        calls[i] = self._call(address, fn, args,
                                              whole=frozenset([value.id]))
                        continue
                    results[i] = value
                    if done is not None:
                        done[i] = value
                break
        self._busy = []
        if late:
            self._restart(sorted(set(late)))
        error = next((e for e in errors if e is not None), None)
        if error is not None:
            raise error
        return results

    def _call(self, address: str, fn: Callable, args: tuple,
              whole: frozenset[int] = frozenset()) -> Any:
        args, sends, forget = self.tracker.message(address, args, whole)
        return self._actors[address].run(fn, args, sends, forget)

    def _restart(self, addresses: list[str]) -> None:
        for address in addresses:
            self._forget(address)
        try:
            self.client.restart_workers(addresses, raise_for_error=False)
        except Exception:  # pragma: no cover - no nanny: the worker keeps running
            pass

    # ------------------------------------------------------------------ lifetime
    def abort(self) -> None:
        """Stop what runs now (Ctrl-C): the workers running chunks are restarted."""
        busy, self._busy = self._busy, []
        if busy:
            self._restart(sorted(set(busy)))

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._actors = {}  # releasing the actor futures ends the actors

    def __enter__(self) -> "DaskPool":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _rounds(assigned: list[str]) -> int:
    """Chunks per worker at most (a worker runs its chunks one after the other)."""
    return max(assigned.count(a) for a in set(assigned))


def _timeout_error() -> type:
    import asyncio
    return asyncio.TimeoutError
