"""Callbacks through es_search.run: tracking files equal the run's history, and a run
stopped by a rule resumes to the run that was never stopped."""
import json
import math

import numpy as np
import pytest
import torch

import es_search
from es_search.callbacks import (CSV, Callback, EarlyStopping, MaxTime, MLflow,
                                 StopAtScore, TensorBoard)

from agents import Quadratic
from compare import same_weights

#: best_score per generation of this run climbs to a plateau (-0.08) at generation 15
SETTINGS = dict(population=4, sigma=0.5, n_jobs=1, seed=5, progress=False)


def evolve(generations, **kwargs):
    return es_search.run(Quadratic(dim=3), generations=generations, **SETTINGS, **kwargs)


def comparable(result):
    """What must be equal between two runs of one seed (wall-clock seconds are not)."""
    history = [{k: v for k, v in h.items() if k != "seconds"} for h in result.history]
    return history, {k: v.tolist() for k, v in result.best_weights.items()}, result.evaluations


@pytest.fixture(scope="module")
def uninterrupted():
    return evolve(30)


class Calls(Callback):
    """Records the protocol calls (their order is tested in test_callbacks.py)."""

    def __init__(self):
        self.calls = []

    def on_start(self, info):
        self.calls.append(("start", info.first_generation, len(info.history)))

    def on_generation(self, record):
        self.calls.append(("generation", record["generation"]))

    def on_end(self, result):
        self.calls.append(("end", result.generations))


# --- tracking through run() ---------------------------------------------------------

def test_tensorboard_file_holds_the_history_also_across_a_resume(tmp_path, uninterrupted):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    log_dir, out = tmp_path / "tb", tmp_path / "run"
    evolve(12, out=out, callbacks=[TensorBoard(log_dir)])
    result = evolve(30, out=out, resume=True, callbacks=[TensorBoard(log_dir)])
    assert comparable(result) == comparable(uninterrupted)
    acc = EventAccumulator(str(log_dir), size_guidance={"scalars": 0, "histograms": 0})
    acc.Reload()
    for name in ("best_score", "mean_score", "sigma", "evaluations", "seconds"):
        events = acc.Scalars(name)
        assert [e.step for e in events] == list(range(30))
        assert [e.value for e in events] == [float(np.float32(h[name]))
                                             for h in result.history]
    assert [len(h["scores"]) for h in result.history] == [
        int(e.histogram_value.num) for e in acc.Histograms("scores")]


@pytest.mark.slow  # end to end; fed through the callback protocol in test_callbacks_tracking
def test_mlflow_run_holds_config_metrics_and_best_weights(tmp_path, monkeypatch):
    from mlflow.tracking import MlflowClient
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    store, out = tmp_path / "mlruns", tmp_path / "run"
    first = MLflow(tracking_uri=store)
    evolve(4, out=out, callbacks=[first])
    second = MLflow(tracking_uri=store)
    result = evolve(7, out=out, resume=True, callbacks=[second])
    assert second.run_id == first.run_id
    client = MlflowClient(tracking_uri=store.as_uri())
    run = client.get_run(second.run_id)
    assert run.info.status == "FINISHED"
    assert run.data.params["seed"] == "5" and run.data.params["strategy.sigma"] == "0.5"
    history = sorted((m.step, m.value) for m in client.get_metric_history(run.info.run_id,
                                                                         "best_score"))
    assert history == [(h["generation"], h["best_score"]) for h in result.history]
    weights = torch.load(client.download_artifacts(run.info.run_id, "best_weights.pt",
                                                   str(tmp_path)))
    assert torch.equal(weights["w"], result.best_weights["w"])


def test_csv_equals_the_history(tmp_path):
    log = CSV(tmp_path / "history.csv")
    result = evolve(5, callbacks=[log])
    assert log.load() == result.history


