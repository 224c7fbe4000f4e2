"""Resuming a run from its checkpoint: bit-identical to an uninterrupted run; a resume
that would change the result is refused."""
from __future__ import annotations

import importlib
import json

import pytest
import torch

import es_search
from es_search import checkpoint
from es_search.folder import CHECKPOINT, RunFolder

import agents

from compare import read_history, same_history, same_weights  # noqa: E402

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


@pytest.mark.parametrize("every, generations, seen_expected", [
    (1, 3, [(0, 1), (1, 2), (2, 3)]),
    (3, 7, [(0, 0), (1, 0), (2, 3), (3, 3), (4, 3), (5, 6), (6, 7)]),
])
def test_checkpoint_written_every_n_generations_and_at_the_end(tmp_path, every, generations,
                                                               seen_expected):
    """(generation, the checkpoint's generation: its history lines) after each."""
    seen = []

    def look(record):
        ckpt = checkpoint.load(tmp_path / CHECKPOINT)
        seen.append((record["generation"], ckpt["generation"]))

    es_search.run(agents.Vec(), generations=generations, n_jobs=1, out=tmp_path,
                  callbacks=[look], checkpoint_every=every, **KW)
    assert seen == seen_expected
    assert checkpoint.load(tmp_path / CHECKPOINT)["generation"] == generations


@pytest.mark.parametrize("change, named", [
    (dict(population=5), "strategy.population: 4 in the checkpoint, 5 now"),
    (dict(sigma=0.2), "strategy.sigma: 0.3 in the checkpoint, 0.2 now"),
    (dict(seed=12), "seed: 11 in the checkpoint, 12 now"),
    (dict(score_kwargs={"a": 1}), "score_kwargs.a"),
    (dict(strategy_options={"reevaluate": True}), "strategy.reevaluate"),
    (dict(strategy="pgpe"),  # the name first, before the settings that differ with it
     "configuration differs in strategy.name: 'hill-climb' in the checkpoint, 'pgpe' now;"),
])
def test_resume_refuses_a_changed_config(tmp_path, change, named):
    es_search.run(agents.Vec(), generations=1, n_jobs=1, out=tmp_path, **KW)
    with pytest.raises(es_search.CheckpointError, match="cannot resume") as info:
        es_search.run(agents.Vec(), generations=3, n_jobs=1, out=tmp_path, resume=True,
                      **{**KW, **change})
    assert named in str(info.value)


def test_resume_refuses_another_agent_class_and_shortening(tmp_path, capsys):
    es_search.run(agents.Vec(), generations=3, n_jobs=1, out=tmp_path, **KW)
    with pytest.raises(es_search.CheckpointError, match="agent: .*Vec.* .*NonFinite"):
        es_search.run(agents.NonFinite(), generations=3, n_jobs=1, out=tmp_path,
                      resume=True, **KW)
    with pytest.raises(ValueError, match=r"^generations=2 is fewer than the 3 the run in "
                       r".* has already completed; resume it with generations >= 3$"):
        es_search.run(agents.Vec(), generations=2, n_jobs=1, out=tmp_path, resume=True,
                      **KW)
    from es_search.cli import main  # in the command's terms
    args = ["run", "sphere", "--out", str(tmp_path / "cli"), "--n-jobs", "1", "--no-progress"]
    assert main([*args, "--generations", "3"]) == 0
    assert main([*args, "--generations", "2", "--resume"]) == 2
    assert "resume it with --generations >= 3" in capsys.readouterr().err


def test_resume_warns_when_the_agents_own_settings_changed(tmp_path):
    import warnings
    es_search.run(agents.Vec(delay=0.0, dim=4), generations=1, n_jobs=1, out=tmp_path, **KW)
    assert json.loads((tmp_path / "config.json").read_text())["agent_settings"] == {
        "delay": 0.0}
    with pytest.warns(es_search.ResumeWarning, match=r"settings differ from the run's: "
                      r"delay: 0\.0 in the checkpoint, 0\.001 now\. If score\(\) depends"):
        es_search.run(agents.Vec(delay=0.001), generations=2, n_jobs=1, out=tmp_path,
                      resume=True, **KW)
    with warnings.catch_warnings():  # built as the run did: nothing to say
        warnings.simplefilter("error", es_search.ResumeWarning)
        es_search.run(agents.Vec(delay=0.001), generations=3, n_jobs=1, out=tmp_path,
                      resume=True, **KW)


def test_corrupt_torn_or_inconsistent_checkpoint_is_refused(tmp_path):
    es_search.run(agents.Vec(), generations=2, n_jobs=1, out=tmp_path, **KW)
    path = tmp_path / CHECKPOINT
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


