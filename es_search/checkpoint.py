"""Checkpoints: everything a run needs to continue, in one file, written atomically
(:func:`es_search.files.atomic_write`), and the checks that a resume would not change the
run. The file: ``MAGIC (16 bytes) | version (uint32 LE) | length (uint64 LE) | sha256 (32
bytes) | payload``, a cloudpickle of a dict; the SHA-256 (over version, length and
payload) refuses a torn or corrupt file with :class:`CheckpointError`.
"""
from __future__ import annotations

import contextlib
import hashlib
import pickle
import struct
from pathlib import Path
from typing import Any, Mapping

from .errors import warn_user
from .files import atomic_write
from .pickling import cloudpickle

MAGIC = b"ES_SEARCH_CKPT\x00\x01"
VERSION = 3  # 2: the kept centres as weight dicts; 3: the best as one, history_lines gone
_HEADER = struct.Struct("<16sIQ32s")  # magic, version, payload length, sha256


class CheckpointError(ValueError):
    """A checkpoint that is corrupt, torn, of another format, or of another run."""


def _digest(version: int, length: int, payload: bytes) -> bytes:
    return hashlib.sha256(struct.pack("<IQ", version, length) + payload).digest()


def dumps(data: Mapping[str, Any]) -> bytes:
    """The bytes of a checkpoint holding ``data``."""
    payload = cloudpickle.dumps(dict(data), protocol=pickle.HIGHEST_PROTOCOL)
    header = _HEADER.pack(MAGIC, VERSION, len(payload),
                          _digest(VERSION, len(payload), payload))
    return header + payload


def loads(blob: bytes, where: str = "checkpoint") -> dict:
    """The dict stored in ``blob``; :class:`CheckpointError` if it is not intact."""
    magic, version, length, digest = _HEADER.unpack_from(blob.ljust(_HEADER.size, b"\0"))
    payload, why = blob[_HEADER.size:], None
    advice = "Restore a copy of it, or delete it to start the run again from scratch."
    if len(blob) < _HEADER.size:
        why = f"{len(blob)} bytes, shorter than its header: torn or truncated"
    elif magic != MAGIC:
        why = "wrong magic bytes"
    elif len(payload) != length:
        why = f"payload of {len(payload)} bytes, the header says {length}: torn or truncated"
    elif _digest(version, length, payload) != digest:
        why = "checksum mismatch: corrupt"
    elif version != VERSION:
        why = f"format version {version}; this es_search reads version {VERSION}"
        advice = "Load or continue it with the es_search that wrote it, or start the run again."
    if why:
        raise CheckpointError(f"{where} is not a usable es_search checkpoint ({why}); it was "
                              f"not loaded. {advice}")
    try:
        return pickle.loads(payload)
    except Exception as exc:  # intact bytes, but e.g. a class that no longer exists
        raise CheckpointError(f"{where} is intact but cannot be unpickled: "
                              f"{type(exc).__name__}: {exc}") from exc


def save(path: Any, data: Mapping[str, Any]) -> None:
    """Write ``data`` to ``path`` atomically."""
    blob = dumps(data)
    atomic_write(Path(path), lambda f: f.write(blob))


def load(path: Any) -> dict:
    """The dict saved at ``path``; :class:`CheckpointError` if torn or corrupt. Its readers
    look for the file first: a missing one means something else to each."""
    return loads(Path(path).read_bytes(), where=str(path))


# ----------------------------------------------------------------- resuming a run
#: config keys that define the result; a resume must match them exactly
DEFINING = ("agent", "num_evolved", "strategy", "seed", "score_kwargs",
            "score_batch_size")


def differences(saved: Mapping[str, Any], current: Mapping[str, Any],
                keys: Any = DEFINING, prefix: str = "") -> list[str]:
    """The differences between two configs, over ``keys`` (dicts recursed), as
    ``"strategy.population: 16 in the checkpoint, 32 now"``."""
    out = []
    for key in keys:
        a, b = saved.get(key, "<absent>"), current.get(key, "<absent>")
        if isinstance(a, Mapping) and isinstance(b, Mapping):
            out += differences(a, b, sorted(set(a) | set(b), key=lambda k: (
                k != "name", str(k))), f"{prefix}{key}.")  # a strategy's name first
        elif not _same(a, b):
            out.append(f"{prefix}{key}: {a!r} in the checkpoint, {b!r} now")
    return out


def _same(a: Any, b: Any) -> bool:
    """Equal, or (objects without ``__eq__``, numpy arrays) equal once pickled."""
    with contextlib.suppress(Exception):
        if bool(a == b):
            return True
    with contextlib.suppress(Exception):
        return cloudpickle.dumps(a) == cloudpickle.dumps(b)
    return False


class ResumeWarning(RuntimeWarning):
    """A run resumed with an agent whose plain settings (``config.json``'s
    ``agent_settings``) differ from those it started with."""


def check_resumable(saved: Mapping[str, Any], current: Mapping[str, Any],
                    where: str) -> None:
    """Refuse (:class:`CheckpointError`) a resume whose config would change the result."""
    diff = differences(saved, current)
    settings = differences(saved, current, ["agent_settings"])
    if settings and not diff:
        warn_user(f"resuming the run in {where} with an agent whose settings differ from "
                  f"the run's: " + "; ".join(s.replace("agent_settings.", "", 1)
                                             for s in settings) +
                  ". If score() depends on them, the resumed run will not equal an "
                  "uninterrupted one: build the agent as the run did, or start a new run "
                  "in another out folder.", ResumeWarning)
    if diff:
        raise CheckpointError(
            f"cannot resume the run in {where}: its configuration differs in "
            + "; ".join(diff) + f". Resume with the same {', '.join(DEFINING)} (what "
            f"defines the result; any other setting may change; score_batch_size is the "
            f"agent's), or use another out folder to start a new run.")
