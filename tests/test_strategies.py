"""Conformance tests over every registered strategy (evosax-style), and each one's own."""
from __future__ import annotations

import copy
import dataclasses
import json
import math
import pickle

import numpy as np
import pytest

import es_search
from es_search import candidates as cand
from es_search.problems.sphere import Sphere
from es_search.seeding import preserved_global_rngs, seed_global_rngs, task_seed
from es_search.strategies import (STRATEGIES, ARS, PGPE, AdaptiveHillClimb, CMAES,
                                  OpenAIES, make_strategy)
from es_search.strategies.openai_es import centered_ranks

NAMES = sorted(STRATEGIES)
DIM = 4


def _strategy(name, population=6, sigma=0.5, **options):
    return make_strategy(name, population=population, sigma=sigma, **options)


def _rebuilder(agent, center, candidates, seed, generation):
    """rebuild(i) as run() does it: candidate i built under its task seed."""
    def rebuild(i):
        with preserved_global_rngs():
            seed_global_rngs(task_seed(seed, generation, i))
            cand.build(agent, center, candidates[i], seed, generation)
        return agent.get_flat()
    return rebuild


def _fields(state):
    return {f.name: copy.deepcopy(getattr(state, f.name)) for f in dataclasses.fields(state)}


def _same(a, b):
    if isinstance(a, np.ndarray):
        return np.array_equal(a, b)
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    return a == b


def _same_candidates(a, b):
    return len(a) == len(b) and all(
        x[:4] == y[:4] and (x.vector is None if y.vector is None
                            else np.array_equal(x.vector, y.vector)) for x, y in zip(a, b))


def _run(name, seed=0, generations=5, n_jobs=1, population=6, **kw):
    return es_search.run(Sphere(dim=DIM), generations=generations, population=population,
                         sigma=0.5, strategy=name, n_jobs=n_jobs, seed=seed,
                         progress=False, **kw)


@pytest.mark.parametrize("name", NAMES)
def test_ask_returns_population_candidates(name):
    strategy = _strategy(name)
    state = strategy.init(np.zeros(DIM), -36.0, seed=0)
    candidates = strategy.ask(state, 0)
    assert len(candidates) == strategy.population == 6
    assert _same_candidates(candidates, strategy.ask(state, 0))  # ask is pure
    assert all(isinstance(c, es_search.Candidate) and c.kind in cand.KINDS
               for c in candidates)
    assert strategy.center(state).shape == (DIM,)
    assert strategy.sigma(state) > 0


@pytest.mark.parametrize("name, options", [(n, None) for n in NAMES] + [
    ("hill-climb", {"reevaluate": True}), ("adaptive-hill-climb", {"reevaluate": True}),
    ("hill-climb", {"reevaluate": False})])
def test_no_generation_scores_more_than_max_tasks(name, options):
    """A run starts at most max_tasks workers: every generation must fit."""
    strategy = _strategy(name, population=6, **(options or {}))
    bound = strategy.max_tasks(DIM)
    assert bound >= strategy.initial_evaluations
    sizes = []
    _run(name, generations=4, strategy_options=options,
         callbacks=[lambda record: sizes.append(len(record["scores"]))])
    assert sizes and max(sizes) <= bound
    if options and options.get("reevaluate") is True:
        assert max(sizes) == bound == 7  # the parent, scored again
    assert _strategy("cma-es", population=6, restarts="ipop").max_tasks(DIM) is None


@pytest.mark.parametrize("name", NAMES)
def test_tell_returns_a_new_state_and_leaves_the_old_one_alone(name):
    strategy = _strategy(name)
    agent = Sphere(dim=DIM)
    state = strategy.init(np.zeros(DIM), -36.0, seed=1)
    assert dataclasses.is_dataclass(state)
    assert all(p.frozen for p in [type(state).__dataclass_params__])
    with pytest.raises(dataclasses.FrozenInstanceError):
        state.sigma = 1.0
    before = _fields(state)
    candidates = strategy.ask(state, 0)
    scores = [-float(i) for i in range(len(candidates))]
    new = strategy.tell(state, 0, candidates, scores,
                        _rebuilder(agent, strategy.center(state), candidates, 1, 0))
    assert new is not state and type(new) is type(state)
    assert all(_same(v, getattr(state, k)) for k, v in before.items())
    assert not all(_same(getattr(new, k), v) for k, v in before.items())
    # the state pickles (checkpoints hold it) and the strategy does too
    again = pickle.loads(pickle.dumps(new))
    assert _same_candidates(strategy.ask(again, 1), strategy.ask(new, 1))
    assert pickle.loads(pickle.dumps(strategy)).config() == strategy.config()