def test_every_callback_gets_the_outcome_the_run_folder_writes_from(tmp_path):
    """on_generation's record is the history dict, with the rest of the generation's
    outcome as attributes (es_search.callbacks.Generation); info.start is the start's.
    A callback of one's own can write what the run folder writes."""
    from agents import Raises
    from es_search import checkpoint
    from es_search.seeding import task_seed

    class Outcomes(Callback):
        def on_start(self, info):
            self.start, self.seen = info.start, []

        def on_generation(self, record):
            self.seen.append((record, record.best_weights()))

    outcomes, out = Outcomes(), tmp_path / "run"
    with pytest.warns(RuntimeWarning, match="raised on 1 candidate"):
        result = es_search.run(Raises({task_seed(5, 1, 2)}), generations=4, out=out,
                               on_error="worst", callbacks=[outcomes], **SETTINGS)
    records = [record for record, _ in outcomes.seen]
    assert records == result.history and dict(outcomes.start) == {}
    assert outcomes.start.improved and outcomes.start.failures is None
    bests = [outcomes.start.checkpoint["best_score"]] + [r["best_score"] for r in records]
    assert [r.improved for r in records] == [a != b for a, b in zip(bests, bests[1:])]
    assert [r.failures and (r.failures.generation, r.failures.indices)
            for r in records] == [None, (1, [2]), None, None]
    saved = checkpoint.load(out / "failures" / "generation-1.pkl")
    assert saved["indices"] == [2] and saved["candidates"] == records[1].failures.candidates
    last, best = outcomes.seen[-1]
    on_disk = checkpoint.load(out / "checkpoint.pkl")
    assert on_disk["generation"] == last.checkpoint["generation"] == 4
    assert same_weights(on_disk["best_weights"], last.checkpoint["best_weights"])
    for weights in (result.best_weights, torch.load(out / "best_weights.pt")):
        assert all(torch.equal(best[k], weights[k]) for k in weights)


# --- stopping rules through run() ---------------------------------------------------

@pytest.mark.parametrize("rule, stops_after", [
    (StopAtScore(-3.4), 8),
    (EarlyStopping(patience=3), 18),
    (MaxTime(1e-9), 0),  # spent after the first generation
])
def test_a_stopped_run_resumes_to_the_uninterrupted_run(tmp_path, uninterrupted, rule,
                                                        stops_after):
    calls = Calls()
    stopped = evolve(30, out=tmp_path, callbacks=[rule, calls])
    assert stopped.generations == stops_after + 1
    assert calls.calls[-1] == ("end", stops_after + 1)  # on_end also when stopped
    assert comparable(stopped)[0] == comparable(uninterrupted)[0][:stops_after + 1]
    assert rule.reason and f"generation {stops_after}" in rule.reason
    summary = json.loads((tmp_path / "result.json").read_text())
    assert summary["generations"] == stops_after + 1
    assert stopped.stopped_by == summary["stopped_by"] == rule.reason  # why it stopped
    resumed = evolve(30, out=tmp_path, resume=True)  # without the rule
    assert comparable(resumed) == comparable(uninterrupted)
    assert resumed.stopped_by is None
    assert json.loads((tmp_path / "result.json").read_text())["stopped_by"] is None


def test_a_stopped_run_resumes_with_more_generations(tmp_path, uninterrupted):
    stopped = evolve(20, out=tmp_path, callbacks=[StopAtScore(-3.4)])
    assert stopped.generations == 9
    grown = evolve(30, out=tmp_path, resume=True, callbacks=[StopAtScore(-0.5)])
    assert grown.generations == 16  # -0.08 at generation 15
    assert comparable(grown)[0] == comparable(uninterrupted)[0][:16]
    assert comparable(evolve(30, out=tmp_path, resume=True)) == comparable(uninterrupted)


@pytest.mark.parametrize("done", [10, 16, 17])
def test_early_stopping_resumed_stops_where_the_uninterrupted_run_stops(tmp_path, done,
                                                                         uninterrupted):
    """The patience count is rebuilt from the history the resume hands to on_start:
    without it, a resume after generation 17 would wait 3 more generations."""
    reference = evolve(30, callbacks=[EarlyStopping(3)])
    evolve(done, out=tmp_path)
    resumed = evolve(30, out=tmp_path, resume=True, callbacks=[EarlyStopping(3)])
    assert resumed.generations == reference.generations == 19
    assert comparable(resumed) == comparable(reference)


def test_plain_callables_keep_working():
    seen = []
    result = evolve(6, callbacks=[lambda r: seen.append(r["generation"]) or len(seen) == 3])
    assert seen == [0, 1, 2] and result.generations == 3
    assert math.isfinite(result.best_score)


@pytest.mark.parametrize("said, stops", [(True, True), (np.True_, True), (1, False),
                                         ("stop", False), (872, False), (False, False)])
def test_only_true_stops_a_run(said, stops):
    # a logging lambda returns what it wrote (file.write's count): that is no stop
    result = evolve(4, callbacks=[lambda r: said if r["generation"] == 1 else None])
    assert result.generations == (2 if stops else 4)
    assert (result.stopped_by is not None) == stops


