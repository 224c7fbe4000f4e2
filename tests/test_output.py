"""The run folder (es_search.folder): what a run writes and when; one run at a time (a
lock that a killed run does not leave behind); folders that cannot be used are refused
before any work."""
import concurrent.futures
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch

import es_search
from es_search.cli import main
from es_search.folder import LOCK, OutFolderError

from agents import Quadratic, RunningStats
from compare import claim, read_history


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
    import matplotlib
    import matplotlib.pyplot as plt
    backend, open_figures = matplotlib.get_backend(), plt.get_fignums()
    figure = result.plot(tmp_path / "p.png")
    assert (tmp_path / "p.png").stat().st_size > 1000
    ticks = figure.axes[0].get_xticks()  # generations are whole numbers: so are the ticks
    assert len(ticks) > 1 and all(float(t).is_integer() for t in ticks)
    with pytest.raises(FileNotFoundError):  # a figure that could not be saved
        result.plot(tmp_path / "no-such-folder" / "p.png")
    assert (matplotlib.get_backend(), plt.get_fignums()) == (backend, open_figures)


def test_missing_optional_dependency_names_the_extra(monkeypatch, tmp_path):
    import sys

    from es_search.extras import install_command, require
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if not installed
    with pytest.raises(ImportError, match=r"^matplotlib is not installed; install it with "
                                          + re.escape(install_command("plot")) + "$"):
        require("matplotlib", "plot")
    # run from this checkout (pip install -e .): the command installs from it, pinned
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    assert install_command("plot") == (f"pip install -c {root}/constraints.txt "
                                       f"-e '{root}[plot]'")
    from es_search import extras  # named by the package pip installs, e.g. scikit-learn
    monkeypatch.setitem(extras._PACKAGES, "es_probe_missing", "es-probe-missing")
    with pytest.raises(ImportError, match=r"^es-probe-missing is not installed; .*\[digits\]"):
        require("es_probe_missing.datasets", "digits")
    (tmp_path / "es_probe_broken.py").write_text("from math import no_such_name\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ImportError, match=r"^es_probe_broken is installed but "
                                          r"es_probe_broken cannot be imported \(ImportError: "
                                          r"cannot import name 'no_such_name'.*--force-reinstall"):
        require("es_probe_broken", "plot")


# ----------------------------------------------------------------- one run at a time
ROOT = Path(__file__).resolve().parents[1]
AGENTS = str(ROOT / "tests" / "agents.py")


class Counting(es_search.Agent):
    calls = 0

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(2))

    def score(self):
        type(self).calls += 1
        return 0.0


def start_cli_run(out: Path, generations: int = 25) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get(
        "PYTHONPATH", "")}
    return subprocess.Popen(
        [sys.executable, "-m", "es_search", "run", f"{AGENTS}:Vec", "-p", "delay=0.02",
         "--generations", str(generations), "--population", "4", "--n-jobs", "1",
         "--no-progress", "--out", str(out)],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for_history(out: Path, proc: subprocess.Popen, limit: float = 60) -> None:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"the run ended early: {proc.communicate()}")
        path = out / "history.jsonl"
        if path.exists() and path.read_text().count("\n") >= 1:
            return
        time.sleep(0.01)
    pytest.fail("the run made no progress")


