"""The run's answer is the policy that tests best (es_search.selection)."""
import importlib
import json

import numpy as np
import pytest
import torch

import es_search
from es_search import checkpoint
from es_search.folder import RunDir
from es_search.seeding import task_seed
from es_search.selection import SELECTION_GENERATION, Snapshots, describe
from compare import same_weights


class Risky(es_search.Agent):
    """Optimum at w = 0, where the score is exactly 0; anywhere else its mean is
    -30 |w| and its noise 30 |w| z: the best single evaluation is a lucky risky one."""

    calls = 0  # score() calls in this process (n_jobs=1)

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(2))

    def score(self):
        Risky.calls += 1
        size = float(self.w.abs().sum())
        return size * (30.0 * float(torch.randn(())) - 30.0)


class Quadratic(es_search.Agent):
    calls = 0

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(3))

    def score(self):
        Quadratic.calls += 1
        return -float(((self.w - 3) ** 2).sum())


def _run(agent, **kwargs):
    # ARS with a tiny step: the centre stays at the optimum, the candidates around it
    options = dict(generations=4, strategy="ars", population=8, sigma=0.5,
                   strategy_options={"step_size": 1e-6}, n_jobs=1, progress=False, seed=3,
                   select_tasks=8)
    return es_search.run(agent, **{**options, **kwargs})


def test_a_lucky_best_loses_to_the_centre():
    result = _run(Risky())
    assert result.best_score > 0  # a lucky evaluation of a risky candidate
    assert result.chosen.startswith("center")  # the final one or an earlier one: all ~0
    best, center = result.selection["best"], result.selection["center"]
    assert best["n"] == center["n"] == 8 and best["mean"] < 0 < best["std"]
    assert abs(center["mean"]) < 1e-3 and center["std"] < 1e-3  # at the optimum
    means = {name: f["mean"] for name, f in result.selection.items()}
    assert means[result.chosen] == max(means.values())
    assert result.chosen_agent().w.tolist() == result.chosen_weights["w"].tolist()
    assert result.best_agent().w.tolist() != result.center_agent().w.tolist()
    line = describe(result.chosen, result.selection)
    assert line.startswith("handed back: the ") and " on 8 fresh tasks (the best " \
        "evaluation: " in line


def test_snapshots_span_the_run_evenly():
    for n in (3, 8, 9, 40, 1000):
        snapshots = Snapshots(8)
        for g in range(1, n + 1):
            snapshots.add(g, lambda: {"w": np.full(2, float(g))})
        kept = sorted(snapshots.kept)
        assert kept == list(range(snapshots.spacing, n + 1, snapshots.spacing))
        assert len(kept) <= 8 and (n < 8 or len(kept) >= 4)
        assert all(snapshots.kept[g]["w"][0] == g for g in kept)


def test_a_centre_that_walked_away_loses_to_an_earlier_one():
    """ARS with a step far too large on Risky: the centre random-walks away from the
    optimum at 0; an earlier centre, nearer to it, is handed back, and it is the final
    centre of the same run stopped then."""
    result = _run(Risky(), generations=8, strategy_options={"step_size": 2.0})
    assert result.chosen.startswith("center@")
    generations = int(result.chosen.partition("@")[2])
    means = {name: f["mean"] for name, f in result.selection.items()}
    assert means[result.chosen] == max(means.values()) > means["center"]
    shorter = _run(Risky(), generations=generations, strategy_options={"step_size": 2.0},
                   select_tasks=0)
    assert same_weights(result.chosen_weights, shorter.center_weights)


def test_selection_tasks_are_a_stream_of_their_own():
    """Task i of the test: task_seed(seed, SELECTION_GENERATION, i); a run's generations
    stop below it."""
    seeds = {task_seed(3, SELECTION_GENERATION, i) for i in range(8)}
    search = {task_seed(3, g, i) for g in range(-1, 50) for i in range(8)}
    assert len(seeds) == 8 and not seeds & search
    with pytest.raises(ValueError, match="generations must be an integer below"):
        es_search.run(Quadratic(), generations=SELECTION_GENERATION, progress=False)
    assert _run(Risky(), select_tasks=1).selection["center"]["n"] == 1  # one task each
    for bad, error in ((-1, ValueError), (2.0, TypeError)):
        with pytest.raises(error, match="select_tasks"):
            es_search.run(Quadratic(), generations=1, select_tasks=bad, progress=False)


def test_a_score_that_ignores_its_seed_keeps_the_best_and_scores_it_only():
    Quadratic.calls = 0
    untested = _run(Quadratic(), select_tasks=0)
    calls, Quadratic.calls = Quadratic.calls, 0
    result = _run(Quadratic())
    assert not same_weights(result.best_weights, result.center_weights)  # a choice to make
    assert result.chosen == "best" and result.selection is None
    assert same_weights(result.chosen_weights, result.best_weights)
    assert Quadratic.calls == calls + 8  # the best's 8 tasks; the centre is not scored
    assert untested.chosen == "best" and untested.selection is None


