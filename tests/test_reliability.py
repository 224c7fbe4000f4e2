"""Issue 4, in one process: checkpoints, resume, dead workers, errors in score(),
non-finite scores, unpicklable agents, argument validation."""
from __future__ import annotations

import math
import os
import uuid
import warnings

import cloudpickle
import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings, strategies as st
from hypothesis.extra import numpy as hnp

import es_search
from es_search import checkpoint
from es_search.output import read_history
from es_search.seeding import task_seed
from es_search.strategies.hill_climb import HillClimbState

import reliability_agents as agents

cloudpickle.register_pickle_by_value(agents)  # workers need not import tests/

SEED = 11
KW = dict(population=4, sigma=0.3, seed=SEED, progress=False)


def same_history(a, b):
    """Equal records, every field but the wall-clock ``seconds`` (NaN == NaN)."""
    def norm(r):
        return {k: [repr(x) for x in v] if isinstance(v, list) else repr(v)
                for k, v in r.items() if k != "seconds"}
    return [norm(r) for r in a] == [norm(r) for r in b]


def same_weights(a, b):
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


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


# ----------------------------------------------------------------- dead workers
def test_a_worker_that_dies_once_changes_nothing(tmp_path):
    clean = es_search.run(agents.Vec(), generations=3, n_jobs=1, **KW)
    marker = tmp_path / "died"
    agent = agents.DiesOnce(task_seed(SEED, 1, 2), str(marker))
    with pytest.warns(RuntimeWarning, match="worker process died.*candidates .*2"):
        result = es_search.run(agent, generations=3, n_jobs=2, out=tmp_path / "run",
                               sequential_fallback=False, **KW)
    assert marker.exists()  # a worker really did os._exit
    assert same_history(result.history, clean.history)
    assert same_weights(result.best_weights, clean.best_weights)


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
    ckpt = checkpoint.load(tmp_path / checkpoint.CHECKPOINT)
    assert ckpt["generation"] == 1 and ckpt["history_lines"] == 1
    assert len(read_history(tmp_path / "history.jsonl")) == 1
    assert (tmp_path / "failures" / "generation-1.pkl").exists()


def test_a_hanging_task_is_stopped_by_task_timeout(tmp_path):
    agent = agents.Hangs(task_seed(SEED, 0, 1))
    with pytest.raises(es_search.WorkerError, match="task_timeout=1.0"):
        es_search.run(agent, generations=2, n_jobs=2, task_timeout=1.0, max_retries=0,
                      out=tmp_path, **KW)
    assert checkpoint.load(tmp_path / checkpoint.CHECKPOINT)["generation"] == 0


# ----------------------------------------------------------------- errors in score()
@pytest.mark.parametrize("n_jobs", [1, 2])
def test_score_error_names_the_task_chains_and_replays(tmp_path, n_jobs):
    seed = task_seed(SEED, 1, 3)
    with pytest.raises(es_search.ScoreError) as info:
        es_search.run(agents.Raises({seed}), generations=3, n_jobs=n_jobs, out=tmp_path,
                      **KW)
    err = info.value
    assert (err.generation, err.index, err.seed) == (1, 3, seed)
    assert isinstance(err.__cause__, ValueError) and "boom" in str(err.__cause__)
    assert "Raises.score() failed on generation 1, candidate 3" in str(err)
    assert "ValueError: boom" in err.remote_traceback
    assert f"replay_task(agent, out={str(tmp_path)!r}, generation=1, index=3)" in str(err)
    with pytest.raises(ValueError) as replayed:  # unwrapped, for a debugger
        es_search.replay_task(agents.Raises({seed}), out=tmp_path, generation=1, index=3)
    assert str(replayed.value) == str(err.__cause__)  # the same weights, too


def test_on_error_worst_counts_failures_and_goes_on(tmp_path):
    fail = {task_seed(SEED, 0, 1), task_seed(SEED, 2, 0), task_seed(SEED, 2, 3)}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = es_search.run(agents.Raises(fail), generations=3, n_jobs=1,
                               on_error="worst", out=tmp_path, **KW)
    raised = [w for w in caught if "raised on" in str(w.message)]
    assert len(raised) == 1 and "replay_task" in str(raised[0].message)
    assert [r["failures"] for r in result.history] == [1, 0, 2]
    assert [r["nonfinite"] for r in result.history] == [0, 0, 0]
    assert result.history[2]["scores"][0] == -math.inf
    assert math.isfinite(result.best_score)
    # replay from the run folder: a failing task raises, a good one gives its score
    with pytest.raises(ValueError, match="boom"):
        es_search.replay_task(agents.Raises(fail), out=tmp_path, generation=2, index=3)
    assert es_search.replay_task(agents.Raises(fail), out=tmp_path, generation=2,
                                 index=1) == result.history[2]["scores"][1]


