"""The run folder's lock (``fcntl.flock`` on ``.lock``), held while a run writes it; the
kernel releases it when the process dies, however it dies."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no lock
    fcntl = None


LOCK = ".lock"  # the lock file in the run folder


class OutFolderError(ValueError):
    """The out folder cannot be created or written, is in use, or holds a run."""


def acquire(path: Any, reader: str = "") -> Any:
    """Create the folder ``path`` if needed and take its lock; return the open lock file
    (closing it gives the lock back; a ``with`` block holds it); an :class:`OutFolderError`
    when the folder cannot be written or another run, even in this process (a flock),
    holds the lock. ``reader``: what a reader that writes in the folder does ("test it"),
    which the refusal tells to wait for the run's end."""
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
        handle = open(path / LOCK, "a+")
    except OSError as exc:  # a file there, too: mkdir's FileExistsError
        why = "it is a file, not a folder (choose a folder path; it is created if missing)" \
            if path.exists() and not path.is_dir() else \
            f"{exc.strerror or exc} (choose a folder you can write)"
        raise OutFolderError(f"cannot use {path} as the out folder: {why}") from None
    try:
        if fcntl is not None:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.seek(0)
        owner = handle.read().strip() or "another process"
        handle.close()
        owner = "of this process" if owner == f"pid {os.getpid()}" else f"({owner})"
        raise OutFolderError(f"the out folder {path} is in use by another es_search run "
                             f"{owner}; wait for it to finish, or choose another out folder"
                             + (f" ({reader} once the run has ended)" if reader else "")
                             ) from None
    handle.seek(0)
    handle.truncate()
    handle.write(f"pid {os.getpid()}\n")
    handle.flush()
    return handle