@pytest.mark.slow
def test_a_second_run_into_a_folder_in_use_fails_at_once(tmp_path, capsys):
    out = tmp_path / "run"
    first = start_cli_run(out)
    try:
        wait_for_history(out, first)
        Counting.calls = 0
        began = time.monotonic()
        with pytest.raises(OutFolderError, match=f"{out}.* in use by another es_search "
                                                 f"run \\(pid {first.pid}\\)"):
            es_search.run(Counting(), generations=2, n_jobs=1, progress=False, out=out)
        assert Counting.calls == 0 and time.monotonic() - began < 5
        assert main(["run", "sphere", "--generations", "2", "--no-progress",
                     "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and f"{out}" in err and "in use" in err
        _, stderr = first.communicate(timeout=120)
        assert first.returncode == 0, stderr
    finally:
        if first.poll() is None:
            first.kill()
    # the first run is untouched: its own 25 generations, its own problem
    history = read_history(out / "history.jsonl")
    assert [r["generation"] for r in history] == list(range(25))
    assert json.loads((out / "config.json").read_text())["spec"]["problem"].endswith(":Vec")
    assert json.loads((out / "result.json").read_text())["generations"] == 25


@pytest.mark.filterwarnings("ignore::es_search.ResumeWarning")  # resumed without the delay
def test_a_killed_run_leaves_no_lock_behind(tmp_path):
    out = tmp_path / "run"
    first = start_cli_run(out)
    wait_for_history(out, first)
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=30)
    assert (out / LOCK).exists()  # the file stays; the kernel dropped the lock
    vec = es_search.problems.load_problem(f"{AGENTS}:Vec")
    result = es_search.run(vec(delay=0.0), generations=25, population=4, n_jobs=1,
                           progress=False, out=out, resume=True)
    assert result.generations == 25


@pytest.mark.parametrize("out", ["/proc/forbidden", "/proc/self/status/x"])
def test_an_out_folder_that_cannot_be_written_is_refused_before_any_work(out, capsys):
    Counting.calls = 0
    with pytest.raises(OutFolderError, match=f"cannot use {out} as the out folder"):
        es_search.run(Counting(), generations=2, n_jobs=1, progress=False, out=out)
    assert Counting.calls == 0
    assert main(["run", "sphere", "--generations", "2", "--no-progress", "--out", out]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err and out in err


def test_an_out_that_is_a_file_is_named_as_one(tmp_path):
    out = tmp_path / "results.csv"
    out.write_text("mine")
    with pytest.raises(OutFolderError, match="results.csv as the out folder: it is a file, "
                                             "not a folder"):
        es_search.run(Counting(), generations=2, n_jobs=1, progress=False, out=out)
    assert out.read_text() == "mine"


def test_a_run_in_a_folder_this_process_holds_is_refused(tmp_path):
    with claim(tmp_path / "run") as folder:  # e.g. a callback's run into its own run's
        with pytest.raises(OutFolderError, match="in use by another es_search run of this "
                                                 "process; wait for it to finish"):
            es_search.run(Counting(), generations=1, n_jobs=1, progress=False, out=folder)
    es_search.run(Counting(), generations=1, n_jobs=1, progress=False, out=folder)


def test_a_second_run_into_a_folder_in_use_by_another_thread_fails_at_once(tmp_path):
    out, started, go_on = tmp_path / "run", threading.Event(), threading.Event()

    def hold(record):  # the first run waits, its folder held, until the others tried
        started.set()
        assert go_on.wait(60)

    def first():
        return es_search.run(Counting(), generations=3, n_jobs=1, progress=False, out=out,
                             callbacks=[hold])

    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        running = pool.submit(first)
        assert started.wait(60)
        for options in ({"overwrite": True}, {"resume": True}, {}):
            trying = pool.submit(es_search.run, Counting(), generations=5, n_jobs=1,
                                 progress=False, out=out, **options)
            with pytest.raises(OutFolderError, match="in use by another es_search run of "
                                                     "this process; wait"):
                trying.result(60)
        go_on.set()
        assert running.result(60).generations == 3
    history = read_history(out / "history.jsonl")  # the first run's, whole
    assert [r["generation"] for r in history] == [0, 1, 2]
    es_search.run(Counting(), generations=4, n_jobs=1, progress=False, out=out,
                  resume=True)  # the lock was given back


def test_a_folder_of_the_users_own_files_of_run_names_is_not_written_over(tmp_path):
    """config.json, test.json, policy.pt of the user's (no run began there) were replaced
    or deleted without a word."""
    out = tmp_path / "project"
    out.mkdir()
    mine = {"config.json": b"{}", "test.json": b"[]", "policy.pt": b"mine", "notes": b"x"}
    for name, data in mine.items():
        (out / name).write_bytes(data)
    for resume in (False, True):
        with pytest.raises(es_search.OutFolderError, match=re.escape(
                f"out={str(out)!r} holds files of the names a run writes (config.json, "
                f"test.json, policy.pt) but no run; move them, replace them with "
                f"overwrite=True, or choose another out folder")):
            es_search.run(Counting(), generations=1, n_jobs=1, progress=False, out=out,
                          resume=resume)
        assert {p.name: p.read_bytes() for p in out.iterdir() if p.name != LOCK} == mine
    es_search.run(Counting(), generations=1, n_jobs=1, progress=False, out=out,
                  overwrite=True)
    assert not (out / "policy.pt").exists() and (out / "notes").read_bytes() == b"x"


def test_a_folder_that_holds_a_run_is_not_replaced_by_mistake(tmp_path):
    out = tmp_path / "run"
    es_search.run(Counting(), generations=3, n_jobs=1, progress=False, out=out)
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    with pytest.raises(es_search.OutFolderError, match=re.escape(
            f"out={str(out)!r} holds a run already (3 generation(s) in history.jsonl); "
            f"continue it with resume=True, replace it with overwrite=True, or choose "
            f"another out folder")):
        es_search.run(Counting(), generations=5, n_jobs=1, progress=False, out=out)
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before
    with pytest.raises(ValueError, match="pass one of them"):
        es_search.run(Counting(), generations=5, n_jobs=1, progress=False, out=out,
                      resume=True, overwrite=True)
    with pytest.raises(ValueError, match="overwrite=True replaces the run saved in an out"):
        es_search.run(Counting(), generations=5, n_jobs=1, progress=False, overwrite=True)
    resumed = es_search.run(Counting(), generations=5, n_jobs=1, progress=False, out=out,
                            resume=True)
    assert len(resumed.history) == 5
    replaced = es_search.run(Counting(), generations=2, n_jobs=1, progress=False, out=out,
                             overwrite=True)
    assert len(replaced.history) == 2 and len(read_history(out / "history.jsonl")) == 2


def test_a_run_stopped_before_its_first_generation_may_be_started_again(tmp_path):
    """A start that fails (here a CSV path that cannot be created) leaves a checkpoint
    with no generation: the same call, mended, starts the run, no overwrite needed."""
    from es_search.callbacks import CSV
    out = tmp_path / "run"
    csv = CSV(tmp_path / "a-file" / "log.csv")
    (tmp_path / "a-file").write_text("")  # after CSV() checked the path: fails on start
    with pytest.raises(OSError):
        es_search.run(Counting(), generations=2, n_jobs=1, progress=False, out=out,
                      callbacks=[csv])
    assert (out / "checkpoint.pkl").exists()
    with pytest.raises(es_search.OutFolderError, match="stopped before its first generation"):
        es_search.Result.load(out)
    result = es_search.run(Counting(), generations=2, n_jobs=1, progress=False, out=out,
                           callbacks=[CSV(tmp_path / "log.csv")])
    assert result.generations == 2 and len(read_history(out / "history.jsonl")) == 2


@pytest.mark.skipif(not hasattr(os, "fchmod"), reason="POSIX permissions")
def test_run_files_get_the_permissions_of_any_new_file(tmp_path):
    """Atomic writes go through mkstemp (mode 0600); the files must still be readable
    by whoever the user's umask lets read new files (a shared folder, TensorBoard)."""
    for umask, expected in ((0o022, 0o644), (0o077, 0o600), (0o002, 0o664)):
        out = tmp_path / f"run-{umask:o}"
        old = os.umask(umask)
        try:
            es_search.run(Counting(), generations=1, n_jobs=1, progress=False, out=out)
        finally:
            os.umask(old)
        modes = {p.name: p.stat().st_mode & 0o777 for p in out.iterdir() if p.is_file()
                 and p.name != LOCK}
        assert {"config.json", "checkpoint.pkl", "best_weights.pt", "result.json",
                "history.jsonl"} <= set(modes)
        assert set(modes.values()) == {expected}, modes


def _interrupt_at(generation):
    def callback(record):
        if record["generation"] == generation:
            raise KeyboardInterrupt
    return callback


def test_an_interrupted_continuation_or_replacement_leaves_no_stale_end(tmp_path):
    """result.json, center_weights.pt, plot.png and test.json describe a run's end: once a
    resumed run writes a generation, or a run replaces another, they no longer hold."""
    out = tmp_path / "run"
    es_search.run(Counting(), generations=3, n_jobs=1, progress=False, out=out)
    (out / "test.json").write_text("{}")  # as es-search run writes it
    ends = {"result.json", "center_weights.pt", "test.json"}
    assert ends <= {p.name for p in out.iterdir()}
    es_search.run(Counting(), generations=3, n_jobs=1, progress=False, out=out, resume=True)
    assert ends <= {p.name for p in out.iterdir()}  # a finished run, not redone: kept
    with pytest.raises(KeyboardInterrupt):
        es_search.run(Counting(), generations=6, n_jobs=1, progress=False, out=out,
                      resume=True, callbacks=[_interrupt_at(4)])
    names = {p.name for p in out.iterdir()}
    assert not names & {*ends, "plot.png"} and "best_weights.pt" in names
    resumed = es_search.run(Counting(), generations=6, n_jobs=1, progress=False, out=out,
                            resume=True)
    assert json.loads((out / "result.json").read_text())["generations"] == 6
    assert resumed.generations == 6
    with pytest.raises(KeyboardInterrupt):
        es_search.run(Counting(), generations=6, n_jobs=1, progress=False, out=out,
                      overwrite=True, callbacks=[_interrupt_at(0)])
    assert not {p.name for p in out.iterdir()} & ends


def test_a_saved_run_loads_as_its_result(tmp_path):
    out = tmp_path / "run"
    done = es_search.run(Quadratic(), generations=6, n_jobs=1, progress=False, out=out,
                         strategy="pgpe", population=4, seed=3)
    loaded = es_search.Result.load(out, Quadratic())
    assert loaded.history == done.history and loaded.config == done.config
    assert (loaded.best_score, loaded.evaluations, loaded.seed, loaded.stopped_by) == (
        done.best_score, done.evaluations, 3, None)
    for name in ("best_weights", "center_weights"):
        assert {k: v.tolist() for k, v in getattr(loaded, name).items()} == \
               {k: v.tolist() for k, v in getattr(done, name).items()}
    assert torch.equal(loaded.center_agent().w, done.center_agent().w)
    assert es_search.Result.load(out).agent is None  # no agent: the figures alone

    cut = tmp_path / "cut"
    with pytest.raises(KeyboardInterrupt):
        es_search.run(Quadratic(), generations=6, n_jobs=1, progress=False, out=cut,
                      strategy="pgpe", population=4, seed=3, callbacks=[_interrupt_at(3)])
    partial = es_search.Result.load(cut, Quadratic())
    def timeless(history):
        return [{k: v for k, v in h.items() if k != "seconds"} for h in history]
    assert timeless(partial.history) == timeless(done.history[:4])
    assert partial.best_score == max(h["best_score"] for h in done.history[:4])
    assert partial.stopped_by.startswith("unfinished: interrupted after 4 of 6 generations")
    assert (partial.chosen, partial.selection) == ("best", None)  # nothing tested yet
    # not ended: the centre a resume would start from, the same as a run of 4 ends with
    four = es_search.run(Quadratic(), generations=4, n_jobs=1, progress=False,
                         strategy="pgpe", population=4, seed=3)
    assert torch.equal(partial.center_weights["w"], four.center_weights["w"])
    assert torch.equal(partial.center_agent().w, four.center_weights["w"])
    assert not torch.equal(four.center_weights["w"], done.center_weights["w"])
    assert es_search.Result.load(cut).center_weights is None  # no agent to lay it out
    with pytest.raises(ValueError, match=r"this Result holds no agent: pass one built as "
                                         r"the run's was, es_search.Result.load\(out, agent\)$"):
        es_search.Result.load(cut).center_agent()

    with pytest.raises(ValueError, match=r"evolved .*Quadratic \(10 evolved values\); "
                                         "the agent given is .*Counting"):
        es_search.Result.load(out, Counting())
    with pytest.raises(es_search.OutFolderError, match="holds no run to load"):
        es_search.Result.load(tmp_path / "nothing")


def test_a_wrong_agent_is_named_as_the_run_names_its_own(tmp_path):
    """The run's class was named by its file (.../mine.py.Flaky), the one given by the
    module es_search loaded the file as (es_search_user_mine.Noisy)."""
    from es_search.problems import load_problem
    path = tmp_path / "mine.py"
    path.write_text("import torch, es_search\n\n\nclass Flaky(es_search.Agent):\n"
                    "    def __init__(self):\n        super().__init__()\n"
                    "        self.w = torch.nn.Parameter(torch.zeros(3))\n\n"
                    "    def score(self):\n        return 0.0\n\n\nclass Noisy(Flaky):\n"
                    "    pass\n")
    flaky, noisy = (load_problem(f"{path}:{name}") for name in ("Flaky", "Noisy"))
    es_search.run(flaky(), generations=1, n_jobs=1, progress=False, out=tmp_path / "run")
    with pytest.raises(ValueError) as info:
        es_search.Result.load(tmp_path / "run", noisy())
    assert f"evolved {path}.Flaky (3 evolved values); the agent given is {path}.Noisy (3): " \
           f"pass an agent built as the run's was" in str(info.value)


def test_an_unended_runs_centre_carries_the_shared_state_of_its_checkpoint(tmp_path):
    out = tmp_path / "run"
    with pytest.raises(KeyboardInterrupt):
        es_search.run(RunningStats(), generations=6, n_jobs=1, progress=False, out=out,
                      strategy="openai-es", population=4, callbacks=[_interrupt_at(2)])
    three = es_search.run(RunningStats(), generations=3, n_jobs=1, progress=False,
                          strategy="openai-es", population=4)
    loaded = es_search.Result.load(out, RunningStats()).center_weights
    assert sorted(loaded) == sorted(three.center_weights) == ["count", "m2", "mean", "w"]
    for name, value in three.center_weights.items():
        assert torch.equal(loaded[name], value), name
    assert float(loaded["count"]) > 0


def test_a_path_that_starts_with_a_tilde_is_in_the_home_folder(tmp_path, monkeypatch):
    """out="~/runs/a" as a shell reads it, not a folder named "~" in the current one."""
    from es_search.callbacks import CSV
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    csv = CSV("~/a.csv")
    done = es_search.run(Quadratic(), generations=2, n_jobs=1, progress=False,
                         out="~/runs/a", callbacks=[csv])
    assert not (tmp_path / "~").exists()
    assert read_history(tmp_path / "home" / "runs" / "a" / "history.jsonl") == done.history
    assert len(csv.load()) == 2 and csv.path == tmp_path / "home" / "a.csv"
    assert es_search.Result.load("~/runs/a").history == done.history
    with pytest.raises(ValueError, match="home/runs/a cannot replay generation 1"):
        es_search.replay_task(Quadratic(), out="~/runs/a", generation=1, index=0)
