"""Workers that die or hang: retried with the same seeds, or a clear WorkerError with the
checkpoint intact."""
from __future__ import annotations

import cloudpickle
import pytest

import es_search
from es_search import checkpoint
from es_search.errors import worker_message
from es_search.folder import CHECKPOINT
from es_search.seeding import task_seed

import agents

from compare import read_history, same_history, same_weights  # noqa: E402

SEED = 11
KW = dict(population=4, sigma=0.3, seed=SEED, progress=False)


# ----------------------------------------------------------------- dead workers
def test_a_worker_that_dies_once_changes_nothing(tmp_path):
    clean = es_search.run(agents.Vec(), generations=3, n_jobs=1, **KW)
    marker = tmp_path / "died"
    agent = agents.DiesOnce(task_seed(SEED, 1, 2), str(marker))
    with pytest.warns(RuntimeWarning, match="worker process died.*candidates .*2") as caught:
        result = es_search.run(agent, generations=3, n_jobs=2, out=tmp_path / "run",
                               sequential_fallback=False, **KW)
    # at the user's run() call (a library's warning of its own, e.g. matplotlib's, aside)
    assert [w.filename for w in caught.list if "worker" in str(w.message)] == [__file__]
    assert marker.exists()  # a worker really did os._exit
    assert same_history(result.history, clean.history)
    assert same_weights(result.best_weights, clean.best_weights)


def test_a_worker_killed_while_the_workers_start_changes_nothing(tmp_path):
    """SIGKILL (the OOM killer's) in the first second of a run, while the workers load
    the agent: the start-up is retried, as a generation is, and the run is n_jobs=1's."""
    clean = es_search.run(agents.Vec(), generations=2, n_jobs=1, **KW)
    marker = tmp_path / "killed"
    with pytest.warns(RuntimeWarning, match="starting the workers: a worker process died"):
        result = es_search.run(agents.KilledAtStart(str(marker)), generations=2, n_jobs=2,
                               sequential_fallback=False, **KW)
    assert marker.exists()  # a worker really was killed
    assert same_history(result.history, clean.history)
    assert same_weights(result.best_weights, clean.best_weights)


@pytest.mark.slow
def test_a_worker_killed_at_every_start_gives_a_clear_error(tmp_path):
    agent = agents.KilledAtStart()
    with pytest.warns(RuntimeWarning, match="retry 1 of 1"):
        with pytest.raises(es_search.WorkerError) as info:
            es_search.run(agent, generations=2, n_jobs=2, out=tmp_path / "run",
                          max_retries=1, **KW)
    message = str(info.value)
    assert message.startswith("starting the workers failed: a worker process died")
    assert "2 time(s)" in message and "resume=True" in message
    assert info.value.generation == -1 and info.value.indices == []


def test_a_worker_that_always_dies_gives_a_clear_error_and_keeps_the_checkpoint(tmp_path):
    agent = agents.AlwaysDies(task_seed(SEED, 1, 2))
    with pytest.warns(RuntimeWarning, match="retry 1 of 1"):
        with pytest.raises(es_search.WorkerError) as info:
            es_search.run(agent, generations=3, n_jobs=2, out=tmp_path, max_retries=1,
                          sequential_fallback=False, **KW)
    message = str(info.value)
    assert "generation 1: candidates" in message and "2 time(s)" in message
    assert "resume=True" in message and str(tmp_path) in message
    assert info.value.generation == 1 and 2 in info.value.indices
    ckpt = checkpoint.load(tmp_path / CHECKPOINT)
    assert ckpt["generation"] == 1
    assert len(read_history(tmp_path / "history.jsonl")) == 1
    assert (tmp_path / "failures" / "generation-1.pkl").exists()


@pytest.mark.slow
def test_under_task_timeout_nothing_is_scored_in_this_process(tmp_path):
    """No repeat check (it scores in this process) and the starting agent's one task in
    the workers: a score() that hangs from the first is stopped by task_timeout."""
    import time
    import warnings
    began = time.monotonic()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no repeat check's warning either
        with pytest.raises(es_search.WorkerError, match="generation -1.*task_timeout=0.5"):
            es_search.run(agents.Vec(delay=30.0), generations=1, n_jobs=2,
                          task_timeout=0.5, max_retries=0, **KW)
    assert time.monotonic() - began < 25  # not a 30 s score


class Pid(es_search.Agent):
    """Scores the process it runs in."""

    def __init__(self):
        super().__init__()
        self.w = __import__("torch").nn.Parameter(__import__("torch").zeros(2))

    def score(self):
        return float(__import__("os").getpid())


def test_under_task_timeout_a_generation_of_one_task_has_a_worker_of_its_own():
    """No more workers than a generation's tasks, but at least one: with a task timeout
    nothing is scored in this process, where nothing could stop it."""
    import os
    result = es_search.run(Pid(), generations=2, population=1, strategy="hill-climb",
                           strategy_options={"reevaluate": False}, n_jobs=2, task_timeout=60,
                           select_tasks=0, progress=False)
    scores = {s for h in result.history for s in h["scores"]}
    assert scores and os.getpid() not in scores


def test_a_hanging_task_is_stopped_by_task_timeout(tmp_path):
    agent = agents.Hangs(task_seed(SEED, 0, 1))
    with pytest.raises(es_search.WorkerError, match="task_timeout=1.0") as info:
        es_search.run(agent, generations=2, n_jobs=2, task_timeout=1.0, max_retries=0,
                      out=tmp_path, **KW)
    assert "needs a larger task_timeout" in str(info.value)
    assert "per score() (candidate 1)" in str(info.value)  # that one, not its neighbours
    assert "killed for memory" not in str(info.value)  # that is for dead workers
    assert checkpoint.load(tmp_path / CHECKPOINT)["generation"] == 0


def test_a_worker_error_knows_its_run_folder_and_each_side_renders_the_resume():
    error = es_search.WorkerError("generation 3: candidates 1 could not be scored.", 3, [1])
    assert str(error) == "generation 3: candidates 1 could not be scored."  # not in a run
    error.out = "runs/a"
    assert str(error).endswith("The checkpoint in runs/a (generations before 3) is intact: "
                               "after fixing the cause, continue with run(..., "
                               "out='runs/a', resume=True).")
    assert worker_message(error, ": es-search run x --out runs/a --resume").endswith(
        "continue with: es-search run x --out runs/a --resume")
    again = cloudpickle.loads(cloudpickle.dumps(error))
    assert (str(again), again.indices) == (str(error), [1])
    error.out = ""  # a run without a folder
    assert str(error).endswith("could not be scored. Nothing was saved (no out folder).")
