"""A pool on a dask.distributed cluster: one actor per worker process.

- **Workers**: each Dask worker process gets one :class:`~.runner.Runner` actor. A call
  to an actor goes from this process straight to its worker and back (no scheduler
  hop, no batching interval): a round trip costs about what loky's does. The worker
  list is asked of the scheduler at each call (one small request), so workers that
  join are used from the next generation on.
- **One chunk at a time per process**: an actor runs its calls one after the other,
  and each worker process has one actor, so chunks never share a process's random
  generators.
- **Parcels** (``put``): sent to each actor once and kept there; a parcel with a
  recipe is derived by the actor from what it holds (see :mod:`.runner`).
- **Lost workers**: a call whose worker died fails at once (its connection closes):
  ``run_chunks`` raises :class:`~es_search.pools.WorkerLost` for it once the other
  chunks have finished, and the engine scores those candidates again with the same
  seeds on the workers left (or restarted by their nanny).
- **Timeouts**: a chunk over its time has its worker restarted through its nanny, as
  loky kills a worker over time.
"""
from __future__ import annotations

from typing import Any, Callable

from ..plotting import require
from . import is_client
from .base import ActorPool, Late, Lost
from .runner import Runner

_NO_CLIENT = (
    "backend='dask' runs on the active dask.distributed Client, and there is none: "
    "create one first, e.g. `from dask.distributed import Client; client = "
    "Client('tcp://scheduler:8786')` (or Client() for a local cluster), or pass the "
    "client itself as backend=client; on the command line pass --scheduler tcp://host:8786")


def get_client(backend: Any = "dask") -> Any:
    """The Client for ``backend`` (``"dask"``: the active one; or a Client)."""
    if is_client(backend):
        return backend
    distributed = require("distributed", "dask")
    try:
        return distributed.get_client()
    except ValueError:
        raise ValueError(_NO_CLIENT) from None


class DaskPool(ActorPool):
    """Chunks on a Dask cluster. ``n_jobs`` caps the workers used (-1: all)."""

    name = "dask"

    def __init__(self, client: Any = "dask", n_jobs: int = -1):
        super().__init__(n_jobs)
        self.client = get_client(client)
        self._actors: dict[str, Any] = {}  # worker address -> actor
        # workers lost or stopped: their address may linger in the scheduler's list for
        # a moment (a restarted worker comes back under a new address)
        self._gone: set[str] = set()
        if not self._runners():
            raise ValueError(f"the Dask cluster at {self.client.scheduler.address} has "
                             f"no workers; start some (dask worker ADDRESS) first")

    def _runners(self) -> list[str]:
        addresses = sorted(set(self.client.nthreads()) - self._gone)  # one small request
        for gone in set(self._actors) - set(addresses):
            self._forget(gone)
        wanted = addresses if self.n_jobs < 1 else addresses[:self.n_jobs]
        new = [a for a in wanted if a not in self._actors]
        if new:
            distributed = require("distributed", "dask")
            futures = [self.client.submit(Runner, actor=True, workers=[a],
                                          allow_other_workers=False, pure=False)
                       for a in new]
            # a worker that is going away may still be listed: its actor never starts,
            # so wait for the first actor, then briefly for the others (retried later)
            for timeout, when in ((120, "FIRST_COMPLETED"), (5, "ALL_COMPLETED")):
                try:
                    distributed.wait(futures, timeout=timeout, return_when=when)
                except TimeoutError:
                    pass
            for address, future in zip(new, futures):
                if future.status == "finished":
                    self._actors[address] = future.result()
                else:  # the worker left meanwhile (or is slow to start): not this time
                    future.cancel()
        return [a for a in wanted if a in self._actors]

    def _forget(self, key: str) -> None:
        self._gone.add(key)
        self._actors.pop(key, None)
        super()._forget(key)

    def _submit(self, key: str, fn: Callable, args: list, sends: list, forget: list) -> Any:
        return self._actors[key].run(fn, args, sends, forget), key

    def _result(self, call: Any, timeout: float | None) -> Any:
        future, address = call
        try:
            return future.result(timeout=timeout)
        except TimeoutError as exc:
            raise Late(f"worker {address}") from exc
        except OSError as exc:  # the worker died: the actor's connection closed
            raise Lost(f"the Dask worker {address} was lost while scoring ({exc})") from exc

    def _stop(self, keys: list[str]) -> None:
        try:
            self.client.restart_workers(list(keys), raise_for_error=False)
        except Exception:  # pragma: no cover - no nanny: the worker keeps running
            pass

    def close(self) -> None:
        self._actors = {}  # releasing the actors' futures ends them
