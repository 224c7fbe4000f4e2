"""Process control, in one place: Ctrl-C and SIGTERM (never in the middle of writing a
checkpoint and its history line), the lifetime of this machine's worker processes (they
end with their parent; the command releases them when its work is done), and the
command's start and exit (a Ctrl-C while it imports, a closed stdout)."""
from __future__ import annotations

import os
import signal
import sys
import threading
import time
import weakref
from typing import Any


class Terminated(KeyboardInterrupt):
    """A SIGTERM (``kill PID``, a job scheduler's stop) received while es_search's
    workers ran: taken the Ctrl-C way (workers killed at once, the checkpoint whole, the
    resume message), so it is a ``KeyboardInterrupt``; the command line exits 143."""


class _Terminate:
    """The SIGTERM handler: raises :class:`Terminated` in the process that installed
    it. A process forked from it (a multiprocessing worker) gets Python's default back
    at once (see ``_default_in_child``): ``Pool.terminate`` kills its workers with
    SIGTERM, and a worker stuck in C (a lock inherited held) would never run a Python
    handler."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.users = 0  # the sigterm_as_interrupt blocks open on it (nested or not)

    def __call__(self, signum: int, frame: Any) -> None:
        if os.getpid() != self.pid:  # a child forked before the reset below ran
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        raise Terminated(f"received signal {signum} (SIGTERM)")


#: sigterm_as_interrupt blocks open in this process: while one is, es_search starts or
#: runs workers, and a process forked then is one of them (or a pool's respawn)
_open_blocks = 0


def _default_in_child() -> None:
    """SIGTERM's default in a forked worker. A pool stops its workers with SIGTERM; a
    handler inherited from the parent (ours, or the program's own, such as the
    ``sys.exit`` Ray installs) would run in the worker instead, and one blocked on a
    queue lock never exits: the pool's terminate then waits for it forever."""
    global _open_blocks
    if _open_blocks or isinstance(signal.getsignal(signal.SIGTERM), _Terminate):
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    _open_blocks = 0  # the child's own blocks, none yet


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_default_in_child)


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


class sigterm_as_interrupt:
    """Context manager: a SIGTERM inside the block raises :class:`Terminated`.

    Python's default for SIGTERM is to die at once, which leaves a pool's worker
    processes behind (one may stay blocked writing to its dead parent). Only in the main
    thread and only while the default handler is installed: a program that handles
    SIGTERM itself keeps its handler.
    """

    def __enter__(self) -> "sigterm_as_interrupt":
        global _open_blocks
        _open_blocks += 1
        self._handler: _Terminate | None = None
        if not _in_main_thread():
            return self
        current = signal.getsignal(signal.SIGTERM)
        if current == signal.SIG_DFL:
            current = _Terminate()
            signal.signal(signal.SIGTERM, current)
        if isinstance(current, _Terminate) and current.pid == os.getpid():
            current.users += 1  # shared by every open block, whichever closes first
            self._handler = current
        return self

    def __exit__(self, *exc_info: object) -> None:
        global _open_blocks
        _open_blocks = max(0, _open_blocks - 1)
        handler, self._handler = self._handler, None
        if handler is None:
            return
        handler.users -= 1
        if handler.users == 0 and signal.getsignal(signal.SIGTERM) is handler:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)


#: (signal, is its handler one this module defers?, what is raised at the block's end)
_DEFERRED = ((signal.SIGINT, lambda h: h is signal.default_int_handler, KeyboardInterrupt),
             (signal.SIGTERM, lambda h: isinstance(h, _Terminate), Terminated))


class deferred_sigint:
    """Context manager: a SIGINT (Ctrl-C) that arrives inside the block is raised as
    ``KeyboardInterrupt`` when the block ends, so what the block writes stays whole; so
    is a SIGTERM under :class:`sigterm_as_interrupt` (as :class:`Terminated`).

    Only in the main thread, and only for a signal whose handler is the one above;
    elsewhere it does nothing.
    """

    def __enter__(self) -> "deferred_sigint":
        self._received: list[type] = []
        self._previous: list[tuple[int, Any]] = []
        if _in_main_thread():
            for signum, deferred, error in _DEFERRED:
                if deferred(signal.getsignal(signum)):
                    self._previous.append((signum, signal.signal(
                        signum, lambda *_, error=error: self._received.append(error))))
        return self

    def __exit__(self, *exc_info: object) -> None:
        for signum, previous in self._previous:
            signal.signal(signum, previous)
        if self._received:
            raise self._received[0]