def test_hill_climb_centre_is_the_best_nothing_to_test():
    Risky.calls = 0
    result = es_search.run(Risky(), generations=3, population=4, n_jobs=1, progress=False,
                           strategy_options={"reevaluate": False})
    calls = Risky.calls
    assert result.chosen == "best" and result.selection is None
    assert calls == 1 + 3 * 4 + 2  # start, generations, the repeat check: no test


@pytest.mark.parametrize("n_jobs", [2])
def test_the_same_answer_for_any_n_jobs(n_jobs):
    one = _run(Risky())
    many = _run(Risky(), n_jobs=n_jobs, sequential_fallback=False)  # tested in workers
    assert (one.chosen, one.selection) == (many.chosen, many.selection)
    assert same_weights(one.chosen_weights, many.chosen_weights)


class Shaped(es_search.Agent):
    """A search score below 100, a true one (the selection test's) above it."""

    def __init__(self, batch: int = 0):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(2))
        self.score_batch_size = batch

    def score(self):
        return 1000.0 * self.selecting + float(torch.randn(())) - float(self.w.abs().sum())

    def score_batch(self, params, seeds):
        return [1000.0 * self.selecting + float(np.random.default_rng(s).normal())
                - float(w.abs().sum()) for s, w in zip(seeds, params["w"])]


@pytest.mark.parametrize("n_jobs, batch", [(1, 0), (2, 0), (1, 4)])
def test_the_selection_test_scores_with_selecting_on_and_the_search_off(n_jobs, batch):
    result = _run(Shaped(batch), n_jobs=n_jobs, sequential_fallback=False)
    assert max(s for h in result.history for s in h["scores"]) < 100  # the search's
    assert len(result.selection) > 1
    assert all(f["mean"] > 900 for f in result.selection.values())  # the test's
    assert Shaped().selecting is False


class FailsItsTest(Risky):
    """A score that raises in the end's selection test only."""

    def score(self):
        if self.selecting:
            raise RuntimeError("no test environment")
        return super().score()


def test_a_selection_test_that_fails_is_named_as_such_or_shown_failed():
    with pytest.raises(es_search.ScoreError) as info:
        _run(FailsItsTest())
    message = str(info.value)
    assert "failed on task 0 of the end's selection test" in message
    assert "select_tasks=0" in message and "4294967295" not in message
    result = _run(FailsItsTest(), on_error="worst")  # every test task failed: shown so,
    assert result.selection is not None  # not taken for a score that ignores its seed
    assert all(f["mean"] == -float("inf") for f in result.selection.values())
    assert result.chosen == "best"


def test_a_tolerated_failure_of_the_selection_test_warns_what_holds_for_it(tmp_path,
                                                                          monkeypatch):
    """The warning spoke of the history's 'failures' and of replay_task(out=...,
    generation=4294967295), neither of which holds for the selection test."""
    with pytest.warns(RuntimeWarning) as caught:
        _run(FailsItsTest(), on_error="worst", out=tmp_path)
    message = str(caught[0].message)
    assert message.startswith("FailsItsTest.score() failed on task 0 of the end's selection "
                              "test, which scores the kept policies on fresh tasks")
    assert "the 8 failed task(s) of this policy -inf" in message
    assert "resume the run with another select_tasks to test again, or resume it with " \
           "select_tasks=0" in message
    assert "'failures'" not in message and "replay_task" not in message
    monkeypatch.setattr(FailsItsTest, "score", Risky.score)  # fixed: as the warning says,
    again = _run(FailsItsTest(), on_error="worst", out=tmp_path, resume=True)  # not tested
    assert all(f["mean"] == -float("inf") for f in again.selection.values())
    again = _run(FailsItsTest(), out=tmp_path, resume=True, select_tasks=4)  # tested again
    assert all(f["n"] == 4 and f["mean"] > -float("inf") for f in again.selection.values())
    with pytest.warns(RuntimeWarning, match="complete but not saved: fix score"):
        monkeypatch.undo()
        _run(FailsItsTest(), on_error="worst")


class FailsSometimes(Risky):
    """A score that raises on a third of its tasks, in the search and in the test."""

    def score(self):
        if self.task_seed % 3 == 0:
            raise RuntimeError("an unlucky task")
        return super().score()


def test_failures_in_the_search_do_not_hide_the_selection_tests():
    """One warning for both, said once per run: the selection test's went unsaid."""
    with pytest.warns(RuntimeWarning) as caught:
        _run(FailsSometimes(), on_error="worst")
    said = [str(w.message) for w in caught]
    assert sum("of generation" in m or "starting agent" in m for m in said) == 1
    assert sum("of the end's selection test" in m for m in said) == 1


def test_the_command_says_the_selection_tests_settings_as_its_flags(tmp_path, capsys):
    """es-search run said 'resume it with select_tasks=0', a setting it has as a flag."""
    from es_search.cli import main
    run = ["run", "test_selection:FailsItsTest", "--generations", "2", "--strategy", "ars",
           "--population", "4", "--n-jobs", "1", "--no-progress", "--no-test"]
    assert main([*run, "--out", str(tmp_path)]) == 1
    assert "The search is complete: fix score() and resume the run, or resume it with " \
           "--select-tasks 0 to hand back" in capsys.readouterr().err
    assert main(run) == 1
    assert "run it again (--out DIR keeps the search), or run it with --select-tasks 0" in \
        capsys.readouterr().err