@pytest.mark.parametrize("name", NAMES)
def test_same_seed_same_run_and_other_seed_other_run(name):
    a, b, c = _run(name, seed=3), _run(name, seed=3), _run(name, seed=4)
    assert [h["scores"] for h in a.history] == [h["scores"] for h in b.history]
    assert a.best_score == b.best_score
    assert [h["scores"] for h in a.history] != [h["scores"] for h in c.history]


@pytest.mark.parametrize("name", NAMES)
def test_improves_on_sphere(name):
    options = {"openai-es": {"learning_rate": 0.1},  # the defaults are for nets
               "ars": {"step_size": 0.3}}.get(name)
    result = _run(name, generations=40, population=8, strategy_options=options)
    start = -float(DIM * 9)  # the start x = 0, optimum 3
    assert result.best_score > 0.5 * start, result.best_score


@pytest.mark.parametrize("name", NAMES)
def test_one_worker_and_two_workers_give_the_same_run(name):
    one = _run(name, seed=5, generations=3, n_jobs=1, population=4)
    two = _run(name, seed=5, generations=3, n_jobs=2, population=4)
    assert [h["scores"] for h in one.history] == [h["scores"] for h in two.history]
    assert one.best_score == two.best_score


@pytest.mark.parametrize("name", NAMES)
def test_fuzz_random_and_non_finite_scores(name):
    rng = np.random.default_rng(0)
    strategy = _strategy(name, population=6)
    agent = Sphere(dim=DIM)
    state = strategy.init(np.zeros(DIM), -36.0, seed=2)
    for generation in range(25):
        candidates = strategy.ask(state, generation)
        kind = generation % 5
        if kind == 4:  # nothing finite at all
            scores = [math.nan, math.inf, -math.inf, math.nan, math.nan, -math.inf]
        else:
            scores = list(rng.normal(0, 10.0 ** rng.integers(-3, 6), len(candidates)))
            for i in rng.choice(len(scores), size=kind, replace=False):
                scores[i] = [math.nan, math.inf, -math.inf][rng.integers(3)]
        state = strategy.tell(state, generation, candidates, scores,
                              _rebuilder(agent, strategy.center(state), candidates, 2,
                                         generation))
        assert np.all(np.isfinite(strategy.center(state)))
        assert math.isfinite(strategy.sigma(state)) and strategy.sigma(state) > 0


@pytest.mark.parametrize("name", NAMES)
def test_config_names_the_strategy_and_its_settings(name):
    strategy = _strategy(name, population=8, sigma=0.25)
    config = strategy.config()
    assert config["name"] == name and config["population"] == 8
    assert config["sigma"] == 0.25
    assert _strategy(name, population=8, sigma=0.5).config() != config


@pytest.mark.parametrize("name,options,error", [
    ("adaptive-hill-climb", {"population": 0}, ValueError),
    ("adaptive-hill-climb", {"sigma": -1.0}, ValueError),
    ("adaptive-hill-climb", {"reevaluate": "yes"}, TypeError),
    ("adaptive-hill-climb", {"target_success": 1.5}, ValueError),
    ("adaptive-hill-climb", {"min_sigma": 2.0, "max_sigma": 1.0}, ValueError),
    ("openai-es", {"population": 7}, ValueError),
    ("openai-es", {"learning_rate": 0.0}, ValueError),
    ("openai-es", {"weight_decay": -0.1}, ValueError),
    ("openai-es", {"beta1": 1.0}, ValueError),
    ("openai-es", {"weight_decay": "0"}, TypeError),
    ("openai-es", {"beta2": "0.9"}, TypeError),
    ("ars", {"population": 7}, ValueError),
    ("ars", {"population": 8, "directions": 3}, ValueError),
    ("ars", {"directions": 0}, ValueError),
    ("ars", {"directions": 4, "top": 5}, ValueError),
    ("ars", {"top": 1.5}, TypeError),
    ("ars", {"step_size": -0.1}, ValueError),
    ("pgpe", {"population": 5}, ValueError),
    ("pgpe", {"step_size": 0.0}, ValueError),
    ("pgpe", {"max_speed": -1.0}, ValueError),
    ("pgpe", {"momentum": 1.5}, ValueError),
    ("pgpe", {"stdev_lr": float("inf")}, ValueError),
    ("pgpe", {"stdev_max_change": 1.0}, ValueError),
    ("pgpe", {"stdev_max_change": None}, ValueError),
    ("cma-es", {"population": 1}, ValueError),
    ("cma-es", {"sigma": float("nan")}, ValueError),
    ("cma-es", {"options": {"seed": 3}}, ValueError),
    ("cma-es", {"options": {"no_such_option": 1}}, ValueError),
    ("cma-es", {"options": [1]}, TypeError),
    ("cma-es", {"restarts": "lpop"}, ValueError),
    ("cma-es", {"restarts": "ipop", "max_restarts": -1}, ValueError),
])
def test_bad_settings_fail_at_construction(name, options, error):
    with pytest.raises(error):
        make_strategy(name, **options)