class TimeLimit(BaseException):
    """Raised by :func:`time_limit` when its block runs too long (a BaseException, so
    that the ``except Exception`` of the code it interrupts does not swallow it)."""


class time_limit:
    """Context manager: raise :class:`TimeLimit` in the block after ``seconds`` (None:
    no limit). A SIGALRM timer, so only in the main thread, only while no other SIGALRM
    handler is installed, and only where Python code runs (a call stuck in C finishes
    first); elsewhere the block runs unbounded."""

    def __init__(self, seconds: float | None):
        self.seconds = seconds
        self._previous: Any = None

    def __enter__(self) -> "time_limit":
        if self.seconds is None or not hasattr(signal, "setitimer") or \
                not _in_main_thread() or \
                signal.getsignal(signal.SIGALRM) not in (signal.SIG_DFL, None):
            return self

        def expired(signum: int, frame: Any) -> None:
            raise TimeLimit(f"over {self.seconds:g} s")

        self._previous = signal.signal(signal.SIGALRM, expired)
        signal.setitimer(signal.ITIMER_REAL, self.seconds)
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._previous is not None:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self._previous)
            self._previous = None


# ------------------------------------------------------------ the command: its start and exit
def _interrupted_while_starting(signum: int, frame: Any) -> None:
    """SIGINT while the command imports its modules (torch takes a second or more):
    the command line's one line and exit status 130, not a traceback of the import."""
    try:
        sys.stderr.write("es-search: interrupted\n")
        sys.stderr.flush()
    except (OSError, ValueError, AttributeError):  # no stderr: the exit status says it
        pass
    raise SystemExit(130)


def guard_command_start() -> None:
    """The ``es-search`` command's first act (:mod:`es_search.__main__`): a Ctrl-C
    before its ``main()`` takes over (:func:`end_command_start`) ends it with one line,
    exit 130, not a traceback of torch's import. Nothing else calls it: a program that
    imports es_search gets its KeyboardInterrupt as usual."""
    if _in_main_thread() and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _interrupted_while_starting)


def end_command_start() -> None:
    """Python's Ctrl-C (KeyboardInterrupt) again, which the command's ``main()``
    handles, where :func:`guard_command_start` had replaced it."""
    if _in_main_thread() and signal.getsignal(signal.SIGINT) is _interrupted_while_starting:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def silence_stdout() -> None:
    """Point stdout at /dev/null, so that Python's flush at exit does not fail again on
    the closed pipe (the recipe of Python's signal module documentation)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # no real file descriptor (captured)
        pass


# ------------------------------------------------------------ local workers' lifetime
PARENT_POLL_SECONDS = 1.0


def watch_parent() -> None:
    """A local worker's first act (the executor's initializer): end this process within
    ``PARENT_POLL_SECONDS`` of its parent's death. Ctrl-C and SIGTERM stop the workers
    themselves, but a ``kill -9`` or the OOM killer gives the run no chance to: its
    workers would finish their chunk, then idle for loky's 300 s timeout, holding their
    memory. A daemon thread polls ``os.getppid()`` (a dead parent's children are
    adopted by another)."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_POLL_SECONDS)
        os._exit(1)  # nobody is left to read what this worker would compute

    threading.Thread(target=watch, name="es_search-parent-watch", daemon=True).start()


#: the executors whose workers this process started (released by release_workers)
_EXECUTORS: "weakref.WeakSet[Any]" = weakref.WeakSet()


def own_workers(executor: Any) -> Any:
    """Note a loky executor of this process's: :func:`release_workers` ends its
    workers. Returns ``executor``."""
    _EXECUTORS.add(executor)
    return executor


def released(executor: Any) -> bool:
    """True once :func:`release_workers` ended ``executor``'s workers."""
    return executor not in _EXECUTORS


def release_workers() -> None:
    """End this process's local workers now, Ctrl-C held off for the few milliseconds it
    takes. loky keeps its workers for the next run and, at interpreter exit, waits for
    them (seconds, in which a Ctrl-C printed a traceback and exited 0): the command
    releases them once its work is done."""
    held = _in_main_thread()
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN) if held else None
    try:
        for executor in list(_EXECUTORS):
            _EXECUTORS.discard(executor)
            executor.shutdown(wait=True, kill_workers=True)
    finally:
        if held:
            signal.signal(signal.SIGINT, previous)
