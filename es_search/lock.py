"""The run folder's lock (``fcntl.flock`` on ``.lock``), held while a run writes it; the
kernel releases it when the process dies, however it dies."""
from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path
from typing import Any, Iterator

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no lock
    fcntl = None


LOCK = ".lock"  # the lock file in the run folder


class OutFolderError(ValueError):
    """The out folder cannot be created or written, is in use, or holds a run."""


_HELD: dict[str, list] = {}  # folder -> [open lock file, claims, the holding thread]
_HELD_LOCK = threading.Lock()


def acquire(path: Any) -> str:
    """Create the folder ``path`` if needed and take its lock (again, for the thread
    that holds it); return the key to :func:`release` it with. :class:`OutFolderError`
    when the folder cannot be written, or another process or thread holds the lock."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise OutFolderError(f"cannot use {path} as the out folder: it is a file, not a "
                             f"folder (choose a folder path; it is created if missing)")
    with _HELD_LOCK:
        try:
            path.mkdir(parents=True, exist_ok=True)
            key = str(path.resolve())
            held = _HELD.get(key)
            handle = None if held is not None else open(path / LOCK, "a+")
        except OSError as exc:
            raise OutFolderError(f"cannot use {path} as the out folder: {exc.strerror or exc}"
                                 f" (choose a folder you can write)") from None
        if held is not None:
            if held[2] != threading.get_ident():
                raise OutFolderError(
                    f"the out folder {path} is in use by another es_search run of this "
                    f"process (in another thread); wait for it to finish, or choose "
                    f"another out folder")
            held[1] += 1
            return key
        try:
            if fcntl is not None:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.seek(0)
            owner = handle.read().strip() or "another process"
            handle.close()
            raise OutFolderError(
                f"the out folder {path} is in use by another es_search run ({owner}); "
                f"wait for it to finish, or choose another out folder") from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()}\n")
        handle.flush()
        _HELD[key] = [handle, 1, threading.get_ident()]
        return key


def release(key: str) -> None:
    """Give back one claim taken by :func:`acquire`; the last one drops the lock."""
    with _HELD_LOCK:
        held = _HELD.get(key)
        if held is not None:
            held[1] -= 1
            if held[1] == 0:
                del _HELD[key]
                held[0].close()  # releases the flock


@contextlib.contextmanager
def held(path: Any, what: str) -> Iterator[None]:
    """The lock of the run folder ``path`` while a reader writes in it (``what`` it does:
    "test it"); refused while a run goes on in it."""
    try:
        key = acquire(path)
    except OutFolderError as exc:
        raise OutFolderError(f"{exc} ({what} once the run has ended)") from None
    try:
        yield
    finally:
        release(key)
