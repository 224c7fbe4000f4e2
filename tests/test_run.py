"""run(): task seeding, the caller's RNGs untouched, elitism, the Result, arguments,
the progress bar."""
import importlib
import math
import random

import joblib
import numpy as np
import pytest
import torch

import es_search

import agents
from agents import MatrixAgent, NoisyEverywhere, Quadratic, RandomScore, ReturnsText, SometimesNaN


def comparable(result):
    """Everything in a Result that must be reproducible (wall-clock seconds are not)."""
    history = [{k: v for k, v in h.items() if k != "seconds"} for h in result.history]
    return history, {k: v.tolist() for k, v in result.best_weights.items()}, result.evaluations


def test_candidates_and_generations_get_distinct_streams():
    result = es_search.run(RandomScore(), generations=3, population=8, seed=3, n_jobs=2,
                           progress=False)
    scores = [s for h in result.history for s in h["scores"]]
    assert len(set(scores)) == len(scores)  # no two tasks drew the same numbers
    other = es_search.run(RandomScore(), generations=3, population=8, seed=4, n_jobs=1,
                          progress=False)
    assert other.history[0]["scores"] != result.history[0]["scores"]


def test_a_different_seed_gives_a_different_run():
    """(The same seed gives the same run for any n_jobs: tests/test_determinism.py.)"""
    kwargs = dict(generations=4, population=6, sigma=0.2, n_jobs=1, progress=False)
    runs = [es_search.run(NoisyEverywhere(), seed=seed, **kwargs) for seed in (11, 12)]
    assert comparable(runs[0])[0] != comparable(runs[1])[0]


@pytest.mark.parametrize("n_jobs", [1, 2])
def test_the_callers_rng_state_is_untouched(n_jobs):
    random.seed(5)
    np.random.seed(5)
    torch.manual_seed(5)
    expected = (random.random(), np.random.rand(), torch.rand(1).item())
    random.seed(5)
    np.random.seed(5)
    torch.manual_seed(5)
    es_search.run(RandomScore(), generations=2, population=4, n_jobs=n_jobs, progress=False)
    assert (random.random(), np.random.rand(), torch.rand(1).item()) == expected


def test_the_callers_rngs_come_back_when_the_last_kept_block_closes():
    """A run keeps the caller's RNGs once (kept_global_rngs): the per-generation blocks
    inside it leave them as the tasks left them; blocks that overlap (runs in two
    threads) restore the state the first one saw when the last one closes."""
    from es_search.seeding import kept_global_rngs, preserved_global_rngs, seed_global_rngs

    def draws():
        return random.random(), np.random.rand(), torch.rand(1).item()
    seed_global_rngs(5)
    expected = draws()
    seed_global_rngs(5)
    first, second = kept_global_rngs(), kept_global_rngs()
    first.__enter__()
    with preserved_global_rngs():
        seed_global_rngs(1)
    second.__enter__()
    left = draws()
    seed_global_rngs(1)
    assert left == draws()  # not restored inside the kept blocks
    first.__exit__(None, None, None)  # the first run ends before the second
    second.__exit__(None, None, None)
    assert draws() == expected


