"""A pool on a dask.distributed cluster: one :class:`~.runner.Runner` actor per worker
process, called straight from this process (no scheduler hop). A chunk over its time
has its worker restarted by its nanny.

A call whose previous one on that worker took under ``loop_call_seconds`` runs on the
worker's event loop, not in the actor thread beside it, whose GIL it would share
(``benchmarks/dask_event_loop.py``: Dask / loky 1.10-1.14 in the thread, 1.02-1.05 on
the loop). A ``score()`` that waits on Dask futures would block that loop:
``DaskPool.loop_call_seconds = 0`` keeps every call beside it.
"""
from __future__ import annotations

import contextlib
import math
import threading
import time
from typing import Any, Callable, Iterator

from ..extras import require
from . import WorkerLost, base
from .base import ActorPool
from .runner import Runner


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
        raise ValueError(
            "backend='dask' runs on the active dask.distributed Client, and there is none: "
            "create one first, e.g. `from dask.distributed import Client; client = "
            "Client('tcp://scheduler:8786')` (or Client() for a local cluster), or pass the "
            "client itself as backend=client; on the command line pass --scheduler "
            "tcp://host:8786") from None


class DaskPool(ActorPool):
    """Chunks on a Dask cluster. ``n_jobs`` caps the workers used (-1: all)."""

    loop_call_seconds = 1.0

    def __init__(self, client: Any = "dask", n_jobs: int = -1):
        super().__init__(n_jobs)
        self.client = get_client(client)
        # lost or stopped workers, whose address may linger in the scheduler's list
        self._gone: set[str] = set()
        self._last_call: dict[str, float] = {}  # worker address -> seconds, as measured here
        if not self._await_runners():
            raise ValueError(f"the Dask cluster at {self.client.scheduler.address} has "
                             f"had no workers for {base.WAIT_FOR_WORKERS} s; start some "
                             f"(dask worker ADDRESS) first")

    def _runners(self) -> list[str]:
        if self.client.status != "running":  # closed under the run: as a lost scheduler
            raise ConnectionError(f"the Dask client is {self.client.status}")
        addresses = sorted(set(self.client.nthreads()) - self._gone)  # one small request
        for gone in set(self._actors) - set(addresses):
            self._forget(gone)
        wanted = addresses if self.n_jobs < 1 else addresses[:self.n_jobs]
        if new := [a for a in wanted if a not in self._actors]:
            self._start_actors(new)
        return [a for a in wanted if a in self._actors]

    def _start_actors(self, addresses: list[str]) -> None:
        """An actor on each worker of ``addresses``: waits up to 120 s for the pool's first
        actor, then 5 s; one slow to start, or whose worker left, is retried later."""
        distributed = require("distributed", "dask")
        pending = {a: self.client.submit(Runner, actor=True, workers=[a],
                                         allow_other_workers=False, pure=False)
                   for a in addresses}
        deadline = time.monotonic() + 120
        while pending and time.monotonic() < deadline:
            if self._actors:
                deadline = min(deadline, time.monotonic() + 5)
            with contextlib.suppress(TimeoutError):
                distributed.wait(list(pending.values()), timeout=0.5,
                                 return_when="FIRST_COMPLETED")
            listed = set(self.client.nthreads())
            for address in [a for a, f in pending.items() if f.done() or a not in listed]:
                self._take(address, pending.pop(address))
        for address, future in pending.items():
            self._take(address, future)

    def _take(self, address: str, future: Any) -> None:
        """The actor of ``future`` if it started, else ``future`` cancelled."""
        with contextlib.suppress(RuntimeError):  # "Worker holding Actor was lost"
            if future.status == "finished":
                self._actors[address] = future.result()
                return
        future.cancel()

    def _forget(self, key: str) -> None:
        self._gone.add(key)
        self._last_call.pop(key, None)
        super()._forget(key)

    def _submit(self, key: str, fn: Callable, args: list, sends: list, forget: list) -> Any:
        import asyncio
        on_loop = self._last_call.get(key, math.inf) < self.loop_call_seconds
        call = _execute(self.client.rpc, key, self._actors[key].key, (fn, args, sends, forget),
                        on_loop)
        began = time.perf_counter()
        return asyncio.run_coroutine_threadsafe(call, self.client.loop.asyncio_loop), key, began

    def _result(self, call: Any, timeout: float | None) -> Any:
        future, address, began = call
        try:
            return future.result(timeout=timeout)
        finally:  # the calls are awaited in order: an upper bound of this one's time
            self._last_call[address] = time.perf_counter() - began

    def _stop(self, keys: list[str]) -> None:
        with contextlib.suppress(Exception):  # no nanny: the worker keeps running
            self.client.restart_workers(list(keys), raise_for_error=False)

    def close(self) -> None:
        self._actors = {}  # releasing the actors' futures ends them