def test_a_pycma_option_typo_names_the_closest():
    with pytest.raises(ValueError, match=r"unknown pycma options \['tolfunn'\] \(did you "
                                         r"mean 'tolfun'\?\); see cma.CMAOptions\(\)"):
        make_strategy("cma-es", options={"tolfunn": 1e-9})
    with pytest.raises(ValueError, match=r"options \['verbose'\] are es_search's to set: give "
                                         r"population=... and the run's seed; pycma prints"):
        make_strategy("cma-es", options={"verbose": 3})


def test_unknown_option_names_the_strategy():
    with pytest.raises(TypeError, match="openai-es"):
        make_strategy("openai-es", reevaluate=True)


def test_an_option_typo_names_the_options_and_the_closest():
    with pytest.raises(TypeError) as info:
        make_strategy("pgpe", stepsize=0.1)
    assert str(info.value) == ("strategy 'pgpe' has no option 'stepsize' (did you mean "
                               "'step_size'?); its options: step_size, max_speed, momentum, "
                               "stdev_lr, stdev_max_change")
    with pytest.raises(TypeError, match=r"strategy_options must be the strategy's own "
                                        r"options, without population, got \{'population': "
                                        r"8\}; give population on its own"):
        es_search.run(Sphere(), generations=1, strategy_options={"population": 8})


# ------------------------------------------------------------------ adaptive-hill-climb
def test_success_rule_widens_on_success_and_narrows_on_failure():
    strategy = AdaptiveHillClimb(population=4, sigma=1.0)
    state = strategy.init(np.zeros(2), -10.0, seed=0)
    vectors = {i: np.full(2, float(i)) for i in range(4)}
    wide = strategy.tell(state, 0, strategy.ask(state, 0), [-1.0, -2.0, -3.0, -4.0],
                         vectors.get)
    narrow = strategy.tell(state, 0, strategy.ask(state, 0), [-11.0] * 4, vectors.get)
    assert wide.sigma > 1.0 > narrow.sigma
    assert narrow.center_score == -10.0 and np.array_equal(narrow.center, np.zeros(2))


def test_adaptive_reevaluate_scores_the_parent_again():
    strategy = AdaptiveHillClimb(population=3, sigma=1.0, reevaluate=True)
    state = strategy.init(np.zeros(2), 100.0, seed=0)  # a lucky first score
    candidates = strategy.ask(state, 0)
    assert len(candidates) == 4 and candidates[-1].kind == "center"
    vectors = {i: np.full(2, float(i)) for i in range(3)}
    new = strategy.tell(state, 0, candidates, [5.0, 6.0, 1.0, 2.0], vectors.get)
    assert new.center_score == 6.0 and np.array_equal(new.center, vectors[1])


def test_adaptive_hill_climb_converges_on_sphere():
    result = es_search.run(Sphere(dim=5), generations=120, population=10, sigma=1.0,
                           strategy="adaptive-hill-climb", n_jobs=1, progress=False)
    assert result.best_score > -1e-6  # a fixed sigma of 1.0 stalls near -1
    assert result.history[-1]["sigma"] < 0.01


# ------------------------------------------------------------------ openai-es
def test_centered_ranks():
    assert centered_ranks([5.0, 1.0, 3.0, 7.0]).tolist() == pytest.approx(
        [1 / 6, -0.5, -1 / 6, 0.5])
    assert centered_ranks([2.0, 2.0]).tolist() == [0.0, 0.0]
    assert centered_ranks([math.inf, 1.0, -math.inf]).tolist() == [-0.25, 0.5, -0.25]


def test_centered_ranks_follow_their_definition_with_ties_and_nonfinite_scores():
    """Rank i = (scores below i) + (other scores tied with i) / 2, non-finite scores
    all tied below every finite one; scaled to [-0.5, 0.5]; exact (bit for bit)."""
    rng = np.random.default_rng(5)
    for trial in range(300):
        n = int(rng.integers(2, 40))
        values = (rng.integers(-3, 4, n).astype(float) if trial % 2
                  else rng.normal(size=n))
        mark = rng.random(n)
        values[mark < 0.1] = math.nan
        values[(mark >= 0.1) & (mark < 0.15)] = math.inf
        values[(mark >= 0.15) & (mark < 0.2)] = -math.inf
        keyed = np.where(np.isfinite(values), values, -math.inf)
        expected = [(np.sum(keyed < v) + (np.sum(keyed == v) - 1) / 2) / (n - 1) - 0.5
                    for v in keyed]
        assert centered_ranks(values.tolist()).tolist() == expected