def test_replay_task_from_the_checkpoint_and_by_hand(tmp_path):
    result = es_search.run(agents.Vec(), generations=2, n_jobs=1, out=tmp_path, **KW)
    # the checkpoint gives generation 2's centre: equal to scoring it by hand
    ckpt = checkpoint.load(tmp_path / checkpoint.CHECKPOINT)
    center = ckpt["strategy"].center(ckpt["state"])
    jitter = es_search.Candidate("jitter", 0.3)
    assert es_search.replay_task(agents.Vec(), out=tmp_path, generation=2, index=1) == \
        es_search.replay_task(agents.Vec(), seed=SEED, generation=2, index=1,
                              center=center, candidate=jitter)
    # generation 0 by hand, from the starting agent's weights
    assert es_search.replay_task(agents.Vec(), seed=SEED, generation=0, index=2,
                                 candidate=jitter) == result.history[0]["scores"][2]
    with pytest.raises(ValueError, match="checkpoint is before generation 2"):
        es_search.replay_task(agents.Vec(), out=tmp_path, generation=1, index=0)


# ----------------------------------------------------------------- non-finite scores
def test_nonfinite_scores_warn_once_are_counted_and_never_best():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = es_search.run(agents.NonFinite(), generations=5, population=6, sigma=0.3,
                               n_jobs=1, seed=SEED, progress=False)
    assert len([w for w in caught if "non-finite" in str(w.message)]) == 1
    counts = [r["nonfinite"] for r in result.history]
    assert counts == [sum(not math.isfinite(s) for s in r["scores"])
                      for r in result.history]
    assert sum(counts) > 1  # several, yet one warning
    assert math.isfinite(result.best_score)


# ----------------------------------------------------------------- unpicklable agents
@pytest.mark.parametrize("make, attribute", [
    (lambda p: agents.WithLock(), "agent.stuff['cfg'][2].lock (a _thread.lock)"),
    (lambda p: agents.WithGenerator(), "agent.inner.gen (a generator)"),
    (lambda p: agents.WithFile(str(p / "log.txt")), "agent.log (a _io.TextIOWrapper)"),
])
@pytest.mark.parametrize("n_jobs", [1, 2])
def test_unpicklable_agent_is_named_before_any_work(tmp_path, make, attribute, n_jobs):
    with pytest.raises(es_search.UnpicklableAgentError) as info:
        es_search.run(make(tmp_path), generations=2, n_jobs=n_jobs, out=tmp_path / "run",
                      **KW)
    assert attribute in str(info.value)
    assert not (tmp_path / "run").exists()  # refused before anything ran


# ----------------------------------------------------------------- argument validation
class Counting(agents.Vec):
    calls = 0

    def score(self, **kwargs):
        Counting.calls += 1
        return 0.0


bad_int = st.one_of(st.integers(max_value=0), st.floats(allow_nan=True), st.text(max_size=3),
                    st.booleans(), st.none())
bad_sigma = st.one_of(st.floats(max_value=0.0), st.just(math.nan), st.just(math.inf),
                      st.text(max_size=3), st.booleans())
bad_n_jobs = st.one_of(st.just(0), st.floats(), st.text(max_size=3), st.booleans())


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(which=st.sampled_from(["generations", "population", "sigma", "n_jobs", "seed",
                              "on_error", "max_retries", "task_timeout", "resume"]),
       data=st.data())
