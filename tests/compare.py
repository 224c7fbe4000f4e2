"""How tests compare two runs (every reproducible field, bit for bit) and read or hold a
run folder."""
import contextlib
import json
from pathlib import Path

import torch

from es_search.files import from_json
from es_search.lock import acquire


def read_history(path):
    """The records of a ``history.jsonl`` (non-finite floats restored)."""
    with open(path) as f:
        return [from_json(json.loads(line)) for line in f if line.strip()]


def same_history(a, b):
    """Equal records, every field but the wall-clock ``seconds`` (NaN == NaN)."""
    def norm(r):
        return {k: [repr(x) for x in v] if isinstance(v, list) else repr(v)
                for k, v in r.items() if k != "seconds"}
    return [norm(r) for r in a] == [norm(r) for r in b]


def same_weights(a, b):
    """Equal weight dicts: the same names, bit-identical tensors."""
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@contextlib.contextmanager
def claim(path):
    """The folder ``path``, locked while the block runs, as a run writing it holds it."""
    with acquire(path):
        yield Path(path)
