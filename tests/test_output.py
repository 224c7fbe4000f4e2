import json

import pytest
import torch

import es_search
from es_search.output import read_history

from agents import Quadratic


def test_out_writes_config_history_weights_and_plot(tmp_path):
    out = tmp_path / "run"
    result = es_search.run(Quadratic(3), generations=6, population=4, sigma=0.5, seed=3,
                           n_jobs=1, progress=False, out=out)
    config = json.loads((out / "config.json").read_text())
    assert config["seed"] == 3 and config["generations"] == 6
    assert config["strategy"] == {"name": "hill-climb", "population": 4, "sigma": 0.5,
                                  "reevaluate": "auto"}
    assert config["resolved"] == {"reevaluate": False}  # Quadratic is not noisy
    history = read_history(out / "history.jsonl")
    assert [{k: v for k, v in h.items()} for h in history] == result.history
    weights = torch.load(out / "best_weights.pt")
    assert torch.equal(weights["w"], result.best_weights["w"])
    summary = json.loads((out / "result.json").read_text())
    assert summary["best_score"] == result.best_score
    assert (out / "plot.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_history_is_on_disk_after_each_generation(tmp_path):
    lines = []

    def peek(record):
        lines.append(len((tmp_path / "history.jsonl").read_text().splitlines()))

    es_search.run(Quadratic(3), generations=4, population=2, n_jobs=1, progress=False,
                  out=tmp_path, callbacks=[peek])
    assert lines == [1, 2, 3, 4]


def test_result_plot_needs_matplotlib_only(tmp_path):
    result = es_search.run(Quadratic(2), generations=3, population=2, n_jobs=1, progress=False)
    result.plot(tmp_path / "p.png")
    assert (tmp_path / "p.png").stat().st_size > 1000


def test_missing_optional_dependency_names_the_extra(monkeypatch):
    import builtins
    from es_search.plotting import require

    real_import = builtins.__import__

    def fake_import(name, *args, **kwargs):
        if name == "matplotlib":
            raise ImportError("no")
        return real_import(name, *args, **kwargs)
    monkeypatch.setattr(builtins, "__import__", fake_import)
    monkeypatch.delitem(__import__("sys").modules, "matplotlib", raising=False)
    with pytest.raises(ImportError, match=r"pip install 'es_search\[plot\]'"):
        require("matplotlib", "plot")
