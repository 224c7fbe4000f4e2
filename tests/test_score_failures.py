"""score() that raises or returns non-finite values: ScoreError naming the task,
on_error="worst", failure records and replay_task."""
from __future__ import annotations

import math
import os
import subprocess
import sys
import warnings
from pathlib import Path

import cloudpickle
import numpy as np
import pytest
import torch

import es_search
from es_search import checkpoint
from es_search.folder import CHECKPOINT
from es_search.seeding import task_seed

import agents

ROOT = Path(__file__).resolve().parents[1]


SEED = 11
KW = dict(population=4, sigma=0.3, seed=SEED, progress=False)


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
    assert "without an out folder" not in str(err)  # it has one: one way to replay
    with pytest.raises(es_search.ScoreError) as no_out:
        es_search.run(agents.Raises({seed}), generations=3, n_jobs=n_jobs, **KW)
    assert "replay_task(agent, out=<the run's out folder>, generation=1, index=3)\nor, " \
           "without an out folder, replay_task(agent, seed=<run seed>" in str(no_out.value)
    error = no_out.value  # the message's call, as it reads: the same failure, same weights
    assert f"candidate=error.failures.candidates[{error.index}])" in str(error)
    with pytest.raises(ValueError) as replayed_here:
        es_search.replay_task(agents.Raises({seed}), seed=SEED, generation=1, index=3,
                              center=error.failures.center,
                              candidate=error.failures.candidates[3])
    assert str(replayed_here.value) == str(err.__cause__)
    with pytest.raises(ValueError) as replayed:  # unwrapped, for a debugger
        es_search.replay_task(agents.Raises({seed}), out=tmp_path, generation=1, index=3)
    assert str(replayed.value) == str(err.__cause__)  # the same weights, too


@pytest.mark.parametrize("n_jobs", [1, 2])
def test_a_cause_that_cannot_be_pickled_is_kept_in_process_and_its_repr_sent(n_jobs):
    agents.RaisesLocked.raised.clear()
    with pytest.raises(es_search.ScoreError) as info:
        es_search.run(agents.RaisesLocked({task_seed(SEED, 1, 3)}), generations=3,
                      n_jobs=n_jobs, sequential_fallback=False, **KW)
    err = info.value
    assert (err.generation, err.index) == (1, 3)
    if n_jobs == 1:  # the very exception score() raised, lock and all
        assert err.cause is err.__cause__ is agents.RaisesLocked.raised[-1]
    else:  # from a worker: what it said
        assert type(err.cause) is RuntimeError and err.cause is err.__cause__
        assert str(err.cause).startswith("LockedError: locked boom at")
    assert "LockedError: locked boom" in err.remote_traceback


@pytest.mark.parametrize("n_jobs", [1, 2])
def test_an_evaluate_score_error_replays_the_weights_dict_not_a_run_folder(n_jobs):
    """evaluate() and Evaluator have no out folder: the message replays weights[index]
    with the call's seed and generation, and that advice reproduces the failure."""
    weights = [{"x": torch.full((4,), float(k), dtype=torch.float64)} for k in range(4)]
    seed = task_seed(SEED, 5, 2)
    with pytest.raises(es_search.ScoreError) as info:
        es_search.evaluate(agents.Raises({seed}), weights, n_jobs=n_jobs, seed=SEED,
                           generation=5, repeat_check=False)
    err = info.value
    assert (err.generation, err.index, err.seed, err.evaluate_seed) == (5, 2, seed, SEED)
    text = str(err)
    assert text.startswith(f"Raises.score() failed on weights[2] of evaluate(..., seed="
                           f"{SEED}, generation=5) (task seed {seed}, "
                           f"es_search.task_seed({SEED}, 5, 2)).\n")
    assert (f"    es_search.replay_task(agent, seed={SEED}, generation=5, index=2, "
            f"weights=weights[2])\n") in text
    assert "out=" not in text and "ValueError: boom at [2.0, 2.0, 2.0, 2.0]" in text
    with pytest.raises(ValueError, match=r"boom at \[2.0, 2.0, 2.0, 2.0\]"):  # as advised
        es_search.replay_task(agents.Raises({seed}), seed=SEED, generation=5, index=2,
                              weights=weights[2])
    # an Evaluator's call says so too, with its score_kwargs; pickled, the same message
    with es_search.Evaluator(agents.Raises({seed}), n_jobs=n_jobs, seed=SEED,
                             score_kwargs={"unused": 1}, repeat_check=False) as evaluator:
        assert evaluator.evaluate(weights[:2], 5) == [
            es_search.replay_task(agents.Raises(), seed=SEED, generation=5, index=i,
                                  weights=weights[i]) for i in range(2)]
        with pytest.raises(es_search.ScoreError) as info:
            evaluator.evaluate(weights, 5)
    assert "index=2, weights=weights[2], score_kwargs=<the call's>)" in str(info.value)
    assert str(cloudpickle.loads(cloudpickle.dumps(info.value))) == str(info.value)


