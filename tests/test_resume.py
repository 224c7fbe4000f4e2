"""Resuming a run from its checkpoint: bit-identical to an uninterrupted run; a resume
that would change the result is refused."""
from __future__ import annotations

import json

import cloudpickle
import numpy as np
import pytest
import torch

import es_search
from es_search import checkpoint
from es_search.output import read_history
from es_search.settings import describe

import reliability_agents as agents

cloudpickle.register_pickle_by_value(agents)  # workers need not import tests/
from compare import same_history, same_weights  # noqa: E402

SEED = 11
KW = dict(population=4, sigma=0.3, seed=SEED, progress=False)


# ----------------------------------------------------------------- checkpoint + resume
def test_resume_extends_a_run_bit_identically(tmp_path):
    full = es_search.run(agents.Vec(), generations=6, n_jobs=1, **KW)
    es_search.run(agents.Vec(), generations=2, n_jobs=1, out=tmp_path, **KW)
    resumed = es_search.run(agents.Vec(), generations=6, n_jobs=1, out=tmp_path,
                            resume=True, **KW)
    assert same_history(resumed.history, full.history)
    assert [r["generation"] for r in resumed.history] == list(range(6))
    assert same_weights(resumed.best_weights, full.best_weights)
    assert resumed.best_score == full.best_score
    assert resumed.evaluations == full.evaluations
    assert same_history(read_history(tmp_path / "history.jsonl"), full.history)
    assert same_weights(torch.load(tmp_path / "best_weights.pt"), full.best_weights)
    assert same_weights(resumed.center_weights, full.center_weights)
    assert same_weights(torch.load(tmp_path / "center_weights.pt"), full.center_weights)
    # a finished run resumed with the same length does no work and gives the same
    again = es_search.run(agents.Vec(), generations=6, n_jobs=1, out=tmp_path,
                          resume=True, **KW)
    assert same_history(again.history, full.history) and again.best_score == full.best_score


def test_resume_without_checkpoint_starts_fresh(tmp_path):
    a = es_search.run(agents.Vec(), generations=2, n_jobs=1, **KW)
    b = es_search.run(agents.Vec(), generations=2, n_jobs=1, out=tmp_path / "new",
                      resume=True, **KW)
    assert same_history(a.history, b.history)


def test_checkpoint_written_every_generation(tmp_path):
    seen = []

    def look(record):
        ckpt = checkpoint.load(tmp_path / checkpoint.CHECKPOINT)
        seen.append((record["generation"], ckpt["generation"], ckpt["history_lines"]))

    es_search.run(agents.Vec(), generations=3, n_jobs=1, out=tmp_path, callbacks=[look],
                  **KW)
    assert seen == [(0, 1, 1), (1, 2, 2), (2, 3, 3)]


@pytest.mark.parametrize("change, named", [
    (dict(population=5), "strategy.population: 4 in the checkpoint, 5 now"),
    (dict(sigma=0.2), "strategy.sigma: 0.3 in the checkpoint, 0.2 now"),
    (dict(seed=12), "seed: 11 in the checkpoint, 12 now"),
    (dict(score_kwargs={"a": 1}), "score_kwargs.a"),
    (dict(strategy_options={"reevaluate": True}), "strategy.reevaluate"),
])
def test_resume_refuses_a_changed_config(tmp_path, change, named):
    es_search.run(agents.Vec(), generations=1, n_jobs=1, out=tmp_path, **KW)
    with pytest.raises(es_search.CheckpointError, match="cannot resume") as info:
        es_search.run(agents.Vec(), generations=3, n_jobs=1, out=tmp_path, resume=True,
                      **{**KW, **change})
    assert named in str(info.value)


def test_resume_refuses_another_agent_class_and_shortening(tmp_path):
    es_search.run(agents.Vec(), generations=3, n_jobs=1, out=tmp_path, **KW)
    with pytest.raises(es_search.CheckpointError, match="agent: .*Vec.* .*NonFinite"):
        es_search.run(agents.NonFinite(), generations=3, n_jobs=1, out=tmp_path,
                      resume=True, **KW)
    with pytest.raises(ValueError, match="already completed 3 generations"):
        es_search.run(agents.Vec(), generations=2, n_jobs=1, out=tmp_path, resume=True,
                      **KW)