def test_openai_es_steps_up_a_linear_slope():
    w = np.array([1.0, -2.0, 3.0])
    strategy = OpenAIES(population=400, sigma=0.1, learning_rate=0.01, weight_decay=0.0)
    state = strategy.init(np.zeros(3), 0.0, seed=0)
    candidates = strategy.ask(state, 0)
    scores = [float(w @ (c.sign * c.sigma * cand.noise(0, 0, c.key, 3))) for c in candidates]
    new = strategy.tell(state, 0, candidates, scores, None)
    # Adam's first step moves each coordinate by the rate along the gradient's sign
    assert np.allclose(new.center, 0.01 * np.sign(w))
    assert new.step == 1 and np.all(new.v > 0)


def test_openai_es_weight_decay_alone_shrinks_the_center():
    strategy = OpenAIES(population=4, sigma=0.1, learning_rate=0.1, weight_decay=0.5)
    state = strategy.init(np.array([1.0, -1.0]), 0.0, seed=0)
    new = strategy.tell(state, 0, strategy.ask(state, 0), [1.0] * 4, None)
    assert np.all(np.abs(new.center) < 1.0)


# ------------------------------------------------------------------ cma-es
def test_cma_es_leaves_the_callers_rng_alone():
    strategy = CMAES(sigma=0.5)
    np.random.seed(123)
    expected = np.random.random(3)
    np.random.seed(123)
    state = strategy.init(np.zeros(5), 0.0, seed=0)
    candidates = strategy.ask(state, 0)
    strategy.tell(state, 0, candidates, [float(i) for i in range(len(candidates))], None)
    assert np.array_equal(np.random.random(3), expected)
    assert len(candidates) == 4 + int(3 * math.log(5))


def test_cma_es_refuses_candidates_it_did_not_ask_for():
    strategy = CMAES(population=4, sigma=0.5)
    state = strategy.init(np.zeros(3), 0.0, seed=0)
    others = strategy.ask(state, 1)
    with pytest.raises(ValueError, match="not the ones"):
        strategy.tell(state, 0, others, [0.0] * 4, None)


def test_cma_es_tell_after_ask_equals_a_tell_from_the_state_alone():
    # tell() takes over what ask() drew for the same state and generation; it must be
    # what a tell() with no ask before it computes, and leave the told state reusable
    strategy = CMAES(population=6, sigma=0.5)
    state = strategy.init(np.zeros(4), 0.0, seed=0)
    candidates = strategy.ask(state, 0)
    scores = [-float((c.vector ** 2).sum()) for c in candidates]
    handed_over = strategy.tell(state, 0, candidates, scores, None)
    fresh = CMAES(population=6, sigma=0.5).tell(state, 0, candidates, scores, None)
    again = strategy.tell(state, 0, candidates, scores, None)  # no ask before it
    # (the pickled pycma objects differ in their wall-clock timers only)
    nxt = CMAES(population=6, sigma=0.5).ask(handed_over, 1)
    for other in (fresh, again):
        assert np.array_equal(other.center, handed_over.center)
        assert other.sigma == handed_over.sigma
        assert _same_candidates(CMAES(population=6, sigma=0.5).ask(other, 1), nxt)
    strategy.ask(state, 0)  # an ask of another state in between: tell starts afresh
    strategy.ask(handed_over, 1)
    other = strategy.tell(state, 0, candidates, scores, None)
    assert _same_candidates(CMAES(population=6, sigma=0.5).ask(other, 1), nxt)
    moved = strategy.ask(state, 0)  # candidates changed after ask are not the ones asked
    moved[0].vector[0] += 1.0
    with pytest.raises(ValueError, match="not the ones"):
        strategy.tell(state, 0, moved, scores, None)
    assert "_asked" not in pickle.loads(pickle.dumps(strategy)).__dict__


def test_cma_es_reused_states_replay_what_they_were():
    # a told state's pycma object is live and taken by the next ask; asking (or telling)
    # that state again rebuilds it, also past the tells where it is pickled
    strategy = CMAES(population=4, sigma=0.5)
    states = [strategy.init(np.zeros(3), 0.0, seed=2)]
    for generation in range(70):
        candidates = strategy.ask(states[-1], generation)
        states.append(strategy.tell(states[-1], generation, candidates,
                                    [-float((c.vector ** 2).sum()) for c in candidates], None))
    asked = [strategy.ask(states[g], g) for g in range(70)]
    for g in (3, 63, 64, 65, 69):
        assert _same_candidates(strategy.ask(states[g], g), asked[g])
        again = pickle.loads(pickle.dumps(states[g]))
        assert _same_candidates(strategy.ask(again, g), asked[g])
        scores = [-float((c.vector ** 2).sum()) for c in asked[g]]
        told = strategy.tell(states[g], g, asked[g], scores, None)
        assert np.array_equal(told.center, states[g + 1].center)
        assert _same_candidates(strategy.ask(told, g + 1), strategy.ask(states[g + 1], g + 1))


