"""The checkpoint format (es_search.checkpoint): round trip, any corruption detected,
atomic writes."""
from __future__ import annotations

import math
import os

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp

import es_search
from es_search import checkpoint
from es_search.strategies.hill_climb import HillClimbState


SEED = 11
KW = dict(population=4, sigma=0.3, seed=SEED, progress=False)


# ----------------------------------------------------------------- checkpoint format
leaves = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(),
                   st.binary(max_size=20),
                   hnp.arrays(st.sampled_from([np.float64, np.float32, np.int64]),
                              hnp.array_shapes(max_dims=2, max_side=4)))
values = st.recursive(leaves, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=5), inner, max_size=4)),
    max_leaves=12)


def _same(a, b):
    if isinstance(a, np.ndarray):
        return (isinstance(b, np.ndarray) and a.dtype == b.dtype
                and a.tobytes() == b.tobytes() and a.shape == b.shape)
    if isinstance(a, float):
        return isinstance(b, float) and (a == b or (math.isnan(a) and math.isnan(b)))
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(
            _same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(map(_same, a, b))
    return type(a) is type(b) and a == b


@settings(max_examples=80, deadline=None)
@given(data=st.dictionaries(st.text(max_size=8), values, max_size=5),
       center=hnp.arrays(np.float64, st.integers(0, 20)), score=st.floats())
def test_checkpoint_round_trip(data, center, score):
    state = HillClimbState(center, score, 0.5)
    blob = checkpoint.dumps({"data": data, "state": state})
    back = checkpoint.loads(blob)
    assert back.keys() == {"data", "state"} and _same(back["data"], data)
    assert _same(back["state"].center, center) and _same(back["state"].center_score, score)


@settings(max_examples=150, deadline=None)
@given(data=st.dictionaries(st.text(max_size=8), values, max_size=3), where=st.data())
def test_checkpoint_any_truncation_or_bit_flip_is_detected(data, where):
    blob = checkpoint.dumps(data)
    cut = where.draw(st.integers(0, len(blob) - 1))
    with pytest.raises(es_search.CheckpointError):
        checkpoint.loads(blob[:cut])
    flipped = bytearray(blob)
    flipped[where.draw(st.integers(0, len(blob) - 1))] ^= 1 << where.draw(st.integers(0, 7))
    with pytest.raises(es_search.CheckpointError):
        checkpoint.loads(bytes(flipped))


def test_checkpoint_save_is_atomic_and_leaves_no_temporary_files(tmp_path):
    path = tmp_path / "c.pkl"
    checkpoint.save(path, {"a": 1})
    checkpoint.save(path, {"a": 2})
    assert checkpoint.load(path) == {"a": 2}
    assert os.listdir(tmp_path) == ["c.pkl"]


def test_a_checkpoint_of_an_earlier_format_is_refused_before_any_work(monkeypatch):
    monkeypatch.setattr(checkpoint, "VERSION", checkpoint.VERSION - 1)
    old = checkpoint.dumps({"a": 1})  # as an earlier es_search wrote it
    monkeypatch.undo()
    with pytest.raises(es_search.CheckpointError, match=rf"format version "
                       rf"{checkpoint.VERSION - 1}; this es_search reads version "
                       rf"{checkpoint.VERSION}\).*with the es_search that wrote it"):
        checkpoint.loads(old)
