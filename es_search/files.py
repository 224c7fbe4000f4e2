"""Files written safely: atomic replacement, JSON with non-finite floats."""
from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any, Callable


def check_writable(what: str, folder: Any) -> None:
    """A ValueError ("``what`` cannot be written: why") when ``folder`` could not hold new
    files; tried, not guessed (permissions say nothing to root, /proc refuses every file)."""
    folder = Path(folder)
    base = next(p for p in (folder, *folder.parents) if p.exists())  # the root exists
    problem = None if base.is_dir() else f"{str(base)!r} is a file, not a folder (choose " \
        "a folder; it is created if missing)"
    try:
        if problem is None:
            fd, name = tempfile.mkstemp(dir=base, prefix=".es_search-check-")
            os.close(fd)
            os.unlink(name)
    except OSError as exc:
        problem = f"no file can be created in {str(base)!r} ({exc.strerror or exc})"
    if problem:
        raise ValueError(f"{what} cannot be written: {problem}")


def atomic_write(path: Path, write: Callable[[Any], None], mode: str = "wb") -> None:
    """Write through a temporary file in the same folder, fsync, then ``os.replace``. The
    file gets a new file's permissions (``mkstemp``'s would be private to its owner)."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        if hasattr(os, "fchmod"):
            mask = os.umask(0o022)  # the only way to read it
            os.umask(mask)
            os.fchmod(fd, 0o666 & ~mask)
        with os.fdopen(fd, mode) as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def to_json(value: Any) -> Any:
    """JSON-safe: non-finite floats become strings ("nan", "inf", "-inf")."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return repr(value)


def from_json(value: Any) -> Any:
    """Inverse of :func:`to_json` for floats."""
    if value in ("nan", "inf", "-inf"):
        return float(value)
    if isinstance(value, dict):
        return {k: from_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [from_json(v) for v in value]
    return value


def as_read_back(value: Any) -> Any:
    """``value`` as it reads back from a JSON file (tuples become lists)."""
    return from_json(json.loads(json.dumps(to_json(value))))


def dump_json(path: Path, data: Any, sort_keys: bool = True) -> None:
    """``data`` as indented JSON (non-finite floats kept), written atomically."""
    text = json.dumps(to_json(data), indent=2, sort_keys=sort_keys)
    atomic_write(path, lambda f: f.write(text + "\n"), mode="w")