def test_resume_accepts_equal_score_kwargs_objects_without_eq(tmp_path):
    kwargs = {"spec": agents.Holder.__new__(agents.Holder)}  # no __eq__, pickles equal
    es_search.run(agents.Vec(), generations=1, n_jobs=1, out=tmp_path, score_kwargs=kwargs,
                  **KW)
    again = {"spec": agents.Holder.__new__(agents.Holder)}
    result = es_search.run(agents.Vec(), generations=2, n_jobs=1, out=tmp_path,
                           score_kwargs=again, resume=True, **KW)
    assert len(result.history) == 2


# ----------------------------------------------------------------- checkpoint_every
def test_a_resume_redoes_the_generations_after_the_last_checkpoint(tmp_path):
    """A kill -9 between checkpoints: history.jsonl holds more generations than the
    checkpoint; the resume drops them, redoes them, and equals the uninterrupted run."""
    full = es_search.run(agents.Vec(), generations=8, n_jobs=1, **KW)
    copies = {}

    def copy_at_five(record):  # the folder as a kill -9 after generation 4 leaves it
        if record["generation"] == 4:
            copies.update({p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()})

    es_search.run(agents.Vec(), generations=8, n_jobs=1, out=tmp_path, checkpoint_every=3,
                  callbacks=[copy_at_five], **KW)
    for name, data in copies.items():
        (tmp_path / name).write_bytes(data)
    for name in ("result.json", "center_weights.pt"):
        (tmp_path / name).unlink(missing_ok=True)
    assert checkpoint.load(tmp_path / CHECKPOINT)["generation"] == 3
    assert len(read_history(tmp_path / "history.jsonl")) == 5
    resumed = es_search.run(agents.Vec(), generations=8, n_jobs=2, out=tmp_path,
                            resume=True, checkpoint_every=2, **KW)
    assert same_history(resumed.history, full.history)
    assert same_weights(resumed.best_weights, full.best_weights)
    assert same_history(read_history(tmp_path / "history.jsonl"), full.history)


@pytest.mark.parametrize("error", [KeyboardInterrupt, RuntimeError])
def test_ctrl_c_or_an_error_saves_the_generations_the_last_checkpoint_lacks(tmp_path, error):
    full = es_search.run(agents.Vec(), generations=9, n_jobs=1, **KW)

    def stop_after_five(record):
        if record["generation"] == 4:
            raise error("stop")

    with pytest.raises(error):
        es_search.run(agents.Vec(), generations=9, n_jobs=1, out=tmp_path,
                      checkpoint_every=4, callbacks=[stop_after_five], **KW)
    saved = checkpoint.load(tmp_path / CHECKPOINT)
    assert saved["generation"] == 5  # not 4: all kept
    resumed = es_search.run(agents.Vec(), generations=9, n_jobs=1, out=tmp_path,
                            resume=True, checkpoint_every=4, **KW)
    assert same_history(resumed.history, full.history)
    assert same_weights(resumed.best_weights, full.best_weights)


def test_a_stopped_run_is_checkpointed_whatever_checkpoint_every(tmp_path):
    result = es_search.run(agents.Vec(), generations=20, n_jobs=1, out=tmp_path,
                           checkpoint_every=10, callbacks=[lambda r: r["generation"] == 2],
                           **KW)
    assert result.generations == 3
    assert checkpoint.load(tmp_path / CHECKPOINT)["generation"] == 3


def test_checkpoint_every_is_checked_at_the_call(tmp_path):
    with pytest.raises(ValueError, match=r"checkpoint_every must be an integer >= 1 \(generations "
                                         r"between two checkpoints of the run folder\), "
                                         r"got 0"):
        es_search.run(agents.Vec(), generations=2, out=tmp_path, checkpoint_every=0, **KW)
    with pytest.raises(ValueError, match=r"checkpoint_every=5 sets how often the run "
                                         r"folder's checkpoint is written; pass out=DIR"):
        es_search.run(agents.Vec(), generations=2, checkpoint_every=5, **KW)
    assert not list(tmp_path.iterdir())


def test_checkpoints_that_take_a_large_share_of_the_run_are_thinned_out(tmp_path,
                                                                        monkeypatch):
    """Past FLOOR seconds of writing, a due checkpoint waits while writing has taken more
    than SHARE of the run's time; the end still saves everything."""
    monkeypatch.setattr(RunFolder, "FLOOR", 0.0)
    monkeypatch.setattr(RunFolder, "SHARE", 0.0)  # every write is over: none but the first
    saved = []
    es_search.run(agents.Vec(), generations=6, n_jobs=1, out=tmp_path, callbacks=[
        lambda r: saved.append(checkpoint.load(tmp_path / CHECKPOINT)["generation"])], **KW)
    assert saved == [0] * 5 + [6]  # the start's, then the last generation's
    monkeypatch.setattr(RunFolder, "SHARE", 1.0)  # all the time may go to writing
    saved.clear()
    es_search.run(agents.Vec(), generations=6, n_jobs=1, out=tmp_path, overwrite=True,
                  callbacks=[lambda r: saved.append(
                      checkpoint.load(tmp_path / CHECKPOINT)["generation"])], **KW)
    assert saved == [1, 2, 3, 4, 5, 6]