@pytest.mark.skipif(not hasattr(BaseException, "add_note"), reason="Python >= 3.11")
def test_an_error_in_a_callback_names_it_and_keeps_what_was_done(tmp_path):
    def breaks(record):
        if record["generation"] == 2:
            raise RuntimeError("my callback broke")
    with pytest.raises(RuntimeError, match="my callback broke") as caught:
        evolve(6, callbacks=[breaks], out=tmp_path / "run")
    assert caught.value.__notes__ == [
        "es_search: raised by the callback FunctionCallback(test_an_error_in_a_callback_"
        "names_it_and_keeps_what_was_done.<locals>.breaks) in on_generation()"]
    done = evolve(3)  # generation 2 was saved before the callbacks ran
    assert comparable(es_search.Result.load(tmp_path / "run"))[0] == comparable(done)[0]
    csv = CSV(tmp_path / "a-file" / "log.csv")
    (tmp_path / "a-file").write_text("")  # after CSV() checked the path: fails on start
    with pytest.raises(OSError) as caught:
        evolve(2, callbacks=[csv])
    assert caught.value.__notes__ == [f"es_search: raised by the callback CSV("
                                      f"'{tmp_path}/a-file/log.csv') in on_start()"]


# --- command line -----------------------------------------------------------------------

SPHERE = ["run", "sphere", "-p", "dim=3", "--population", "4", "--n-jobs", "1",
          "--no-progress", "--seed", "1", "--generations", "40"]


def reproducible(history):
    return [{k: v for k, v in h.items() if k != "seconds"} for h in history]


def test_cli_stop_at_then_resume_equals_the_uninterrupted_run(tmp_path, capsys):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from es_search.cli import main
    from compare import read_history
    assert main([*SPHERE, "--out", str(tmp_path / "full")]) == 0
    run, tracking = str(tmp_path / "run"), ["--tensorboard", str(tmp_path / "tb"),
                                            "--csv", str(tmp_path / "history.csv")]
    assert main([*SPHERE, "--out", run, "--stop-at", "-1", *tracking]) == 0
    assert "stopped early: best_score" in capsys.readouterr().out
    stopped = read_history(tmp_path / "run" / "history.jsonl")
    assert len(stopped) < 40 and stopped[-1]["best_score"] >= -1 > stopped[-2]["best_score"]
    assert main([*SPHERE, "--out", run, "--resume", *tracking]) == 0
    assert "stopped early" not in capsys.readouterr().out
    history = read_history(tmp_path / "run" / "history.jsonl")
    assert reproducible(history) == reproducible(read_history(tmp_path / "full" /
                                                              "history.jsonl"))
    acc = EventAccumulator(str(tmp_path / "tb"), size_guidance={"scalars": 0})
    acc.Reload()
    assert [(e.step, e.value) for e in acc.Scalars("best_score")] == [
        (h["generation"], float(np.float32(h["best_score"]))) for h in history]
    assert CSV(tmp_path / "history.csv").load() == history


@pytest.mark.parametrize("flags, generations", [
    (["--patience", "2", "--min-delta", "100"], 3),  # no gain over 100: stops after 2
    (["--max-time", "1e-9"], 1),
    (["--stop-at", "-1000"], 1),
])
def test_cli_stopping_flags(tmp_path, capsys, flags, generations):
    from es_search.cli import main
    assert main([*SPHERE, "--out", str(tmp_path), *flags]) == 0
    assert len((tmp_path / "history.jsonl").read_text().splitlines()) == generations
    assert "stopped early" in capsys.readouterr().out


@pytest.mark.parametrize("flags, message", [
    (["--patience", "0"], "--patience must be an integer >= 1"),
    (["--max-time", "-1"], "--max-time must be a positive finite number, got -1.0"),
    (["--stop-at", "nan"], "--stop-at must be a finite number, got nan"),
    (["--patience", "2", "--min-delta", "-1"], "--min-delta must be a finite number >= 0"),
    (["--min-delta", "0.1"], "--min-delta goes with --patience"),
    (["--tensorboard", __file__], "is a file"),
])
def test_cli_bad_flags_one_line_exit_2(tmp_path, capsys, flags, message):
    from es_search.cli import main
    assert main([*SPHERE, "--out", str(tmp_path / "run"), *flags]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "run").exists()  # refused before any work


def test_cli_mlflow_tracks_to_mlruns_or_the_environments_uri(tmp_path, monkeypatch):
    from mlflow.tracking import MlflowClient
    from es_search.cli import main
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.chdir(tmp_path)
    assert main([*SPHERE[:-1], "3", "--mlflow"]) == 0
    store = tmp_path / "elsewhere"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store.as_uri())
    assert main([*SPHERE[:-1], "2", "--mlflow"]) == 0
    for uri, generations in [((tmp_path / "mlruns").as_uri(), 3), (store.as_uri(), 2)]:
        client = MlflowClient(tracking_uri=uri)
        experiment = client.get_experiment_by_name("es_search")
        (run,) = client.search_runs([experiment.experiment_id])
        assert run.data.tags["es_search.problem"] == "sphere"
        assert run.info.status == "FINISHED"
        assert [m.step for m in client.get_metric_history(run.info.run_id, "sigma")] == \
            list(range(generations))
