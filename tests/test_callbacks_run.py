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
    if hasattr(stopped, "stopped_by"):  # the run loop says why it stopped
        assert stopped.stopped_by == rule.reason
        assert summary["stopped_by"] == rule.reason
    resumed = evolve(30, out=tmp_path, resume=True)  # without the rule
    assert comparable(resumed) == comparable(uninterrupted)


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