async def _execute(rpc: Any, address: str, actor_key: Any, args: tuple, on_loop: bool) -> Any:
    """``Runner.run(*args)`` on actor ``actor_key`` at ``address``; ``WorkerLost`` if it died."""
    from distributed.protocol import to_serialize
    try:
        answer = await rpc(address).actor_execute(
            function="run", actor=actor_key, args=[to_serialize(a) for a in args],
            kwargs={"separate_thread": False} if on_loop else {})
    except OSError as exc:  # CommClosedError included: its connection closed
        raise WorkerLost(f"the Dask worker {address} was lost while scoring ({exc})") from exc
    if answer["status"] != "OK":
        raise answer["exception"]
    return answer["result"]


#: seconds --scheduler's address has to answer as a dask scheduler
SCHEDULER_TIMEOUT = 20.0


@contextlib.contextmanager
def scheduler_client(address: str | None) -> Iterator[None]:
    """A Client of the dask scheduler at ``address`` (``--scheduler``; None: none) while
    the block runs; a ValueError where none answers within ``SCHEDULER_TIMEOUT`` s (a
    Client may wait forever on a server that is no dask scheduler)."""
    if address is None:
        yield
        return
    distributed = require("distributed", "dask")
    _check_host(distributed, address)
    outcome: dict[str, Any] = {}

    def connect() -> None:
        try:
            outcome["client"] = distributed.Client(address, timeout=SCHEDULER_TIMEOUT)
        except BaseException as exc:  # noqa: BLE001 - reported below
            outcome["error"] = exc

    thread = threading.Thread(target=connect, name="es_search-scheduler", daemon=True)
    thread.start()
    thread.join(SCHEDULER_TIMEOUT + 2)
    hint = (" (pass the scheduler's own address, e.g. tcp://host:8786, not its "
            "dashboard's; `dask scheduler` prints it)")
    error = outcome.get("error")
    if thread.is_alive():
        raise ValueError(f"no dask scheduler answered at {address} within "
                         f"{SCHEDULER_TIMEOUT:g} s{hint}")
    if isinstance(error, OSError):  # TimeoutError included
        raise ValueError(f"cannot reach the dask scheduler at {address}: {error}") from None
    if error is not None:
        raise ValueError(f"{address} did not answer as a dask scheduler "
                         f"({type(error).__name__}: {error}){hint}") from None
    try:
        yield
    finally:
        outcome["client"].close()


def _check_host(distributed: Any, address: str) -> None:
    """A ValueError when the host of ``address`` does not resolve (a Client would retry
    it until its timeout)."""
    import socket
    try:
        scheme, location = distributed.comm.parse_address(address)
        host, port = distributed.comm.parse_host_port(location, 8786)
        if scheme in ("tcp", "tls", "ws", "wss"):
            socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (ValueError, TypeError):  # an address that does not parse: the Client's to judge
        return
    except socket.gaierror as exc:
        raise ValueError(f"cannot reach the dask scheduler at {address}: no such host "
                         f"{host!r} ({exc.strerror}); check the address (`dask "
                         f"scheduler` prints it, e.g. tcp://host:8786)") from None