def test_cma_es_tells_pycma_minus_the_score():
    strategy = CMAES(population=8, sigma=0.5)
    state = strategy.init(np.zeros(2), 0.0, seed=0)
    for generation in range(30):  # maximise x0 + x1: the mean must climb
        candidates = strategy.ask(state, generation)
        state = strategy.tell(state, generation, candidates,
                              [float(c.vector.sum()) for c in candidates], None)
    assert state.center.sum() > 5.0


def test_cma_es_on_one_weight_is_refused_at_the_call(tmp_path):
    calls = []
    with pytest.raises(ValueError, match="cma-es needs at least 2 evolved values"):
        es_search.run(Sphere(dim=1), generations=3, strategy="cma-es", n_jobs=1,
                      progress=False, out=tmp_path / "run", callbacks=[calls.append])
    assert not calls and not (tmp_path / "run").exists()  # before any work


def test_cma_es_records_the_population_pycma_chose(tmp_path):
    """config said population None, which the run's spec then rebuilt as the problem's
    population (sphere's 16), not pycma's 4 + floor(3 ln n): its resume was refused."""
    from es_search.spec import RunSpec
    options = dict(strategy="cma-es", n_jobs=1, progress=False, select_tasks=0)
    first = es_search.run(Sphere(dim=10), generations=2, out=tmp_path, **options)
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["strategy"]["population"] == config["spec"]["population"] == \
        len(first.history[0]["scores"]) == 10
    spec = dataclasses.replace(RunSpec.load(tmp_path), generations=3)  # rebuilt, resumed
    resumed = es_search.run(spec, n_jobs=1, progress=False, select_tasks=0, out=tmp_path,
                            resume=True)
    whole = es_search.run(Sphere(dim=10), generations=3, **options)
    assert [r["scores"] for r in resumed.history] == [r["scores"] for r in whole.history]
    mine = CMAES()  # an instance given is left as it was
    assert es_search.run(Sphere(dim=10), generations=1, strategy=mine, n_jobs=1,
                         progress=False).config["strategy"]["population"] == 10
    assert mine.population is None


def test_pgpe_records_the_step_size_and_speed_it_uses():
    """config said step_size None and max_speed None, though ClipUp's defaults for the
    agent's size were what the run used."""
    result = es_search.run(Sphere(dim=9), generations=2, strategy="pgpe", sigma=0.2,
                           n_jobs=1, progress=False, select_tasks=0)
    recorded = result.config["strategy"]
    assert recorded["max_speed"] == pytest.approx(0.2 * 3 / 15)  # sigma sqrt(n) / 15
    assert recorded["step_size"] == pytest.approx(recorded["max_speed"] / 2)
    state = PGPE(sigma=0.2).init(np.zeros(9), 0.0, seed=0)
    assert (state.max_speed, state.step_size) == (recorded["max_speed"], recorded["step_size"])
    assert PGPE(step_size=0.3).sized(9).max_speed == 0.6  # EvoTorch's rule when given


def test_cma_es_all_non_finite_generation_keeps_the_state():
    strategy = CMAES(population=4, sigma=0.5)
    state = strategy.init(np.zeros(3), 0.0, seed=0)
    candidates = strategy.ask(state, 0)
    assert strategy.tell(state, 0, candidates, [math.nan] * 4, None) is state
    told = strategy.tell(state, 0, candidates, [1.0] * 4, None)  # its pycma object live
    asked = strategy.ask(told, 1)
    kept = strategy.tell(told, 1, asked, [math.nan] * 4, None)
    assert np.array_equal(kept.center, told.center) and kept.sigma == told.sigma
    assert _same_candidates(strategy.ask(kept, 1), asked)


# ------------------------------------------------------------------ ars
def test_ars_population_is_twice_the_directions():
    assert ARS(directions=5).population == 10 and ARS(population=10).directions == 5
    assert ARS().population == 16 and ARS(directions=4).top == 4
    assert ARS(population=8, directions=4, top=2).config()["top"] == 2


