"""Tracking callbacks (TensorBoard, MLflow, CSV) fed through the callback protocol.

Each is read back with the tool's own reader: TensorBoard's EventAccumulator, MLflow's
client, CSV.load(). The records are a real run's history; the protocol calls are made
here, as run() makes them, so that a resume or a kill can be staged exactly.
"""
import json
import math
import pickle
import sys

import numpy as np
import pytest
import torch

import es_search
from es_search.callbacks import CSV, MLflow, RunInfo, TensorBoard
from es_search.files import to_json

from agents import Quadratic

GENERATIONS = 6


@pytest.fixture(scope="module")
def result():
    return es_search.run(Quadratic(dim=3), generations=GENERATIONS, population=5,
                         sigma=0.5, n_jobs=1, seed=2, progress=False)


def nonfinite_history():
    """Records with NaN means, infinite scores and a NaN best (no finite score yet)."""
    nan, inf = float("nan"), float("inf")
    return [
        {"generation": 0, "best_score": nan, "mean_score": nan, "scores": [nan, -inf],
         "sigma": 0.1, "nonfinite": 2, "failures": 0, "evaluations": 3, "seconds": 0.01},
        {"generation": 1, "best_score": 1.25, "mean_score": 1.25, "scores": [inf, 1.25],
         "sigma": 0.1, "nonfinite": 1, "failures": 0, "evaluations": 5, "seconds": 0.02},
    ]


def same(a, b):
    """Equality of records, NaN equal to NaN."""
    return json.dumps(to_json(a)) == json.dumps(to_json(b))


def start(callback, result, done=0, out=None):
    """on_start as run() calls it: ``done`` generations already in the history."""
    callback.on_start(RunInfo(config=result.config, out=out, generations=GENERATIONS,
                              first_generation=done, history=result.history[:done]))


def feed(callback, records):
    for record in records:
        assert not callback.on_generation(record)  # trackers never stop a run


# --- TensorBoard -----------------------------------------------------------------------

def read_events(log_dir):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    acc = EventAccumulator(str(log_dir), size_guidance={"scalars": 0, "histograms": 0,
                                                        "tensors": 0})
    acc.Reload()
    return acc


def assert_scalars_match(log_dir, history):
    acc = read_events(log_dir)
    for name in ("best_score", "mean_score", "sigma", "evaluations", "seconds"):
        events = acc.Scalars(name)
        assert [e.step for e in events] == [h["generation"] for h in history], name
        # TensorBoard keeps scalars as float32: equal to the history at that precision
        assert [e.value for e in events] == [float(np.float32(h[name])) for h in history]
    return acc


def test_tensorboard_holds_one_value_per_generation_equal_to_the_history(tmp_path, result):
    tb = TensorBoard(tmp_path / "tb")
    start(tb, result)
    feed(tb, result.history)
    tb.on_end(result)
    acc = assert_scalars_match(tmp_path / "tb", result.history)
    histograms = acc.Histograms("scores")
    assert [h.step for h in histograms] == list(range(GENERATIONS))
    for h, record in zip(histograms, result.history):
        value = h.histogram_value
        assert value.num == len(record["scores"])
        assert value.min == min(record["scores"]) and value.max == max(record["scores"])
        assert sum(value.bucket) == len(record["scores"])
    config = acc.Tensors("config")[0].tensor_proto.string_val[0].decode()
    assert json.loads(config)["seed"] == result.config["seed"]


@pytest.mark.parametrize("first_run", ["killed", "stopped", "not logged"])
def test_tensorboard_after_a_resume_logs_each_generation_once(tmp_path, result, first_run):
    if first_run != "not logged":  # else TensorBoard is first turned on at the resume
        first = TensorBoard(tmp_path)
        start(first, result)
    if first_run == "killed":  # generation 2 was checkpointed, then the kill: no on_end
        feed(first, result.history[:2])
        first.close()  # what was flushed stays
    elif first_run == "stopped":  # stopped (by a rule) after generation 2
        feed(first, result.history[:3])
        first.on_end(result)
    second = TensorBoard(tmp_path)
    start(second, result, done=3)
    feed(second, result.history[3:])
    second.on_end(result)
    files = 1 if first_run == "not logged" else 2
    assert len(list(tmp_path.glob("events.out.tfevents.*"))) == files
    acc = assert_scalars_match(tmp_path, result.history)
    assert json.loads(acc.Tensors("config")[-1].tensor_proto.string_val[0].decode())[
        "seed"] == result.config["seed"]


def test_tensorboard_new_run_in_the_same_folder_replaces_the_old(tmp_path, result):
    old = TensorBoard(tmp_path)
    start(old, result)
    feed(old, [dict(h, best_score=h["best_score"] - 1) for h in result.history])
    old.on_end(result)
    new = TensorBoard(tmp_path)
    start(new, result)
    feed(new, result.history[:4])
    new.on_end(result)
    assert_scalars_match(tmp_path, result.history[:4])