def test_corrupt_torn_or_inconsistent_checkpoint_is_refused(tmp_path):
    es_search.run(agents.Vec(), generations=2, n_jobs=1, out=tmp_path, **KW)
    path = tmp_path / checkpoint.CHECKPOINT
    good = path.read_bytes()
    flipped = bytearray(good)
    flipped[len(good) // 2] ^= 0x04
    path.write_bytes(bytes(flipped))
    with pytest.raises(es_search.CheckpointError, match="checksum mismatch"):
        es_search.run(agents.Vec(), generations=3, n_jobs=1, out=tmp_path, resume=True, **KW)
    path.write_bytes(good[:-10])
    with pytest.raises(es_search.CheckpointError, match="torn or truncated"):
        es_search.run(agents.Vec(), generations=3, n_jobs=1, out=tmp_path, resume=True, **KW)
    path.write_bytes(good)
    history = tmp_path / "history.jsonl"
    history.write_text(history.read_text().replace('"generation": 0', '"generation": 9'))
    with pytest.raises(es_search.CheckpointError, match="history line"):
        es_search.run(agents.Vec(), generations=3, n_jobs=1, out=tmp_path, resume=True, **KW)


def test_history_lines_after_the_checkpoint_are_dropped_on_resume(tmp_path):
    """A crash between the history line and the checkpoint (or a torn last line)."""
    full = es_search.run(agents.Vec(), generations=4, n_jobs=1, **KW)
    es_search.run(agents.Vec(), generations=2, n_jobs=1, out=tmp_path, **KW)
    with open(tmp_path / "history.jsonl", "a") as f:
        f.write('{"generation": 2, "best_sc')  # torn
    (tmp_path / ".checkpoint.pkl.x1y2.tmp").write_bytes(b"half a checkpoint")
    resumed = es_search.run(agents.Vec(), generations=4, n_jobs=1, out=tmp_path,
                            resume=True, **KW)
    assert same_history(resumed.history, full.history)
    assert same_history(read_history(tmp_path / "history.jsonl"), full.history)
    assert not list(tmp_path.glob(".*.tmp"))

def test_a_tensor_in_score_kwargs_is_saved_once_and_compared_exactly(tmp_path):
    """A data set passed as a keyword: written once (score_kwargs.pkl), not into every
    checkpoint; config.json and the checkpoint hold its digest; a resume with an equal
    tensor (another object) goes on bit-identically, one changed value is refused."""
    data = torch.arange(250_000, dtype=torch.float32)  # 1 MB
    full = es_search.run(agents.UsesData(), generations=4, n_jobs=1,
                         score_kwargs={"data": data, "note": "x"}, **KW)
    es_search.run(agents.UsesData(), generations=2, n_jobs=2, out=tmp_path,
                  score_kwargs={"data": data, "note": "x"}, **KW)
    assert (tmp_path / "checkpoint.pkl").stat().st_size < 50_000
    assert (tmp_path / "score_kwargs.pkl").stat().st_size > 1_000_000
    recorded = json.loads((tmp_path / "config.json").read_text())["score_kwargs"]
    assert recorded["note"] == "x" and recorded["data"]["shape"] == [250_000]
    assert recorded["data"]["dtype"] == "float32" and len(recorded["data"]["sha256"]) == 64
    resumed = es_search.run(agents.UsesData(), generations=4, n_jobs=2, out=tmp_path,
                            resume=True, score_kwargs={"data": data.clone(), "note": "x"},
                            **KW)
    assert same_history(resumed.history, full.history)
    changed = data.clone()
    changed[7] += 1
    with pytest.raises(es_search.CheckpointError, match=r"score_kwargs\.data\.sha256"):
        es_search.run(agents.UsesData(), generations=5, n_jobs=1, out=tmp_path,
                      resume=True, score_kwargs={"data": changed, "note": "x"}, **KW)


def test_a_checkpoint_that_holds_score_kwargs_values_still_resumes():
    """Checkpoints written before digests held the values: compared as digests."""
    data = torch.arange(4.0)
    saved = {"score_kwargs": {"data": data, "b": [1, np.arange(2)]}}
    current = {"score_kwargs": describe({"data": data.clone(), "b": [1, np.arange(2)]})}
    checkpoint.check_resumable({**saved}, current, "here")
    with pytest.raises(es_search.CheckpointError, match=r"score_kwargs\.data"):
        checkpoint.check_resumable(saved, {"score_kwargs": describe({"data": data + 1,
                                                                     "b": [1, np.arange(2)]})},
                                   "here")


def test_resume_accepts_equal_score_kwargs_objects_without_eq(tmp_path):
    kwargs = {"spec": agents.Holder.__new__(agents.Holder)}  # no __eq__, pickles equal
    es_search.run(agents.Vec(), generations=1, n_jobs=1, out=tmp_path, score_kwargs=kwargs,
                  **KW)
    again = {"spec": agents.Holder.__new__(agents.Holder)}
    result = es_search.run(agents.Vec(), generations=2, n_jobs=1, out=tmp_path,
                           score_kwargs=again, resume=True, **KW)
    assert len(result.history) == 2