def _ars_step(strategy, scores, dim=3, seed=0, generation=0):
    """The V2-t step written out from the paper (Algorithm 2, lines 6-7)."""
    pairs = [(scores[2 * k], scores[2 * k + 1]) for k in range(strategy.directions)]
    order = sorted(range(len(pairs)), key=lambda k: -max(pairs[k]))[:strategy.top]
    sigma_r = np.std([r for k in order for r in pairs[k]])
    return strategy.step_size / (strategy.top * sigma_r) * sum(
        (pairs[k][0] - pairs[k][1]) * cand.noise(seed, generation, k, dim) for k in order)


def test_ars_uses_the_top_directions_and_scales_by_their_return_std():
    strategy = ARS(directions=4, top=2, step_size=0.05, sigma=0.1)
    state = strategy.init(np.ones(3), 0.0, seed=0)
    candidates = strategy.ask(state, 0)
    assert [(c.kind, c.sigma, c.sign, c.key) for c in candidates[:2]] == [
        ("noise", 0.1, 1.0, 0), ("noise", 0.1, -1.0, 0)]
    scores = [1.0, 5.0, 0.0, 0.5, 9.0, 2.0, 3.0, 3.5]  # top 2 by max: keys 2 and 0
    new = strategy.tell(state, 0, candidates, scores, None)
    assert np.allclose(new.center - 1.0, _ars_step(strategy, scores))
    # the returns outside the top directions do not matter
    other = list(scores)
    other[2:4], other[6:8] = [-50.0, 2.0], [4.0, -7.0]
    assert np.allclose(strategy.tell(state, 0, candidates, other, None).center, new.center)
    # the step is invariant to the scale and offset of the returns
    scaled = strategy.tell(state, 0, candidates, [100 * r - 7 for r in scores], None)
    assert np.allclose(scaled.center, new.center)


def test_ars_non_finite_returns_count_as_the_worst():
    strategy = ARS(directions=2, step_size=0.1)
    state = strategy.init(np.zeros(3), 0.0, seed=0)
    candidates = strategy.ask(state, 0)
    new = strategy.tell(state, 0, candidates, [math.nan, 1.0, 3.0, 2.0], None)
    assert np.allclose(new.center, _ars_step(strategy, [1.0, 1.0, 3.0, 2.0]))
    assert strategy.tell(state, 0, candidates, [2.0] * 4, None) is state  # sigma_R = 0


def test_ars_solves_a_sphere():
    result = es_search.run(Sphere(dim=5), generations=120, population=16, sigma=0.1,
                           strategy="ars", strategy_options={"top": 4, "step_size": 0.3},
                           n_jobs=1, progress=False, seed=0)
    assert result.best_score > -0.05, result.best_score  # from -45


# ------------------------------------------------------------------ pgpe
def _pgpe_vectors(state, candidates, generation=0):
    n = state.center.size
    return [state.center + c.sign * state.stdev
            * cand.noise(state.seed, generation, c.key, n) for c in candidates]


def test_noise_candidate_with_a_scale_vector_is_built_with_per_value_stdevs():
    agent = Sphere(dim=3)
    center, scale = np.array([1.0, 2.0, 3.0]), np.array([0.1, 1.0, 10.0])
    for sign in (1.0, -1.0):
        cand.build(agent, center, es_search.Candidate("noise", 0.5, sign, 7, vector=scale),
                   seed=4, generation=2)
        expected = center + sign * scale * cand.noise(4, 2, 7, 3)
        assert np.array_equal(agent.get_flat(), expected)
    # one array shared by a generation's candidates pickles once
    scale = np.ones(10_000)
    shared = [es_search.Candidate("noise", 1.0, s, k, vector=scale)
              for k in range(8) for s in (1.0, -1.0)]
    assert len(pickle.dumps(shared)) < 1.2 * len(pickle.dumps(scale))


def test_pgpe_follows_the_symmetric_gradient_with_clipup():
    strategy = PGPE(population=6, sigma=0.2, step_size=0.05, max_speed=0.08,
                    momentum=0.9, stdev_lr=0.1, stdev_max_change=0.5)
    state = strategy.init(np.array([1.0, -1.0, 0.5]), 0.0, seed=0)
    candidates = strategy.ask(state, 0)
    assert all(c.vector is state.stdev for c in candidates)
    scores = [3.0, 1.0, 0.0, 2.0, 5.0, 4.0]
    new = strategy.tell(state, 0, candidates, scores, None)
    u = centered_ranks(scores)
    eps = [cand.noise(0, 0, k, 3) for k in range(3)]
    sigma = np.full(3, 0.2)
    g_mu = sum((u[2 * k] - u[2 * k + 1]) / 2 * sigma * eps[k] for k in range(3)) / 3
    g_sigma = sum((u[2 * k] + u[2 * k + 1]) / 2 * ((sigma * eps[k]) ** 2 - sigma ** 2)
                  / sigma for k in range(3)) / 3
    assert np.allclose(new.velocity, 0.05 * g_mu / np.linalg.norm(g_mu))
    assert np.allclose(new.center, state.center + new.velocity)
    assert np.allclose(new.stdev, np.clip(sigma + 0.1 * g_sigma, 0.1, 0.3))
    # momentum, then the speed limit
    again = strategy.tell(new, 0, candidates, scores, None)
    assert np.isclose(np.linalg.norm(again.velocity), 0.08)