def test_a_jitter_weights_override_that_the_strategy_never_calls_is_named():
    import warnings

    class Steps(Quadratic):
        def jitter_weights(self, sigma):
            self.w.add_(sigma)

    with pytest.warns(RuntimeWarning, match=r"Steps overrides jitter_weights\(\), which "
                      r"only the hill climbers call .*; pgpe moves every evolved value"):
        es_search.run(Steps(), generations=1, strategy="pgpe", population=4,
                      progress=False, n_jobs=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for name in ("hill-climb", "adaptive-hill-climb"):  # they call it
            es_search.run(Steps(), generations=1, strategy=name, population=4,
                          progress=False, n_jobs=1)
        es_search.run(Quadratic(), generations=1, strategy="pgpe", population=4,
                      progress=False, n_jobs=1)  # no override: nothing to say


def test_thread_backends_are_refused_with_a_reason_before_any_score():
    scored = []

    class Counted(Quadratic):
        def score(self):
            scored.append(1)
            return super().score()

    with joblib.parallel_config(backend="threading"):
        with pytest.raises(ValueError, match="thread-based joblib backend"):
            es_search.run(Counted(), generations=1, progress=False)
    with pytest.raises(ValueError, match="thread-based joblib backend"):
        es_search.run(Counted(), generations=1, progress=False, backend="threading",
                      n_jobs=2)
    with pytest.raises(ValueError, match="unknown backend 'nope': use one of ") as info:
        es_search.run(Counted(), generations=1, progress=False, backend="nope")
    assert "'threading'" not in str(info.value) and "'loky'" in str(info.value)
    assert not scored  # refused at the call, not after the repeat check's two scores


def test_parallel_config_backend_is_respected_and_equal():
    kwargs = dict(generations=3, population=4, seed=2, progress=False)
    with joblib.parallel_config(backend="multiprocessing", n_jobs=2):
        via_config = es_search.run(NoisyEverywhere(), **kwargs)
    assert comparable(via_config) == comparable(es_search.run(NoisyEverywhere(), n_jobs=1,
                                                              **kwargs))


def test_n_jobs_none_is_joblibs_default_as_in_scikit_learn():
    """None: the n_jobs of an enclosing parallel_config, else 1 (a plain loop)."""
    kwargs = dict(generations=3, population=4, seed=2, progress=False)
    alone = es_search.run(NoisyEverywhere(), n_jobs=None, **kwargs)
    assert alone.config["n_jobs"] == 1
    with joblib.parallel_config(n_jobs=2):
        configured = es_search.run(NoisyEverywhere(), n_jobs=None, **kwargs)
        with es_search.Evaluator(NoisyEverywhere(), n_jobs=None) as evaluator:
            assert evaluator.n_workers == 2
    assert configured.config["n_jobs"] == 2
    assert comparable(configured) == comparable(alone)


def test_quadratic_approaches_its_optimum():
    result = es_search.run(Quadratic(), generations=200, population=16, sigma=0.3, seed=0,
                           n_jobs=1, progress=False)
    assert result.history[0]["best_score"] < -50  # starts at -90
    assert result.best_score > -1.0
    assert result.best_weights["w"].sub(3).abs().max() < 0.6


def test_elitism_best_never_decreases_and_parent_is_kept():
    result = es_search.run(Quadratic(), generations=40, population=4, sigma=1.0, seed=1,
                           n_jobs=1, progress=False)
    best = [h["best_score"] for h in result.history]
    assert best == sorted(best)
    assert any(h["mean_score"] < h["best_score"] for h in result.history)
    assert result.best_score == max(s for h in result.history for s in h["scores"])


def test_result_shape_and_best_agent():
    agent = Quadratic(4)
    result = es_search.run(agent, generations=5, population=3, seed=0, n_jobs=1, progress=False)
    assert torch.equal(agent.w, torch.zeros(4))  # the agent passed in is not modified
    assert result.evaluations == 2 + 5 * 3  # reevaluate="auto" scores the start twice
    assert [h["generation"] for h in result.history] == list(range(5))
    for h in result.history:
        assert len(h["scores"]) == 3
        assert h["mean_score"] == pytest.approx(sum(h["scores"]) / 3)
    best = result.best_agent()
    assert best.score() == result.best_score
    assert best is not agent


def test_nan_scores_never_become_the_best():
    with pytest.warns(RuntimeWarning, match="SometimesNaN scored .* non-finite") as caught:
        result = es_search.run(SometimesNaN(), generations=15, population=8, sigma=0.5,
                               seed=0, n_jobs=1, progress=False)
    # the warning points at the user's run() call, not at a line of es_search
    assert [w.filename for w in caught.list] == [__file__]
    assert sum(h["nonfinite"] for h in result.history) > 0
    assert math.isfinite(result.best_score) and result.best_score <= 0.5
    assert result.best_weights["w"][0] <= 0.5


def test_a_score_that_is_not_a_number_names_the_agent():
    with pytest.raises(TypeError, match="ReturnsText.score.. returned str 'high'; it must"):
        es_search.run(ReturnsText(), generations=1, n_jobs=1, progress=False)

    class Forgot(Quadratic):
        def score(self):
            -float(((self.w - 3) ** 2).sum())
    with pytest.raises(TypeError, match=r"Forgot.score\(\) returned NoneType None \(is a "
                                        r"return statement missing\?\); it must return"):
        es_search.run(Forgot(), generations=1, n_jobs=1, progress=False)


@pytest.mark.parametrize("kwargs, error, match", [
    ({"generations": 0}, ValueError, "generations must be an integer >= 1"),
    ({"generations": 2.5}, TypeError, "generations must be an integer"),
    ({"population": 0}, ValueError, "population must be an integer >= 1"),
    ({"sigma": 0}, ValueError, "sigma must be a positive finite number"),
    ({"sigma": -1.0}, ValueError, "sigma must be a positive finite number"),
    ({"sigma": float("nan")}, ValueError, "sigma must be a positive finite number"),
    ({"sigma": float("inf")}, ValueError, "sigma must be a positive finite number"),
    ({"n_jobs": 0}, ValueError, "n_jobs must be an integer other than 0"),
    ({"seed": -1}, ValueError, "seed must be a non-negative integer"),
    ({"strategy": "nope"}, ValueError, "unknown strategy 'nope'"),
    ({"strategy": "cmaes"}, ValueError, r"unknown strategy 'cmaes' \(did you mean 'cma-es'\?\)"),
    ({"strategy": "PGPE"}, ValueError, r"unknown strategy 'PGPE' \(did you mean 'pgpe'\?\)"),
    ({"backend": "lokyy"}, ValueError, r"unknown backend 'lokyy' \(did you mean 'loky'\?\)"),
    ({"out": ""}, ValueError, r"out must be a folder path \(str or pathlib.Path, not empty\), got ''"),
])
def test_bad_arguments_fail_at_the_call(kwargs, error, match):
    args = {"generations": 3, **kwargs}
    with pytest.raises(error, match=match):
        es_search.run(Quadratic(), progress=False, **args)


class Target(es_search.Agent):
    """score() takes a required and an optional keyword (the run's score_kwargs)."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(3), requires_grad=False)

    def score(self, target, scale=1.0):
        return -scale * float(((self.w - target) ** 2).sum())


class TargetBatch(es_search.Agent):
    """Only score_batch, with a keyword-only argument."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(3), requires_grad=False)

    def score_batch(self, params, seeds, *, target):
        return -((params["w"] - target) ** 2).sum(dim=1)


@pytest.mark.parametrize("agent, score_kwargs, match", [
    (Target, {}, r"Target.score\(target, scale=1.0\): missing a required argument: 'target'"),
    (Target, {"target": 3, "scal": 2}, r"unexpected keyword argument 'scal'.*'target', 'scal'"),
    (TargetBatch, {"targt": 3}, r"TargetBatch.score_batch\(params, seeds, \*, target\)"),
    (Quadratic, {"target": 3}, r"Quadratic.score\(\): got an unexpected keyword"),
])
def test_score_kwargs_that_do_not_fit_the_agent_fail_before_any_work(tmp_path, agent,
                                                                       score_kwargs, match):
    with pytest.raises(TypeError, match=match):
        es_search.run(agent(), generations=2, score_kwargs=score_kwargs,
                      out=tmp_path / "run", progress=False)
    assert not (tmp_path / "run").exists()
    with pytest.raises(TypeError, match=match):
        es_search.evaluate(agent(), [agent().get_weights()], score_kwargs=score_kwargs)


def test_score_kwargs_that_fit_are_passed_on():
    class Open(Target):
        def score(self, **kwargs):
            return super().score(**kwargs)
    for agent in (Target(), Open(), TargetBatch()):
        result = es_search.run(agent, generations=3, population=4, n_jobs=1,
                               score_kwargs={"target": 1.0}, progress=False)
        assert result.best_score > -3.0  # the start scores -3 against target 1


def test_a_results_repr_is_a_summary():
    result = es_search.run(Quadratic(), generations=3, population=4, n_jobs=1,
                           progress=False)
    assert repr(result) == (f"Result(best_score={result.best_score!r}, generations=3, "
                            f"evaluations={result.evaluations}, strategy='hill-climb', "
                            f"seed=0, num_evolved=10, stopped_by=None, chosen='best')")


def test_a_run_inside_a_joblib_worker_scores_in_that_worker():
    """A sweep over seeds with joblib: in its workers joblib gives nested calls a thread
    backend, which es_search refuses when asked for it; asked for nothing (backend=None),
    the run scores in its worker, with n_jobs=1's result, instead of failing."""
    sweep = joblib.Parallel(n_jobs=2)(joblib.delayed(agents.sweep_seed)(s) for s in (0, 1))
    assert sweep == [agents.sweep_seed(s, n_jobs=1) for s in (0, 1)]
    with joblib.parallel_config("threading"):  # chosen by the user: still refused
        with pytest.raises(ValueError, match="thread-based joblib backend"):
            agents.sweep_seed(0, n_jobs=2)


def test_backend_names_joblib_does_not_know_are_refused_at_the_call_and_sequential_works():
    for n_jobs in (1, 2):
        with pytest.raises(ValueError, match="unknown backend 'nonsense': use one of .*'dask'"
                                             ".*'loky'.*'ray'"):
            es_search.run(Quadratic(), generations=1, n_jobs=n_jobs, backend="nonsense")
    sequential = es_search.run(Quadratic(), generations=3, population=4, n_jobs=2,
                               backend="sequential", progress=False)
    plain = es_search.run(Quadratic(), generations=3, population=4, n_jobs=1,
                          progress=False)
    assert sequential.history[-1]["scores"] == plain.history[-1]["scores"]


def test_a_run_starts_no_more_workers_than_its_largest_generation(monkeypatch):
    run_module = importlib.import_module("es_search.loop")
    opened = []

    class Recording(es_search.Evaluator):
        def __enter__(self):
            entered = super().__enter__()
            opened.append((self.n_workers, len(self.worker_pids)))
            return entered

    monkeypatch.setattr(run_module, "Evaluator", Recording)
    kwargs = dict(generations=2, sigma=0.3, n_jobs=8, progress=False,
                  sequential_fallback=False)
    capped = es_search.run(Quadratic(), population=2, strategy_options={"reevaluate": False},
                           **kwargs)
    es_search.run(Quadratic(), population=3, strategy_options={"reevaluate": True}, **kwargs)
    assert opened == [(2, 2), (4, 4)]  # 2 candidates; 3 and the parent
    plain = es_search.run(Quadratic(), population=2, strategy_options={"reevaluate": False},
                          **{**kwargs, "n_jobs": 1})
    assert [h["scores"] for h in capped.history] == [h["scores"] for h in plain.history]


def test_a_non_agent_is_refused():
    with pytest.raises(TypeError, match="must be an es_search.Agent"):
        es_search.run(torch.nn.Linear(2, 2), generations=1)


@pytest.mark.parametrize("call", [
    lambda a: es_search.run(a, generations=1), lambda a: es_search.evaluate(a, []),
    lambda a: es_search.replay_task(a, generation=0, index=0, seed=0),
    lambda a: es_search.check_score_batch(a)])
def test_an_agent_class_instead_of_an_instance_says_so(call):
    with pytest.raises(TypeError, match=r"an instance of Quadratic, got the class itself: "
                                        r"pass Quadratic\(\.\.\.\)"):
        call(Quadratic)


class ForgetsSuperInit(es_search.Agent):
    def __init__(self):
        self.size = 3  # torch would say: 'ForgetsSuperInit' object has no attribute ...

    def score(self):
        return 0.0


@pytest.mark.parametrize("call", [
    lambda a: es_search.run(a, generations=1), lambda a: es_search.evaluate(a, [{}]),
    lambda a: es_search.check_score_batch(a)])
def test_an_agent_whose_init_skips_super_init_is_told_to_call_it(call):
    with pytest.raises(TypeError, match=r"ForgetsSuperInit is not set up as a "
                                        r"torch.nn.Module: its __init__ must call "
                                        r"super\(\).__init__\(\) before anything else"):
        call(ForgetsSuperInit())


class NothingToEvolve(es_search.Agent):
    def __init__(self):
        super().__init__()
        self.register_buffer("counts", torch.zeros(3))  # state, but nothing evolved
        self.steps = torch.nn.Parameter(torch.zeros(2, dtype=torch.int64),
                                        requires_grad=False)  # not floating point

    def score(self):
        return 0.0


def test_an_agent_with_nothing_to_evolve_is_refused():
    with pytest.raises(ValueError, match="NothingToEvolve has no evolved parameters, so "
                                         "there is nothing to search.*its parameters "
                                         "steps \\(torch.int64\\) are not floating-point"):
        es_search.run(NothingToEvolve(), generations=1)


class Evolves(es_search.Agent):
    """Evolves ``a`` only; ``pairs`` is what evolved_parameters() gives."""

    def __init__(self, pairs):
        super().__init__()
        self.a, self.frozen = torch.nn.Linear(3, 3), torch.nn.Linear(3, 3)
        self.register_buffer("level", torch.zeros(2))
        self.register_buffer("count", torch.zeros(2, dtype=torch.int64))
        self.pairs = pairs

    def evolved_parameters(self):
        return self.pairs(self)

    def score(self):
        return -float((self.a.weight - 1).pow(2).sum())


@pytest.mark.parametrize("pairs, error, match", [
    (lambda m: list(m.a.named_parameters()), ValueError,
     "names a tensor 'weight', which is not the agent's state_dict\\(\\) entry of that "
     "name.*it is 'a.weight' there"),
    (lambda m: [("t", torch.nn.Parameter(torch.zeros(3)))], ValueError,
     "names a tensor 't'.*register it as a Parameter or a buffer"),
    (lambda m: [("frozen.weight", m.a.weight)], ValueError,
     "'frozen.weight'.*it is 'a.weight' there"),
    (lambda m: [("a.weight", m.a.weight)] * 2, ValueError, "\\['a.weight'\\] more than once"),
    (lambda m: [("count", m.count)], TypeError, "'count', a torch.int64 tensor"),
    (lambda m: [("a.weight", [1.0])], TypeError, "gave 'a.weight': list, not a tensor"),
    (lambda m: [m.a.weight], TypeError, "must return a list of \\(name, parameter\\) pairs"),
    (lambda m: None, TypeError, "must return a list of \\(name, parameter\\) pairs"),
])
def test_evolved_parameters_must_be_the_agents_own_named_entries(pairs, error, match, tmp_path):
    out = tmp_path / "run"
    with pytest.raises(error, match=f"Evolves.*{match}"):
        es_search.run(Evolves(pairs), generations=1, n_jobs=1, progress=False, out=out)
    assert not out.exists()  # refused before any work


def test_evolved_parameters_may_be_a_subset_or_a_buffer_and_load_back(tmp_path):
    pairs = lambda m: list(m.a.named_parameters(prefix="a")) + [("level", m.level)]
    result = es_search.run(Evolves(pairs), generations=3, n_jobs=1, progress=False,
                           out=tmp_path / "run")
    loaded = es_search.Result.load(tmp_path / "run", Evolves(pairs)).best_agent()
    assert set(result.best_weights) == {"a.weight", "a.bias", "level"}
    assert torch.equal(loaded.a.weight, result.best_weights["a.weight"])


def test_progress_bar_on_and_off(capsys):
    es_search.run(Quadratic(), generations=2, population=2, n_jobs=1, progress=False)
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ""
    es_search.run(Quadratic(), generations=2, population=2, n_jobs=1, progress=True)
    assert "2/2" in capsys.readouterr().err


def test_progress_into_a_file_is_redrawn_rarely(capsys):
    """stderr is not a terminal (a job's log file): the bar is drawn at the start and the
    end, not ten times a second (here 40 generations of 20 ms)."""
    import time
    es_search.run(Quadratic(), generations=40, population=2, n_jobs=1, progress=True,
                  callbacks=[lambda record: time.sleep(0.02)])
    err = capsys.readouterr().err
    assert "40/40" in err and err.count("gen/s") + err.count("s/gen") <= 3, err


def test_callbacks_see_records_and_can_stop_the_run():
    seen = []
    result = es_search.run(Quadratic(), generations=10, population=2, n_jobs=1, progress=False,
                           callbacks=[lambda r: seen.append(r["generation"]) or len(seen) == 3])
    assert seen == [0, 1, 2] and result.generations == 3


def test_task_seeds_are_independent_of_the_worker_and_documented():
    assert es_search.task_seed(0, 0, 0) != es_search.task_seed(0, 0, 1)
    assert es_search.task_seed(0, 0, 0) != es_search.task_seed(0, 1, 0)
    assert es_search.task_seed(0, 0, 0) != es_search.task_seed(1, 0, 0)
    assert 0 <= es_search.task_seed(2**40, 7, 3) < 2**64


@pytest.mark.parametrize("strategy", ["pgpe", "hill-climb"])
def test_center_weights_are_the_final_centre_with_the_shared_state(strategy, tmp_path):
    from es_search import checkpoint
    from es_search.folder import CHECKPOINT
    from es_search.strategies import make_strategy
    result = es_search.run(MatrixAgent(), strategy=strategy, generations=4, population=6,
                           sigma=0.2, seed=5, n_jobs=1, progress=False, out=tmp_path)
    saved = checkpoint.load(tmp_path / CHECKPOINT)
    expected = MatrixAgent()
    expected.set_flat(make_strategy(strategy, 6, 0.2).center(saved["state"]))
    center = result.center_agent()
    assert np.array_equal(center.get_flat(), expected.get_flat())
    assert saved["shared"] and all(torch.equal(result.center_weights[k], torch.as_tensor(v))
                                   for k, v in saved["shared"].items())
    stored = torch.load(tmp_path / "center_weights.pt")
    assert stored.keys() == result.center_weights.keys()
    assert all(torch.equal(stored[k], result.center_weights[k]) for k in stored)
    if strategy == "pgpe":  # a mean that is never scored itself: not the best sample
        assert not np.array_equal(center.get_flat(), result.best_agent().get_flat())


@pytest.mark.parametrize("extra, named", [
    (dict(population=16), "population"), (dict(sigma=0.2), "sigma"),
    (dict(strategy_options={"momentum": 0.5}), "strategy_options"),
    (dict(population=16, strategy_options={"momentum": 0.5}), "population or strategy_options"),
])
def test_settings_beside_a_strategy_instance_are_refused_by_name(extra, named):
    strategy = es_search.make_strategy("pgpe", 8, 0.1)
    with pytest.raises(ValueError, match=rf"the strategy instance PGPE\(.*\) carries its own "
                                         rf"settings; do not pass {named} to run\(\) as well"):
        es_search.run(Quadratic(), generations=1, strategy=strategy, **extra)


def test_a_strategy_class_instead_of_an_instance_says_so():
    from es_search.strategies.pgpe import PGPE
    with pytest.raises(TypeError, match=r"strategy is the class PGPE itself; pass an "
                                        r"instance, PGPE\(\.\.\.\) or its name 'pgpe'"):
        es_search.run(Quadratic(), generations=1, strategy=PGPE)