def test_replay_task_weights_are_one_dict_without_a_candidate():
    with pytest.raises(TypeError, match="weights must be one weights dict"):
        es_search.replay_task(agents.Vec(), seed=0, generation=0, index=0,
                              weights=[{"x": torch.ones(4)}])
    with pytest.raises(ValueError, match="pass either weights= .* or candidate=, not both"):
        es_search.replay_task(agents.Vec(), seed=0, generation=0, index=0, weights={},
                              candidate=es_search.Candidate("center"))
    with pytest.raises(ValueError, match=r"pass either out= \(a run folder\) or "):
        es_search.replay_task(agents.Vec(), out="somewhere", generation=0, index=0,
                              weights={})


@pytest.mark.slow
def test_a_class_of_the_users_script_is_explained_in_a_workers_traceback(tmp_path):
    """cloudpickle sends a script's class by value, with "<dynamic-code>" for its file."""
    script = tmp_path / "mine.py"
    script.write_text(
        "import torch, es_search\n"
        "class Mine(es_search.Agent):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.w = torch.nn.Parameter(torch.zeros(3))\n"
        "    def score(self):\n"
        "        raise ValueError('in my script')\n"
        "if __name__ == '__main__':\n"
        "    try:\n"
        "        es_search.run(Mine(), generations=1, n_jobs=2, progress=False,\n"
        "                      sequential_fallback=False, repeat_check=False)\n"
        "    except es_search.ScoreError as error:\n"
        "        print(error)\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    printed = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env,
                             capture_output=True, text=True, timeout=300).stdout
    assert 'File "<dynamic-code>", line 7, in score' in printed  # the script's line 7
    assert printed.rstrip().endswith(
        'code sent to the workers by value, such as a class of your script or notebook; '
        'its line numbers are the source\'s, and replay_task shows the file.)')


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
    ckpt = checkpoint.load(tmp_path / CHECKPOINT)
    center = ckpt["strategy"].center(ckpt["state"])
    jitter = es_search.Candidate("jitter", 0.3)
    assert es_search.replay_task(agents.Vec(), out=tmp_path, generation=2, index=1) == \
        es_search.replay_task(agents.Vec(), seed=SEED, generation=2, index=1,
                              center=center, candidate=jitter)
    # generation 0 by hand, from the starting agent's weights
    assert es_search.replay_task(agents.Vec(), seed=SEED, generation=0, index=2,
                                 candidate=jitter) == result.history[0]["scores"][2]
    with pytest.raises(ValueError, match=r"the generation its checkpoint would run next \(2\)"):
        es_search.replay_task(agents.Vec(), out=tmp_path, generation=1, index=0)
    # bad arguments, named before anything is read
    with pytest.raises(TypeError, match="index must be an integer >= 0 .*got '1'"):
        es_search.replay_task(agents.Vec(), out=tmp_path, generation=2, index="1")
    with pytest.raises(TypeError, match="generation must be an integer >= -1 .*got 2.0"):
        es_search.replay_task(agents.Vec(), out=tmp_path, generation=2.0, index=1)
    with pytest.raises(ValueError, match=r"the run in .* evolved .*agents.Vec "
                                         r"\(4 evolved values\); the agent given is "
                                         r".*Vec \(6\): pass an agent built as the run's was"):
        es_search.replay_task(agents.Vec(dim=6), out=tmp_path, generation=2, index=1)


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


def test_a_starting_agent_that_scores_nan_is_named_in_the_warning():
    function = es_search.problems.Function(lambda x: math.nan, np.ones(3))
    with pytest.warns(RuntimeWarning, match=r"Function scored \d+ time\(s\) non-finite "
                                            r"\(NaN or inf\) in the starting agent's"):
        es_search.run(function, generations=1, population=4, n_jobs=1, progress=False)


@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan])
def test_with_no_finite_score_at_all_the_best_score_is_nan(value):
    """Not +inf (a perfect score, on a minimised function that returns -inf) nor -inf."""
    function = es_search.problems.Function(lambda x: -value, np.ones(3))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = es_search.run(function, generations=2, population=4, n_jobs=1,
                               progress=False)
    assert math.isnan(result.best_score)
    assert all(math.isnan(r["best_score"]) for r in result.history)
    assert torch.equal(result.best_weights["x"], torch.ones(3, dtype=torch.float64))


def test_a_new_run_into_an_old_folder_clears_its_checkpoint_and_failure_records(tmp_path):
    fail = {task_seed(SEED, 1, 0)}
    with pytest.warns(RuntimeWarning, match="raised on 1 candidate"):
        es_search.run(agents.UsesData(fail), generations=2, n_jobs=1, on_error="worst",
                      out=tmp_path, score_kwargs={"data": torch.ones(3)}, **KW)
    assert (tmp_path / "failures" / "generation-1.pkl").exists()
    assert (tmp_path / "score_kwargs.pkl").exists()
    with pytest.raises(es_search.OutFolderError, match="holds a run already"):
        es_search.run(agents.Vec(), generations=1, n_jobs=1, out=tmp_path, **KW)
    assert (tmp_path / "failures" / "generation-1.pkl").exists()  # refused: untouched
    es_search.run(agents.Vec(), generations=1, n_jobs=1, out=tmp_path, overwrite=True, **KW)
    assert not list((tmp_path / "failures").glob("*.pkl"))
    assert not (tmp_path / "score_kwargs.pkl").exists()  # the new run has none
    assert checkpoint.load(tmp_path / CHECKPOINT)["generation"] == 1


