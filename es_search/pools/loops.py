"""Worker loops: each worker of a local pool runs one long call, :func:`serve`, while the
pool is open, and takes chunks over a socket of its own: a message each way (tens of
microseconds), not an executor round trip (0.3-2 ms). The executor (loky's) starts the
processes; a worker that dies closes its socket, which the pool reads as a lost worker.
"""
from __future__ import annotations

import collections
import os
import pickle
import socket
import time
import uuid
from concurrent.futures import BrokenExecutor
from multiprocessing.connection import Client, Connection, wait
from typing import Any, Callable, Sequence

from ..interrupt import sigint_blocked
from ..pickling import cloudpickle

#: seconds the workers have to start and connect (a fresh process imports torch)
START_SECONDS = 120.0
#: seconds a loop stays awake for its next chunk before it blocks (waking a process
#: whose core has gone idle costs the sender ~0.6 ms on a virtual machine)
AWAKE_SECONDS = 0.002


def _dumps(value: Any) -> bytes:
    """cloudpickle, both ways: a result or error may be of a class sent by value."""
    return cloudpickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)


def serve(address: str) -> None:
    """A worker's loop: connect to ``address``, then run each ``(fn, args)`` received and
    send back ``(True, result)`` or ``(False, exception)``, until the pool hangs up."""
    with Client(address) as conn:
        while True:
            awake_until = time.monotonic() + AWAKE_SECONDS
            while not conn.poll(0) and time.monotonic() < awake_until:
                os.sched_yield()  # awake, yet any other work on this core comes first
            try:
                fn, args = pickle.loads(conn.recv_bytes())
            except EOFError:
                return
            try:
                answer = True, fn(*args)
            except Exception as exc:  # noqa: BLE001 - re-raised by the pool, in order
                answer = False, exc
            try:
                data = _dumps(answer)
            except Exception as exc:  # noqa: BLE001 - e.g. a task_report() of a lambda
                data = _dumps((False, TypeError(
                    f"a chunk's result could not be pickled to send it back "
                    f"({type(exc).__name__}: {exc})")))
            conn.send_bytes(data)


class Loops:
    """The main side: one connected :func:`serve` call on each of ``n`` workers of
    ``executor`` (a ``BrokenExecutor`` when one dies or does not answer in time)."""

    def __init__(self, executor: Any, n: int, folder: str):
        self.conns: list[Connection] = []
        address = os.path.join(folder, f"loops-{uuid.uuid4().hex[:8]}.sock")
        with socket.socket(socket.AF_UNIX) as listener:
            listener.bind(address)
            listener.listen(n)
            listener.settimeout(0.05)
            with sigint_blocked():  # the workers start deaf to a terminal's Ctrl-C
                futures = [executor.submit(serve, address) for _ in range(n)]
            deadline = time.monotonic() + START_SECONDS
            try:
                while len(self.conns) < n:
                    try:
                        sock, _ = listener.accept()
                    except socket.timeout:
                        ended = [f for f in futures if f.done()]
                        if ended or time.monotonic() > deadline:
                            why = (repr(ended[0].exception()) if ended else
                                   f"no answer in {START_SECONDS:g} s")
                            raise BrokenExecutor(f"a worker did not start ({why})")
                        continue
                    sock.setblocking(True)
                    self.conns.append(Connection(sock.detach()))
            except BaseException:
                self.close()
                raise
            finally:
                os.unlink(address)

    def run(self, fn: Callable[..., Any], args_list: Sequence[tuple], todo: Sequence[int],
            done: dict, timeout: float | None) -> None:
        """``fn(*args_list[i])`` for each ``i`` in ``todo``, handed out in order to the
        loops as they come free, each answer into ``done[i]``; ``EOFError`` or
        ``OSError``: a worker died; ``TimeoutError``: a chunk ran over ``timeout`` s from
        its hand-out (``.late``: which)."""
        queue = collections.deque(todo)
        idle, busy = list(self.conns), {}  # busy: connection -> (chunk, handed out at)
        while queue or busy:
            while queue and idle:
                conn, i = idle.pop(0), queue.popleft()
                conn.send_bytes(_dumps((fn, args_list[i])))
                busy[conn] = i, time.monotonic()
            ready = wait(list(busy), None if timeout is None else max(
                0.0, min(t for _, t in busy.values()) + timeout - time.monotonic()))
            if not ready:  # the oldest chunk's time is up (or nearly: wait again)
                late = [i for i, t in busy.values() if time.monotonic() - t >= timeout]
                if late:
                    error = TimeoutError(f"a chunk ran over {timeout:g} s")
                    error.late = late
                    raise error
            for conn in ready:
                done[busy.pop(conn)[0]] = pickle.loads(conn.recv_bytes())
                idle.append(conn)

    def close(self) -> None:
        for conn in self.conns:
            conn.close()
        self.conns = []
