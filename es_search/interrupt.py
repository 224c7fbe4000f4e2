"""Process control, in one place: Ctrl-C and SIGTERM (never in the middle of writing a
checkpoint and its history line), the lifetime of this machine's worker processes (they
end with their parent; the command releases them when its work is done), and the
command's start and exit (a Ctrl-C while it imports, a closed stdout)."""
from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from typing import Any, Iterator


class Terminated(KeyboardInterrupt):
    """A SIGTERM (``kill PID``, a job scheduler's stop) received while es_search's
    workers ran, taken the Ctrl-C way; the command line exits 143."""


class _Terminate:
    """The SIGTERM handler: raises :class:`Terminated` in the process that installed
    it; Python's default in a child forked without ``_default_in_child``."""

    def __init__(self) -> None:
        self.pid = os.getpid()

    def __call__(self, signum: int, frame: Any) -> None:
        if os.getpid() != self.pid:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        raise Terminated(f"received signal {signum} (SIGTERM)")


#: the sigterm_as_interrupt blocks open (a process forked meanwhile is a worker)
_OPEN: list["sigterm_as_interrupt"] = []


def _default_in_child() -> None:
    """SIGTERM's default in a forked worker, which its pool stops with SIGTERM: an
    inherited handler (ours, or the program's, such as Ray's ``sys.exit``) run by a
    worker blocked on a queue lock never exits, and the pool waits for it forever."""
    if _OPEN or isinstance(signal.getsignal(signal.SIGTERM), _Terminate):
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    _OPEN.clear()  # the child's own blocks, none yet


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_default_in_child)


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


class sigterm_as_interrupt:
    """Context manager: a SIGTERM inside the block raises :class:`Terminated` (dying at
    once would leave a pool's workers behind). Only in the main thread and in place of
    the default handler; blocks may overlap."""

    def __enter__(self) -> "sigterm_as_interrupt":
        self.main = _in_main_thread()
        _OPEN.append(self)
        if self.main and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
            signal.signal(signal.SIGTERM, _Terminate())
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self in _OPEN:
            _OPEN.remove(self)
        if self.main and not any(block.main for block in _OPEN) and \
                isinstance(signal.getsignal(signal.SIGTERM), _Terminate):
            signal.signal(signal.SIGTERM, signal.SIG_DFL)


@contextlib.contextmanager
def _handling(handlers: dict[int, Any]) -> Iterator[None]:
    """``handlers`` (signal -> handler) while the block runs (in the main thread only)."""
    previous = ({signum: signal.signal(signum, handler) for signum, handler in handlers.items()}
                if _in_main_thread() else {})
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


@contextlib.contextmanager
def deferred_sigint() -> Iterator[None]:
    """Context manager: a SIGINT (or a SIGTERM under :class:`sigterm_as_interrupt`)
    inside the block is raised when the block ends, so what it writes stays whole. Only
    in the main thread, for a signal whose handler is Python's or ours."""
    received: list[type] = []
    ours = {signal.SIGINT: (signal.getsignal(signal.SIGINT) is signal.default_int_handler,
                            KeyboardInterrupt),
            signal.SIGTERM: (isinstance(signal.getsignal(signal.SIGTERM), _Terminate),
                             Terminated)}
    try:
        with _handling({signum: lambda *_, error=error: received.append(error)
                        for signum, (deferred, error) in ours.items() if deferred}):
            yield
    finally:
        if received:
            raise received[0]


# ------------------------------------------------------------ the command: its start and exit
def _interrupted_while_starting(signum: int, frame: Any) -> None:
    """SIGINT while the command imports its modules: one line and exit status 130."""
    with contextlib.suppress(OSError, ValueError, AttributeError):  # no stderr: the status
        sys.stderr.write("es-search: interrupted\n")  # says it
        sys.stderr.flush()
    raise SystemExit(130)


def guard_command_start() -> None:
    """The ``es-search`` command's first act: a Ctrl-C before :func:`end_command_start`
    ends it with one line, exit 130, not a traceback of torch's import."""
    if _in_main_thread() and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _interrupted_while_starting)


def end_command_start() -> None:
    """Python's Ctrl-C again, where :func:`guard_command_start` replaced it."""
    if _in_main_thread() and signal.getsignal(signal.SIGINT) is _interrupted_while_starting:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def silence_stdout() -> None:
    """Point stdout at /dev/null, so that Python's flush at exit does not fail again on
    the closed pipe (the recipe of Python's signal module documentation)."""
    with contextlib.suppress(OSError, ValueError, AttributeError):  # no real descriptor
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


# ------------------------------------------------------------ local workers' lifetime
PARENT_POLL_SECONDS = 1.0


def watch_parent() -> None:
    """A local worker's first act (the executor's initializer): end this process within
    ``PARENT_POLL_SECONDS`` of its parent's death (after a ``kill -9``, nothing else stops it)."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_POLL_SECONDS)
        os._exit(1)  # nobody is left to read what this worker would compute

    threading.Thread(target=watch, name="es_search-parent-watch", daemon=True).start()


@contextlib.contextmanager
def sigint_blocked() -> Iterator[None]:
    """Context manager: SIGINT blocked in this thread during the block. The processes it
    starts (a pool's workers, and those loky's manager thread starts later) inherit the mask,
    so a terminal's Ctrl-C, sent to the whole process group, reaches only this process, which
    stops them (a worker interrupted while importing printed pages of tracebacks). A SIGINT
    meanwhile comes at the block's end (as loky starts its resource tracker: bpo-33613)."""
    if not hasattr(signal, "pthread_sigmask"):  # Windows: no process groups' Ctrl-C
        yield
        return
    # multiprocessing's resource tracker, which loky's workers use, unblocks SIGINT once
    # it has started (Python 3.11-3.12): start it first, outside the block
    from multiprocessing import resource_tracker
    resource_tracker.ensure_running()
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


#: loky workers kept for the next run of as many, ``(executor, n_workers)``, at most one
#: (``backends.LocalPool`` takes it while open)
KEPT: list[tuple[Any, int]] = []


def release_workers() -> None:
    """End the workers kept for the next run now, Ctrl-C held off meanwhile (loky waits
    for them at interpreter exit: seconds, in which a Ctrl-C printed a traceback)."""
    with _handling({signal.SIGINT: signal.SIG_IGN}):
        while KEPT:
            KEPT.pop()[0].shutdown(wait=True, kill_workers=True)