def test_replay_reads_a_tensor_in_score_kwargs_from_the_run_folder(tmp_path):
    """The config and checkpoints hold its digest; score_kwargs.pkl holds the data."""
    fail, data = {task_seed(SEED, 1, 2)}, torch.arange(5.0)
    with pytest.warns(RuntimeWarning, match="raised on 1 candidate"):
        result = es_search.run(agents.UsesData(fail), generations=2, n_jobs=2,
                               on_error="worst", out=tmp_path, score_kwargs={"data": data},
                               **KW)
    expected = result.history[1]["scores"][1]
    assert es_search.replay_task(agents.UsesData(fail), out=tmp_path, generation=1,
                                 index=1) == expected  # from the failure record
    with pytest.raises(ValueError, match="boom"):
        es_search.replay_task(agents.UsesData(fail), out=tmp_path, generation=1, index=2)
    (tmp_path / "score_kwargs.pkl").unlink()
    with pytest.raises(es_search.OutFolderError, match="has no score_kwargs.pkl, the run's "
                                                       "score_kwargs; pass score_kwargs="):
        es_search.replay_task(agents.UsesData(fail), out=tmp_path, generation=1, index=1)
    assert es_search.replay_task(agents.UsesData(fail), out=tmp_path, generation=1,
                                 index=1, score_kwargs={"data": data}) == expected


def test_a_failing_starting_agent_is_replayable_from_the_run_folder(tmp_path):
    start = task_seed(SEED, -1, 0)
    with pytest.raises(es_search.ScoreError, match="failed on the starting agent"):
        es_search.run(agents.Raises({start}), generations=2, n_jobs=1, out=tmp_path, **KW)
    with pytest.raises(ValueError, match=r"boom at \[0.0, 0.0, 0.0, 0.0\]"):
        es_search.replay_task(agents.Raises({start}), out=tmp_path, generation=-1, index=0)


def test_a_score_batch_scored_alone_is_named_in_the_error():
    """An agent that defines only score_batch(), scored one candidate per call: the
    error names score_batch(), the method the user wrote, not score()."""
    class OnlyBatch(es_search.Agent):
        score_batch_size = 0

        def __init__(self):
            super().__init__()
            self.x = torch.nn.Parameter(torch.zeros(2))

        def score_batch(self, params, seeds):
            raise ValueError("nope")

    with pytest.raises(es_search.ScoreError) as info:
        es_search.run(OnlyBatch(), generations=1, n_jobs=1, progress=False,
                      repeat_check=False)
    assert str(info.value).startswith("OnlyBatch.score_batch() (scoring the candidate "
                                      "alone, a group of one) failed on the starting agent")


class DropsARowOfBigGroups(es_search.Agent):
    """score_batch() returns one score too few for groups of more than 2."""

    score_batch_size = 4

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(2), requires_grad=False)

    def score_batch(self, params, seeds):
        scores = (-(params["w"] ** 2).sum(dim=1)).tolist()
        return scores[:-1] if len(scores) > 2 else scores


@pytest.mark.parametrize("n_jobs", [1, 2])
def test_a_score_that_is_no_number_names_the_candidates_and_generation(n_jobs):
    from es_search.scores import NotAScore
    with pytest.raises(NotAScore, match=r"returned 3 scores for 4 candidates.*"
                                        r"\(candidates 0-3 of generation 0\)$"):
        es_search.run(DropsARowOfBigGroups(), generations=2, population=8, n_jobs=n_jobs,
                      progress=False, sequential_fallback=False, repeat_check=False)


class OnlyScoreBatchRaisesOnARow(DropsARowOfBigGroups):
    """Defines score_batch() only; a row whose first weight is over 0.5 raises."""

    def score_batch(self, params, seeds):
        if bool((params["w"][:, 0] > 0.5).any()):
            raise ValueError("too far")
        return (-(params["w"] ** 2).sum(dim=1)).tolist()


def test_tolerated_failures_name_the_method_the_agent_defines():
    with pytest.warns(RuntimeWarning, match=r"OnlyScoreBatchRaisesOnARow\.score_batch\(\) "
                                         r"\(scoring the candidate alone.*raised on"):
        result = es_search.run(OnlyScoreBatchRaisesOnARow(), generations=2, population=8,
                               sigma=1.0, n_jobs=1, progress=False, on_error="worst",
                               repeat_check=False)
    assert sum(r["failures"] for r in result.history) > 0