def test_the_run_folder_holds_the_answer_and_a_resume_keeps_it(tmp_path, monkeypatch):
    agent = Risky()
    result = _run(agent, out=tmp_path)
    end = json.loads((tmp_path / "result.json").read_text())
    assert (end["chosen"], end["selection"], end["select_tasks"]) == \
        (result.chosen, result.selection, 8)
    assert same_weights(RunDir(tmp_path).weights("chosen"), result.chosen_weights)
    loaded = es_search.Result.load(tmp_path, Risky())
    assert (loaded.chosen, loaded.selection) == (result.chosen, result.selection)
    assert loaded.chosen_agent().w.tolist() == result.chosen_agent().w.tolist()

    def no_test(*args):
        raise AssertionError("a resume of a run that had ended tests nothing again")
    monkeypatch.setattr(importlib.import_module("es_search.loop"), "select", no_test)
    resumed = _run(agent, out=tmp_path, resume=True)
    assert (resumed.chosen, resumed.selection) == (result.chosen, result.selection)
    monkeypatch.undo()
    again = _run(agent, out=tmp_path, resume=True, select_tasks=4)  # asked for another
    assert again.selection["best"]["n"] == 4
    assert json.loads((tmp_path / "result.json").read_text())["select_tasks"] == 4


def test_an_interrupted_run_resumed_hands_back_the_same_answer(tmp_path):
    options = dict(strategy_options={"step_size": 2.0})
    whole = _run(Risky(), generations=8, **options)
    _run(Risky(), generations=5, out=tmp_path, **options)
    resumed = _run(Risky(), generations=8, out=tmp_path, resume=True, **options)
    assert (resumed.chosen, resumed.selection) == (whole.chosen, whole.selection)
    assert same_weights(resumed.chosen_weights, whole.chosen_weights)
    kept = checkpoint.load(tmp_path / "checkpoint.pkl")["snapshots"].kept  # their size:
    assert {w["w"].dtype for w in kept.values()} == {torch.float32}  # the agent's dtype


class Measured(Risky):
    def test_scores(self):
        return {"size": float(self.w.abs().sum())}


def test_es_search_test_tests_the_centre_handed_back(tmp_path, capsys):
    from es_search.cli import main
    from es_search.selection import label
    result = _run(Measured(), generations=8, strategy_options={"step_size": 2.0},
                  out=tmp_path)
    assert result.chosen.startswith("center@")
    assert main(["test", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    size = float(result.chosen_weights["w"].abs().sum())
    assert f"test of {label(result.chosen)} (handed back), outside the search: " \
           f"size {size:.6g}" in lines and len(lines) == 3  # best, final centre, chosen
    assert json.loads((tmp_path / "test.json").read_text())[result.chosen] == {"size": size}


def test_a_run_started_untested_and_resumed_with_a_test_hands_back_the_same():
    options = dict(strategy_options={"step_size": 2.0})
    whole = _run(Risky(), generations=8, **options)

    def resumed(tmp):
        _run(Risky(), generations=5, out=tmp, select_tasks=0, **options)
        return _run(Risky(), generations=8, out=tmp, resume=True, **options)
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        again = resumed(tmp)
    assert (again.chosen, again.selection) == (whole.chosen, whole.selection)


class Scripted:
    """An evaluator whose calls return the scores given, in turn."""

    def __init__(self, *scores):
        self.scores = list(scores)

    def evaluate(self, weights, generation):
        return self.scores.pop(0)


def test_a_mean_that_is_not_finite_is_never_chosen_over_a_finite_one():
    from es_search.selection import select
    w = [{"w": torch.full((1,), float(k))} for k in range(3)]
    named = {"best": w[0], "center": w[1], "center@3": w[2]}
    chosen, _ = select(Scripted([1.0, 2.0], [-np.inf, 0.0], [np.inf, 0.0]), named, 2)
    assert chosen == "best"
    chosen, _ = select(Scripted([np.nan, 2.0], [-np.inf, 0.0], [0.0, 1.0]), named, 2)
    assert chosen == "center@3"
    chosen, _ = select(Scripted([1.0, 3.0], [2.0, 2.0], [2.0, 2.0]), named, 2)
    assert chosen == "best"  # equal means: the first


def test_the_summary_line_names_the_earlier_centres_in_words():
    figures = {name: {"mean": mean, "std": 1.0, "n": 4} for name, mean in
               (("best", 1.0), ("center", 2.0), ("center@4", 5.0), ("center@2", 3.0))}
    assert describe("center@4", figures).endswith(
        "(the best evaluation: 1 +- 1; the final centre: 2 +- 1; an earlier centre: 3)")
    assert describe("center", figures).endswith("2 earlier centres: 3 to 5)")