def test_best_weights_file_goes_with_the_checkpoint(tmp_path):
    """Between sparse checkpoints best_weights.pt stays as of the last checkpoint, so
    a folder left by a kill -9 holds a best score and weights of the same generation."""
    seen = []

    def look(record):
        saved = checkpoint.load(tmp_path / CHECKPOINT)
        on_disk = torch.load(tmp_path / "best_weights.pt")
        seen.append(same_weights(on_disk, saved["best_weights"]))

    result = es_search.run(agents.Vec(), generations=9, n_jobs=1, out=tmp_path,
                           checkpoint_every=4, callbacks=[look], **KW)
    assert all(seen) and len(seen) == 9
    assert same_weights(torch.load(tmp_path / "best_weights.pt"), result.best_weights)


@pytest.mark.slow
def test_the_checkpoint_cost_benchmark_runs_and_writes_its_table(tmp_path):
    import os
    import subprocess
    import sys
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    done = subprocess.run([sys.executable, os.path.join(root, "benchmarks", "checkpoint_cost.py"),
                           "--generations", "3", "--repeats", "1", "--cases", "hill-climb:100",
                           "--n-jobs", "1", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    table = (tmp_path / "checkpoint_cost.md").read_text()
    assert "| hill-climb | 100 |" in table and "every 10" in table
    assert "| 4 of 4 |" in table  # a small checkpoint: the start's and every generation's


def test_resuming_a_finished_run_starts_no_workers_and_keeps_its_files(tmp_path,
                                                                      monkeypatch):
    """Nothing left to run: no pool is opened, no repeat check scores, plot.png is not
    drawn again; the Result is the run's."""
    from es_search import backends
    done = es_search.run(agents.Vec(), generations=3, n_jobs=1, out=tmp_path, **KW)
    plot = tmp_path / "plot.png"
    stamp = plot.stat().st_mtime_ns if plot.exists() else None

    def no_pool(*args, **kwargs):
        raise AssertionError("a pool was opened for a run with nothing left to run")

    monkeypatch.setattr(backends, "open_pool", no_pool)
    monkeypatch.setattr(agents.Vec, "score", lambda self: pytest.fail("scored"))
    again = es_search.run(agents.Vec(), generations=3, n_jobs=2, out=tmp_path, resume=True,
                          **KW)
    assert (again.best_score, again.evaluations) == (done.best_score, done.evaluations)
    assert same_history(again.history, done.history)
    if stamp is not None:
        assert plot.stat().st_mtime_ns == stamp


def test_a_run_that_fails_to_start_leaves_the_run_it_would_replace_whole(tmp_path):
    """overwrite=True into a folder that holds a run, and the new run fails before it
    starts (here: backend="dask" with no Client): the folder holds the old run, file
    for file. (A new run whose starting agent fails to score has started: the folder
    then holds its failure record, for replay_task.)"""
    es_search.run(agents.Vec(), generations=3, n_jobs=1, out=tmp_path, **KW)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()
              and p.name != ".lock"}
    pytest.importorskip("distributed")
    with pytest.raises(ValueError, match="there is none"):  # no active dask Client
        es_search.run(agents.Vec(), generations=3, n_jobs=2, out=tmp_path, overwrite=True,
                      backend="dask", **KW)
    after = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()
             and p.name != ".lock"}
    assert after == before
    assert es_search.Result.load(tmp_path, agents.Vec()).generations == 3


def test_the_checkpoint_holds_the_whole_search_before_the_end_selection(tmp_path,
                                                                       monkeypatch):
    """A kill -9 while the end's selection scores loses no generation, whatever
    checkpoint_every (the run stopped by a callback at generation 3 of 20)."""
    run_module = importlib.import_module("es_search.loop")
    seen, select = [], run_module.select

    def looking(*args):
        seen.append(checkpoint.load(tmp_path / CHECKPOINT)["generation"])
        return select(*args)

    monkeypatch.setattr(run_module, "select", looking)
    es_search.run(agents.Vec(), generations=20, n_jobs=1, out=tmp_path, checkpoint_every=10,
                  callbacks=[lambda r: r["generation"] == 2], **KW)
    assert seen == [3]