def test_pgpe_defaults_follow_the_clipup_rules():
    state = PGPE(sigma=0.3).init(np.zeros(100), 0.0, seed=0)
    assert state.max_speed == pytest.approx(0.3 * 10 / 15)  # radius / 15
    assert state.step_size == pytest.approx(state.max_speed / 2)
    state = PGPE(step_size=0.01).init(np.zeros(100), 0.0, seed=0)
    assert state.max_speed == pytest.approx(0.02)  # EvoTorch: twice the step size


def _pgpe_loop(strategy, f, state, generations):
    for generation in range(generations):
        candidates = strategy.ask(state, generation)
        scores = [f(x) for x in _pgpe_vectors(state, candidates, generation=generation)]
        state = strategy.tell(state, generation, candidates, scores, None)
    return state


def test_pgpe_adapts_each_stdev():
    strategy = PGPE(population=20, sigma=1.0, step_size=1e-9)  # the mean barely moves
    start = strategy.init(np.zeros(2), 0.0, seed=0)
    # narrow in a steep direction, keep width in a flat one
    narrow = _pgpe_loop(strategy, lambda x: -(100 * x[0] ** 2 + 0.01 * x[1] ** 2),
                        start, 40)
    assert narrow.stdev[0] < 0.4 and narrow.stdev[1] > 3 * narrow.stdev[0]
    # widen where farther is better
    wide = _pgpe_loop(strategy, lambda x: float(x @ x), start, 10)
    assert np.all(wide.stdev > 1.1) and np.all(wide.stdev <= 1.2 ** 10)


def test_pgpe_solves_a_sphere_and_rebuilds_what_the_workers_built():
    result = es_search.run(Sphere(dim=5), generations=150, population=16, sigma=0.5,
                           strategy="pgpe", strategy_options={"step_size": 0.2},
                           n_jobs=2, progress=False, seed=0)
    assert result.best_score > -0.05, result.best_score  # from -45
    assert result.history[-1]["sigma"] < 0.2  # the stdevs shrank near the optimum
    # the winner rebuilt in this process scores what the worker scored
    assert result.best_agent().score() == result.best_score


# ------------------------------------------------------------------ cma-es restarts
def _restart_run(restarts, generations, **kw):
    # tolfun=1e-2: pycma stops each run after some 30-60 generations on this sphere
    return es_search.run(Sphere(dim=DIM), generations=generations, sigma=0.5,
                         strategy="cma-es", n_jobs=1, seed=1, progress=False,
                         strategy_options={"options": {"tolfun": 1e-2},
                                           "restarts": restarts, "max_restarts": 3}, **kw)


def _populations(history):
    """(population, first generation) of each run, in order."""
    runs = []
    for record in history:
        if not runs or len(record["scores"]) != runs[-1][0]:
            runs.append((len(record["scores"]), record["generation"]))
    return runs


@pytest.mark.parametrize("options, best", [
    ({"typical_x": [5.0] * 3}, [3.0] * 3), ({"scaling_of_variables": [1, 10, 100]}, [3.0] * 3),
    ({"bounds": [-0.5, 0.5]}, [0.5] * 3), ({"fixed_variables": {0: 1.0}}, [1.0, 3.0, 3.0])])
def test_cma_es_centre_is_a_point_of_the_search_space_under_pycma_s_mappings(options, best):
    """The centre was pycma's internal mean: x - typical_x, x / scaling, unbounded, or
    without its fixed variables (a shape error after the start)."""
    from es_search.problems import Function
    result = es_search.run(Function(lambda x: float(((x - 3) ** 2).sum()), np.full(3, 0.2)),
                           strategy="cma-es", generations=60, n_jobs=1, progress=False,
                           sigma=0.3, strategy_options={"options": options})
    center = Function.x_of(result.center_weights)
    inside = np.abs(center) <= options.get("bounds", [0, 5])[1]  # bounds: 0.5 at most
    assert np.allclose(center, best, atol=0.2) and np.all(inside), center
    if "bounds" in options:  # a start outside them: said as the start's, not pycma's alone
        with pytest.raises(ValueError, match=r"pycma cannot start cma-es from the agent's "
                                             r"weights with options=\{'bounds': \[-0.5, 0.5\]"):
            es_search.run(Function(lambda x: 0.0, np.ones(3)), strategy="cma-es", n_jobs=1,
                          generations=1, progress=False, strategy_options={"options": options})