def test_tensorboard_pickled_mid_run_continues(tmp_path, result):
    tb = TensorBoard(tmp_path)
    start(tb, result)
    feed(tb, result.history[:3])
    copy = pickle.loads(pickle.dumps(tb))
    assert copy._writer is None  # the open file did not travel
    tb.close()
    feed(copy, result.history[3:])
    copy.on_end(result)
    assert_scalars_match(tmp_path, result.history)


def test_tensorboard_nonfinite_values(tmp_path):
    history = nonfinite_history()
    tb = TensorBoard(tmp_path)
    feed(tb, history)  # without on_start: still a valid file
    tb.close()
    acc = read_events(tmp_path)
    assert math.isnan(acc.Scalars("mean_score")[0].value)
    assert acc.Scalars("best_score")[1].value == 1.25
    assert [h.step for h in acc.Histograms("scores")] == [1]  # finite scores only
    assert acc.Histograms("scores")[0].histogram_value.num == 1


def test_tensorboard_bad_input(tmp_path):
    with pytest.raises(TypeError, match="log_dir must be a folder path"):
        TensorBoard(3)
    (tmp_path / "file").write_text("")
    with pytest.raises(ValueError, match="is a file"):
        TensorBoard(tmp_path / "file")
    with pytest.raises(ValueError, match="log_dir must be a folder path .*, got ''"):
        TensorBoard("")


def test_missing_packages_name_the_extra(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "tensorboard", None)
    with pytest.raises(ImportError, match=r"\[tensorboard\]"):
        TensorBoard(tmp_path)
    monkeypatch.setitem(sys.modules, "mlflow", None)
    with pytest.raises(ImportError, match=r"\[mlflow\]"):
        MLflow(tracking_uri=tmp_path)


# --- MLflow ----------------------------------------------------------------------------

@pytest.fixture
def file_store(monkeypatch, tmp_path):
    """A local tracking folder; the environment restored afterwards."""
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "")
    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE")  # MLflow(...) sets it for a folder
    return tmp_path / "mlruns"


def metric_steps(client, run_id, key):
    return sorted((m.step, m.value) for m in client.get_metric_history(run_id, key))


def test_mlflow_run_read_back_with_mlflow_client(file_store, tmp_path, result):
    from mlflow.tracking import MlflowClient
    tracker = MLflow(experiment="quadratic", run_name="seed-2", tracking_uri=file_store,
                     tags={"team": "es"})
    start(tracker, result)
    feed(tracker, result.history)
    tracker.on_end(result)

    client = MlflowClient(tracking_uri=file_store.as_uri())
    run = client.get_run(tracker.run_id)
    assert run.info.status == "FINISHED" and run.info.run_name == "seed-2"
    assert run.data.tags["team"] == "es"
    params = run.data.params
    assert params["seed"] == "2" and params["strategy.name"] == "hill-climb"
    assert params["strategy.population"] == "5" and params["agent"] == "agents.Quadratic"
    for key in ("best_score", "mean_score", "sigma", "evaluations", "seconds"):
        assert metric_steps(client, tracker.run_id, key) == [
            (h["generation"], float(h[key])) for h in result.history]
    for artifact, expected in (("best_weights", result.best_weights),
                               ("center_weights", result.center_weights),
                               ("chosen_weights", result.chosen_weights)):
        local = client.download_artifacts(tracker.run_id, f"{artifact}.pt",
                                          str(tmp_path / artifact))
        weights = torch.load(local)
        assert weights.keys() == expected.keys()
        for name, tensor in weights.items():
            assert torch.equal(tensor, expected[name])


def test_mlflow_resume_continues_the_same_run_once_per_generation(file_store, tmp_path,
                                                                   result):
    from mlflow.tracking import MlflowClient
    out = tmp_path / "run"
    first = MLflow(tracking_uri=file_store)
    start(first, result, out=out)
    feed(first, result.history[:5])  # generation 2 checkpointed, 3-4 logged, then the kill
    copy = pickle.loads(pickle.dumps(first))  # what another process would hold
    assert copy._client is None and copy.run_id == first.run_id
    second = MLflow(tracking_uri=file_store)
    start(second, result, done=3, out=out)
    assert second.run_id == first.run_id
    feed(second, result.history[3:])
    second.on_end(result)
    client = MlflowClient(tracking_uri=file_store.as_uri())
    assert metric_steps(client, second.run_id, "best_score") == [
        (h["generation"], h["best_score"]) for h in result.history]
    assert client.get_run(second.run_id).info.status == "FINISHED"
    assert result.stopped_by is None
    client.set_tag(second.run_id, "es_search.stopped_by", "a rule, before a resume")
    third = MLflow(tracking_uri=file_store)  # interrupted, then resumed to its end
    start(third, result, done=len(result.history), out=out)
    third.on_error(KeyboardInterrupt())
    assert "es_search.error" in client.get_run(second.run_id).data.tags
    start(third, result, done=len(result.history), out=out)
    third.on_end(result)
    finished = client.get_run(second.run_id)
    assert finished.info.status == "FINISHED" and "es_search.error" not in finished.data.tags
    assert "es_search.stopped_by" not in finished.data.tags  # the stop was not this end's
    other = MLflow(tracking_uri=file_store)  # a new run into another folder: a new run
    start(other, result, out=tmp_path / "elsewhere")
    assert other.run_id != first.run_id