def test_bad_arguments_fail_at_the_call_before_any_work(tmp_path, which, data):
    value = data.draw({
        "generations": bad_int, "population": bad_int.filter(lambda v: v is not None),
        "sigma": bad_sigma,
        "n_jobs": bad_n_jobs, "seed": st.one_of(st.integers(max_value=-1), st.text()),
        "on_error": st.text().filter(lambda s: s not in ("raise", "worst")),
        "max_retries": st.one_of(st.integers(max_value=-1), st.floats()),
        "task_timeout": bad_sigma, "resume": st.one_of(st.integers(), st.text())}[which])
    out = tmp_path / uuid.uuid4().hex
    kwargs = dict(generations=2, population=3, sigma=0.1, n_jobs=1, seed=0,
                  progress=False, out=out)
    kwargs[which] = value
    if which == "task_timeout":
        kwargs["n_jobs"] = 2
    Counting.calls = 0
    with pytest.raises((TypeError, ValueError)) as info:
        es_search.run(Counting(), **kwargs)
    assert Counting.calls == 0 and not out.exists()
    assert str(info.value)


def test_resume_needs_out_and_timeout_needs_workers():
    with pytest.raises(ValueError, match="pass out="):
        es_search.run(agents.Vec(), generations=1, resume=True, n_jobs=1)
    with pytest.raises(ValueError, match="task_timeout needs worker processes"):
        es_search.run(agents.Vec(), generations=1, task_timeout=1.0, n_jobs=1)


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
    with pytest.raises(es_search.CheckpointError, match="no checkpoint"):
        checkpoint.load(tmp_path / "missing.pkl")


# ----------------------------------------------------------------- Ctrl-C in run()
def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (dead, not yet reaped) counts as gone
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def test_ctrl_c_in_run_kills_the_workers_promptly_and_says_how_to_resume(tmp_path, capsys):
    import signal
    import threading
    import time

    pids = tmp_path / "pids"
    pids.mkdir()
    agent = agents.Sleepy(str(pids), task_seed(SEED, -1, 0))
    sent = []

    def interrupt():
        while len(os.listdir(pids)) < 2:  # both workers are inside score()
            time.sleep(0.01)
        sent.append(time.monotonic())
        os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=interrupt, daemon=True).start()
    with pytest.raises(KeyboardInterrupt):
        es_search.run(agent, generations=3, n_jobs=2, out=tmp_path / "run",
                      sequential_fallback=False, **KW)
    assert time.monotonic() - sent[0] < 5  # not the minute the tasks would take
    workers = [int(p) for p in os.listdir(pids)]
    deadline = time.monotonic() + 5
    while any(map(_alive, workers)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(map(_alive, workers))
    err = capsys.readouterr().err
    assert "interrupted after 0 completed generation(s)" in err and "resume=True" in err
    assert checkpoint.load(tmp_path / "run" / checkpoint.CHECKPOINT)["generation"] == 0


def test_a_new_run_into_an_old_folder_clears_its_checkpoint_and_failure_records(tmp_path):
    fail = {task_seed(SEED, 1, 0)}
    with pytest.warns(RuntimeWarning, match="raised on 1 candidate"):
        es_search.run(agents.Raises(fail), generations=2, n_jobs=1, on_error="worst",
                      out=tmp_path, **KW)
    assert (tmp_path / "failures" / "generation-1.pkl").exists()
    es_search.run(agents.Vec(), generations=1, n_jobs=1, out=tmp_path, **KW)
    assert not list((tmp_path / "failures").glob("*.pkl"))
    assert checkpoint.load(tmp_path / checkpoint.CHECKPOINT)["generation"] == 1


def test_a_failing_starting_agent_is_replayable_from_the_run_folder(tmp_path):
    start = task_seed(SEED, -1, 0)
    with pytest.raises(es_search.ScoreError, match="failed on the starting agent"):
        es_search.run(agents.Raises({start}), generations=2, n_jobs=1, out=tmp_path, **KW)
    with pytest.raises(ValueError, match=r"boom at \[0.0, 0.0, 0.0, 0.0\]"):
        es_search.replay_task(agents.Raises({start}), out=tmp_path, generation=-1, index=0)


def test_resume_accepts_equal_score_kwargs_objects_without_eq(tmp_path):
    kwargs = {"spec": agents.Holder.__new__(agents.Holder)}  # no __eq__, pickles equal
    es_search.run(agents.Vec(), generations=1, n_jobs=1, out=tmp_path, score_kwargs=kwargs,
                  **KW)
    again = {"spec": agents.Holder.__new__(agents.Holder)}
    result = es_search.run(agents.Vec(), generations=2, n_jobs=1, out=tmp_path,
                           score_kwargs=again, resume=True, **KW)
    assert len(result.history) == 2