@pytest.mark.parametrize("options", [{"options": {"tolfun": 1e-2}},
                                     {"options": {"maxfevals": 100}}, {"max_restarts": 3}])
def test_cma_es_refuses_stopping_options_without_restarts(options):
    # without restarts pycma's stop() is never consulted: they would do nothing
    with pytest.raises(ValueError, match=r"apply to restarts only .* restarts='ipop'"):
        CMAES(sigma=0.5, **options)
    CMAES(sigma=0.5, restarts="ipop", **options)  # with restarts they are what they say


def test_ipop_doubles_the_population_when_pycma_stops():
    result = _restart_run("ipop", 250)
    populations = [p for p, _ in _populations(result.history)]
    assert populations == [8, 16, 32, 64]  # max_restarts=3, then it keeps going
    assert result.best_score > -1e-2


def test_bipop_interlaces_small_and_large_runs():
    strategy = CMAES(sigma=0.5, options={"tolfun": 1e-2}, restarts="bipop",
                     max_restarts=3)
    state = strategy.init(np.zeros(DIM), -36.0, seed=1)
    runs = []  # (regime, population, sigma) of each run
    for generation in range(400):
        if not runs or state.restarts == len(runs):
            runs.append((state.regime, len(strategy.ask(state, generation)), state.sigma))
        candidates = strategy.ask(state, generation)
        state = strategy.tell(state, generation, candidates,
                              [-float(((c.vector - 3) ** 2).sum()) for c in candidates],
                              None)
    regimes = [regime for regime, _, _ in runs]
    assert regimes[:2] == ["first", "large"] and "small" in regimes
    assert regimes.count("large") == 3  # max_restarts counts the large runs
    large = [p for regime, p, _ in runs if regime == "large"]
    assert large == [16, 32, 64]
    small = [(p, sigma) for regime, p, sigma in runs if regime == "small"]
    assert all(8 <= p <= 64 and 0.5 * 0.01 <= sigma <= 0.5 for p, sigma in small)
    # the small runs' budget stays close to the large runs' (Hansen 2009)
    assert state.small_evals <= state.large_evals + 64 * 400


def test_restarts_resume_mid_run_as_if_uninterrupted(tmp_path):
    full = _restart_run("bipop", 160)
    starts = [g for _, g in _populations(full.history)]
    assert len(starts) >= 3, starts  # the cut below falls after a restart
    cut = (starts[1] + starts[2]) // 2
    _restart_run("bipop", cut, out=tmp_path)
    resumed = _restart_run("bipop", 160, out=tmp_path, resume=True)
    assert [r["scores"] for r in resumed.history] == [r["scores"] for r in full.history]
    assert [r["sigma"] for r in resumed.history] == [r["sigma"] for r in full.history]
    assert resumed.best_score == full.best_score


def test_restart_state_pickles_and_same_seed_same_restarts():
    strategy = CMAES(sigma=0.5, options={"tolflatfitness": 1}, restarts="bipop")
    states = []
    for _ in range(2):
        state = strategy.init(np.zeros(3), 0.0, seed=4)
        for generation in range(12):  # flat scores: pycma stops after every generation
            state = strategy.tell(state, generation, strategy.ask(state, generation),
                                  [1.0] * len(strategy.ask(state, generation)), None)
            state = pickle.loads(pickle.dumps(state))
        states.append(state)
    a, b = states
    assert a.restarts >= 5 and a.restarts == b.restarts and a.regime == b.regime
    assert _same_candidates(strategy.ask(a, 12), strategy.ask(b, 12))


@pytest.mark.slow
def test_the_cma_overhead_benchmark_runs_and_prints_its_table():
    import os
    import subprocess
    import sys
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    done = subprocess.run([sys.executable, os.path.join(root, "benchmarks", "cma_overhead.py"),
                           "--weights", "10", "--generations", "2", "--rounds", "2"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    row = done.stdout.splitlines()[-1].split("|")
    assert row[1].strip() == "10" and float(row[2]) > 0 and float(row[3]) > 0
    mine, pycma, ratio = float(row[2]), float(row[3]), float(row[4])
    assert (mine - 0.05) / (pycma + 0.05) - 0.005 <= ratio <= \
        (mine + 0.05) / max(pycma - 0.05, 1e-9) + 0.005  # (the times are shown rounded)