def test_mlflow_tracking_uri_default_and_bad_input(monkeypatch, tmp_path):
    import socket
    with socket.socket() as server:  # a server that answers (its port, at least)
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        monkeypatch.setenv("MLFLOW_TRACKING_URI", f"http://127.0.0.1:{port}")
        assert MLflow().tracking_uri == f"http://127.0.0.1:{port}"
    monkeypatch.delenv("MLFLOW_TRACKING_URI")
    with pytest.raises(ValueError, match=f"tracking_uri http://127.0.0.1:{port}: no server "
                                         f"answers there"):
        MLflow(tracking_uri=f"http://127.0.0.1:{port}")  # at the call: not minutes later
    monkeypatch.chdir(tmp_path)
    assert MLflow().tracking_uri == (tmp_path / "mlruns").resolve().as_uri()
    assert MLflow(tracking_uri="sqlite:///x.db").tracking_uri == "sqlite:///x.db"
    for kwargs, message in [({"experiment": ""}, "experiment must be a non-empty"),
                            ({"run_name": 3}, "run_name must be a str"),
                            ({"tracking_uri": 3}, "tracking_uri must be a URI"),
                            ({"tags": {"a": 1}}, "tags must be a dict of str"),
                            ({"log_weights": "yes"}, "log_weights must be True")]:
        with pytest.raises(TypeError, match=message):
            MLflow(**kwargs)


# --- CSV -------------------------------------------------------------------------------

def test_csv_round_trip(tmp_path, result):
    log = CSV(tmp_path / "sub" / "history.csv")
    start(log, result)
    feed(log, result.history)
    log.on_end(result)
    assert log.load() == result.history
    assert CSV(tmp_path / "sub" / "history.csv").load() == result.history
    lines = (tmp_path / "sub" / "history.csv").read_text().splitlines()
    assert len(lines) == 1 + GENERATIONS and lines[0].startswith("generation,best_score")


def test_csv_nonfinite_round_trip(tmp_path):
    log = CSV(tmp_path / "h.csv")
    feed(log, nonfinite_history())
    log.on_end(None)
    assert same(log.load(), nonfinite_history())


def test_csv_after_a_kill_and_a_resume_matches_the_history(tmp_path, result):
    path = tmp_path / "h.csv"
    first = CSV(path)
    start(first, result)
    feed(first, result.history[:2])
    copy = pickle.loads(pickle.dumps(first))  # picklable mid-run, file not carried
    assert copy._file is None
    first.close()  # killed after generation 2's checkpoint, before its row
    second = CSV(path)
    start(second, result, done=3)
    feed(second, result.history[3:])
    second.on_end(result)
    assert second.load() == result.history
    fresh = CSV(path)  # a new run replaces the file
    start(fresh, result)
    feed(fresh, result.history[:1])
    assert fresh.load() == result.history[:1]


def test_csv_bad_input_and_unknown_fields(tmp_path, result):
    with pytest.raises(TypeError, match="CSV path must be a file path"):
        CSV(None)
    with pytest.raises(ValueError, match="is a folder"):
        CSV(tmp_path)
    log = CSV(tmp_path / "h.csv")
    start(log, result)
    feed(log, result.history[:1])
    with pytest.warns(RuntimeWarning, match=r"fields \['steps'\]"):
        log.on_generation(dict(result.history[1], steps=10))
    log.on_end(result)
    assert log.load() == result.history[:2]


def test_mlflow_marks_a_failed_run_failed_and_an_interrupted_one_killed(file_store,
                                                                         result):
    from mlflow.tracking import MlflowClient
    for error, status in ((RuntimeError("boom"), "FAILED"),
                          (KeyboardInterrupt(), "KILLED")):
        tracker = MLflow(tracking_uri=file_store)
        start(tracker, result)
        feed(tracker, result.history[:1])
        tracker.on_error(error)
        client = MlflowClient(tracking_uri=file_store.as_uri())  # after MLflow(): file store
        run = client.get_run(tracker.run_id)
        assert run.info.status == status
        assert run.data.tags["es_search.error"] == repr(error)


def test_tensorboard_and_csv_close_their_files_on_error(tmp_path, result):
    for tracker in (TensorBoard(tmp_path / "tb"), CSV(tmp_path / "log.csv")):
        start(tracker, result)
        feed(tracker, result.history[:2])
        tracker.on_error(RuntimeError("boom"))
        assert getattr(tracker, "_writer", None) is None
