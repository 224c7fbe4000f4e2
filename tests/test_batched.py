"""Agent.score_batch helpers and the batched built-ins (CartPole, Pendulum, digits)."""
from __future__ import annotations

import re

import numpy as np
import pytest
import torch

import es_search
from es_search import batched
from es_search.seeding import task_seed


class Line(es_search.Agent):
    """A linear model on fixed data, with score_batch only."""

    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(3, 1)

    def forward(self, x):
        return self.linear(x).squeeze(-1)

    def score_batch(self, params, seeds):
        x = torch.linspace(-1, 1, 12).reshape(4, 3)
        pred = batched.vmap_call(self, params, x)
        return -(pred ** 2).mean(dim=1)


def _group(agent, n, sigma=0.5, seed=0):
    weights = []
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        for _ in range(n):
            b = agent.clone()
            b.jitter_weights(sigma)
            weights.append(b.get_weights())
    return weights


def _alone(agent, weights, seed):
    b = agent.clone()
    b.set_weights(weights)
    b.task_seed = seed
    return b.score()


# ------------------------------------------------------------------ helpers
def stack_weights(weights):
    """Weight dicts -> one dict, candidate ``i`` in row ``i`` (a score_batch's params)."""
    return {name: torch.stack([torch.as_tensor(w[name]) for w in weights])
            for name in weights[0]}


def test_vmap_call_is_the_module_per_row():
    agent = Line()
    weights = _group(agent, 4)
    x = torch.randn(5, 3)
    out = batched.vmap_call(agent, stack_weights(weights), x)
    for i, w in enumerate(weights):
        b = agent.clone()
        b.set_weights(w)
        assert torch.allclose(out[i], b(x), atol=1e-6)
    with pytest.raises(KeyError, match="no parameter or buffer named 'nope'"):
        batched.vmap_call(agent, {"nope": torch.zeros(2, 3)}, x)


def test_candidate_streams_depend_on_their_own_seed_only():
    a = batched.candidate_rngs([5, 6, 7], 1)
    b = batched.candidate_rngs([9, 6], 1)
    assert a[1].random() == b[1].random()
    assert batched.candidate_rngs([5], 1)[0].random() != batched.candidate_rngs([5], 2)[0].random()
    for bad, error in ((1.5, TypeError), (-1, ValueError), (True, TypeError),
                       ("3", TypeError)):  # 1.5 would have been 1's stream
        with pytest.raises(error, match=r"seeds\[1\] is"):
            batched.candidate_rngs([0, bad])
    assert batched.candidate_rngs(np.array([5, 6], dtype=np.uint64))[1].random() == \
        batched.candidate_rngs([6])[0].random()


@pytest.mark.parametrize("seeds", [[task_seed(0, 3, i) for i in range(40)], list(range(8)),
                                   [2 ** 64 - 1, 2 ** 32, 2 ** 32 - 1, 0, 5, 7, 2 ** 63, 1]])
@pytest.mark.parametrize("key", [(1,), (), (0,), (2 ** 40, 3), (1, 2, 3, 4, 5)])
def test_candidate_streams_are_seed_sequence_streams(seeds, key):
    # groups of 8 or more take a faster route to the same streams
    streams = batched.candidate_rngs(seeds, *key)
    for rng, s in zip(streams, seeds):
        ref = np.random.default_rng(np.random.SeedSequence(s, spawn_key=key))
        assert np.array_equal(rng.random(5), ref.random(5))
    ref = np.random.default_rng(np.random.SeedSequence(seeds[1], spawn_key=key))
    assert np.array_equal(streams[1].spawn(2)[1].random(3), ref.spawn(2)[1].random(3))


def test_score_batch_may_return_a_column_but_not_several_values_per_candidate():
    agent = Line()
    for column in (torch.tensor([[1.5], [-2.0]]), np.array([[1.5], [-2.0]])):
        assert batched.as_scores(column, 2, agent) == [1.5, -2.0]
    assert batched.as_scores(torch.tensor(0.5), 1, agent) == [0.5]
    for wrong, n in ((torch.zeros(1, 3), 1), (np.zeros((2, 2)), 2), (torch.zeros(3, 1), 2)):
        message = (f"Line.score_batch() returned an array of shape {tuple(wrong.shape)} "
                   f"for {n} candidates; it must return one real number per candidate, "
                   f"in order: shape ({n},)")
        with pytest.raises(TypeError, match=re.escape(message)):
            batched.as_scores(wrong, n, agent)


def test_score_defaults_to_a_group_of_one_and_scores_are_checked():
    agent = Line()
    w = _group(agent, 2)
    assert _alone(agent, w[0], 3) == pytest.approx(
        float(agent.score_batch(stack_weights(w), [3, 4])[0]))
    assert batched.has_score_batch(agent) and batched.group_size(agent) == 32
    with pytest.raises(TypeError, match="returned 1 scores for 2 candidates"):
        batched.as_scores([1.0], 2, agent)
    with pytest.raises(TypeError, match=r"Line\.score_batch\(\) returned str 'x'; it must "
                                         r"return a real number"):
        batched.as_scores(["x"], 1, agent)
    agent.score_batch_size = -1
    with pytest.raises(ValueError, match="score_batch_size must be an integer >= 0"):
        batched.group_size(agent)
    with pytest.raises(NotImplementedError, match="must implement score"):
        es_search.Agent().score()
    assert batched.group_size(es_search.Agent()) == 0


# ------------------------------------------------------------------ control problems
gym = pytest.importorskip("gymnasium")
from es_search.problems.batched_control import (CartPole, Pendulum, PendulumBatch,  # noqa: E402
                                                cartpole_step)


@pytest.mark.parametrize("cls, kwargs", [(CartPole, {"max_steps": 80}),
                                         (CartPole, {"hidden": 4, "episodes": 2}),
                                         (Pendulum, {"max_steps": 50})])
def test_a_row_of_a_group_is_the_candidate_scored_alone(cls, kwargs):
    agent = cls(**kwargs)
    weights = _group(agent, 7)
    seeds = [task_seed(3, 1, i) for i in range(7)]
    group = agent.score_batch(stack_weights(weights), seeds)
    alone = [_alone(agent, w, s) for w, s in zip(weights, seeds)]
    assert group.tolist() == alone  # bit for bit
    order = [4, 0, 6]  # other neighbours, other order: the same scores
    other = agent.score_batch(stack_weights([weights[i] for i in order]),
                              [seeds[i] for i in order])
    assert other.tolist() == [alone[i] for i in order]
    assert len(set(alone)) > 1


def test_cartpole_starts_from_the_candidates_own_stream():
    agent = CartPole(episodes=2, max_steps=1)
    seen = []
    agent.forward_numpy = lambda layers, o: seen.append(o) or np.zeros((len(o), 2))
    agent.score_batch(stack_weights([agent.get_weights()] * 2), [1234, 99])
    rng = batched.candidate_rngs([99], 1)[0]
    expected = rng.uniform(low=-0.05, high=0.05, size=(2, 4)).astype(np.float32)
    assert np.array_equal(seen[0][2:], expected.astype(np.float64))
    greedy = CartPole(greedy=True, episodes=1)
    w = greedy.get_weights()
    w["layers.0.weight"] = torch.tensor([[0.0, 0, -20, -20], [0, 0, 20, 20]])
    assert _alone(greedy, w, 5) > 100  # a balancing controller balances


def test_a_row_is_its_candidate_alone_in_a_wide_group():
    agent = CartPole(max_steps=30)
    weights = _group(agent, 40, sigma=1.0)
    seeds = [task_seed(0, 0, i) for i in range(40)]
    group = agent.score_batch(stack_weights(weights), seeds)
    assert group.tolist() == [_alone(agent, weights[i], seeds[i]) for i in range(40)]


def test_iterations_count_the_steps_of_the_whole_environment():
    agent = CartPole(episodes=1)  # a CartPole return is its episode's length
    weights = _group(agent, 12, sigma=1.0)
    seeds = [task_seed(0, 0, i) for i in range(12)]
    lengths = agent.score_batch(stack_weights(weights), seeds)
    assert agent.iterations == max(lengths) and agent.steps == sum(lengths)
    assert len(set(lengths)) > 1  # uneven episodes: the group runs to the longest
    tested = agent.returns(episodes=20)  # its own episodes leave the counts alone
    assert max(tested) != max(lengths)
    assert agent.iterations == max(lengths) and agent.steps == sum(lengths)
    cut = CartPole(episodes=1, max_steps=5)
    cut.score_batch(stack_weights(weights), seeds)
    assert cut.iterations == 5
    pendulum = Pendulum()
    pendulum.score_batch(stack_weights(_group(pendulum, 3)), [1, 2, 3])
    assert pendulum.iterations == 200


def test_cartpole_step_is_gymnasiums_vector_step_bit_for_bit():
    rng = np.random.default_rng(0)
    env = gym.make_vec("CartPole-v1", num_envs=64, vectorization_mode="vector_entry_point")
    env.reset(seed=0)
    raw = env.unwrapped
    state = rng.uniform(-0.2, 0.2, size=(4, 64)) * np.array([[10.0], [10.0], [1.0], [10.0]])
    ended = 0
    for _ in range(40):
        raw.state, raw.steps[:], raw.prev_done[:] = state.copy(), 0, False
        action = rng.integers(0, 2, 64)
        _, _, terminated, _, _ = env.step(action)
        state, ours = cartpole_step(state, action.astype(np.int8))
        assert np.array_equal(state, raw.state) and np.array_equal(ours, terminated)
        ended += ours.sum()
    assert 0 < ended < 40 * 64  # both outcomes compared


def test_pendulum_batch_matches_gymnasium_for_the_same_starts_and_actions():
    seeds = [0, 17, 123456]
    rng = np.random.default_rng(0)
    actions = rng.uniform(-2.5, 2.5, size=(200, len(seeds)))
    starts = np.stack([np.random.default_rng(s).uniform(-PendulumBatch.high, PendulumBatch.high)
                       for s in seeds], axis=1)  # where gymnasium's reset(seed=s) starts
    seen, given = [], iter(actions)
    ours = PendulumBatch(starts).run(lambda obs: seen.append(obs.copy()) or next(given), 200)
    for j, seed in enumerate(seeds):
        env = gym.make("Pendulum-v1")
        obs, _ = env.reset(seed=seed)
        total, steps = 0.0, 0
        while True:
            assert np.array_equal(seen[steps][j], obs)  # gymnasium's float32 observation
            obs, reward, terminated, truncated, _ = env.step(actions[steps, j:j + 1])
            total += float(reward)
            steps += 1
            if terminated or truncated:
                break
        assert steps == PendulumBatch.max_episode_steps
        assert abs(total - ours[j]) <= 1e-6


def test_pendulum_policy_return_matches_gymnasium():
    agent = Pendulum()
    w = _group(agent, 1, sigma=0.3)[0]
    seed = task_seed(0, 2, 5)
    ours = _alone(agent, w, seed)
    layers = agent.stacked_layers(stack_weights([w]))
    start = batched.candidate_rngs([seed], 1)[0].uniform(low=-PendulumBatch.high,
                                                         high=PendulumBatch.high, size=(1, 2))
    env = gym.make("Pendulum-v1")
    env.reset(seed=0)
    env.unwrapped.state = start[0].copy()
    obs = env.unwrapped._get_obs()
    total = 0.0
    for _ in range(200):
        act = agent.actions(agent.forward_numpy(layers, obs.astype(np.float64)[None]), None)
        obs, reward, *_ = env.step(act)
        total += float(reward)
    assert abs(total - ours) <= 1e-6


def _gymnasium_returns(agent, seeds):
    """Whole gymnasium episodes of ``agent``'s policy: ``reset(seed=s)``, actions
    sampled from the uniforms of ``SeedSequence(s, spawn_key=(1,))`` (unless greedy)."""
    env = gym.make(f"{type(agent).__name__}-v1")
    layers = agent.stacked_layers({n: p.unsqueeze(0) for n, p in agent.get_weights().items()})
    returns = []
    for s in seeds:
        obs, _ = env.reset(seed=s)
        uniforms = np.random.default_rng(np.random.SeedSequence(s, spawn_key=(1,))).random(1000)
        total, t, done = 0.0, 0, False
        while not done:
            logits = agent.forward_numpy(layers, obs.astype(np.float64)[None])
            sampled = agent.discrete and not agent.greedy
            act = agent.actions(logits, uniforms[t:t + 1] if sampled else None)
            obs, reward, terminated, truncated, _ = env.step(int(act[0]) if agent.discrete
                                                             else act.astype(np.float64))
            total, t, done = total + float(reward), t + 1, terminated or truncated
        returns.append(total)
    return np.array(returns)


@pytest.mark.parametrize("cls, kwargs", [(CartPole, {"max_steps": 20}),
                                         (CartPole, {"greedy": True}), (Pendulum, {})])
def test_test_returns_are_whole_gymnasium_episodes(cls, kwargs):
    agent = cls(**kwargs)
    with torch.no_grad():  # a policy that neither falls at once nor balances
        for name, p in agent.evolved_parameters():
            p.copy_(torch.randn(p.shape, generator=torch.Generator().manual_seed(3)) * 0.3)
    ours = agent.returns(6, seed=40)
    assert np.array_equal(ours, _gymnasium_returns(agent, range(40, 46)))
    assert len(set(ours.tolist())) > 1  # six different episodes, max_steps ignored
    assert np.array_equal(agent.returns(2, seed=42), ours[2:4])  # per episode, not per call
    figures = agent.test_scores()
    test = agent.returns(agent.test_episodes, seed=1_000_000)
    assert figures == {"test_return_mean": test.mean(), "test_return_std": test.std(),
                       "test_episodes": agent.test_episodes}


def test_bad_settings_fail_at_construction():
    with pytest.raises(ValueError, match="hidden must be"):
        CartPole(hidden=-1)
    with pytest.raises(ValueError, match="score_batch_size must be"):
        Pendulum(score_batch_size=-2)
    with pytest.raises(ValueError, match="episodes must be"):
        CartPole(episodes=0)


# ------------------------------------------------------------------ digits
def test_digits_scores_log_likelihood_and_held_out_accuracy():
    pytest.importorskip("sklearn")
    from es_search.problems.digits import Digits, load_split
    x_train, _ = load_split("train")
    x_test, _ = load_split("test")
    assert x_train.shape == (1347, 64) and x_test.shape == (450, 64)
    agent = Digits(hidden=8)
    weights = _group(agent, 3, sigma=0.1)
    seeds = [1, 2, 3]
    group = agent.score_batch(stack_weights(weights), seeds)
    alone = [_alone(agent, w, s) for w, s in zip(weights, seeds)]
    assert np.allclose(group, alone, rtol=0, atol=1e-9)
    assert all(-10 < s < 0 for s in group)  # mean log-probabilities
    test = Digits(split="test", hidden=8)
    test.set_weights(weights[0])
    accuracy = test.score()
    assert 0 <= accuracy <= 1 and accuracy == pytest.approx(test.accuracy("test"))
    assert test.test_scores() == {"test_accuracy": test.accuracy("test"),
                                  "train_accuracy": test.accuracy("train")}
    assert test.accuracy("train") != test.accuracy("test")
    with pytest.raises(ValueError, match="split must be one of"):
        Digits(split="valid")
    with pytest.raises(ValueError, match="metric must be one of"):
        Digits(metric="f1")


def test_digits_learns_within_a_few_generations():
    pytest.importorskip("sklearn")
    from es_search.problems import load_problem
    Digits = load_problem("digits")
    result = es_search.run(Digits(hidden=0), generations=30, population=16, sigma=0.05,
                           strategy="openai-es", strategy_options={"learning_rate": 0.05},
                           n_jobs=1, progress=False)
    test = Digits(split="test", hidden=0)
    test.set_weights(result.best_weights)
    assert test.score() > 0.5  # chance is 0.1; the starting weights score about that
    start = Digits(split="test", hidden=0)
    assert start.score() < 0.3


def test_committed_batching_table_is_rendered_from_its_json(tmp_path):
    import json
    import os
    import runpy
    import shutil
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    results = os.path.join(root, "benchmarks", "results")
    shutil.copy(os.path.join(results, "batching.json"), tmp_path / "batching.json")
    script = runpy.run_path(os.path.join(root, "benchmarks", "batching.py"), run_name="x")
    assert script["main"](["--render", "--out", str(tmp_path)]) == 0
    with open(os.path.join(results, "batching.md")) as f:
        assert (tmp_path / "batching.md").read_text() == f.read()
    with open(os.path.join(results, "batching.json")) as f:
        assert {r["population"] for r in json.load(f)["rows"]} == {16, 64, 256}


def test_readme_batching_tables_are_rendered_from_the_committed_run(tmp_path):
    """README.md's and benchmarks/README.md's batching tables are what
    ``benchmarks/batching.py --render --readme`` writes from the committed run; a run that
    misses a target is shown missing it."""
    import json
    import os
    import runpy
    import shutil
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    results = os.path.join(root, "benchmarks", "results")
    for name in ("README.md", os.path.join("benchmarks", "README.md")):
        shutil.copy(os.path.join(root, name), tmp_path / os.path.basename(name).replace(
            "README", "top" if name == "README.md" else "bench"))
    shutil.copy(os.path.join(results, "batching.json"), tmp_path / "batching.json")
    script = runpy.run_path(os.path.join(root, "benchmarks", "batching.py"), run_name="x")
    assert script["main"](["--render", "--out", str(tmp_path), "--readme",
                           str(tmp_path / "top.md"), "--readme", str(tmp_path / "bench.md")]) == 0
    assert (tmp_path / "top.md").read_text() == open(os.path.join(root, "README.md")).read()
    assert (tmp_path / "bench.md").read_text() == open(
        os.path.join(root, "benchmarks", "README.md")).read()

    with open(os.path.join(results, "batching.json")) as f:
        run = json.load(f)
    for s in run["speedups"]:
        s["time_vs_alone"] = 30.0 if s["problem"] == "pendulum" else 10.0
    table = script["tables"](run)["batching-table"]
    pendulum = next(line for line in table.splitlines() if line.startswith("| Pendulum |"))
    assert pendulum == "| Pendulum | 30.0x (population 256: 30.0x) | met |"
    assert "| CartPole, balancing policy | 10.0x | NOT met |" in table


@pytest.mark.slow
def test_persistent_loops_benchmark_scores_as_the_engine_does():
    """benchmarks/persistent_loops.py: its forked loops give loky's scores (it raises
    otherwise) and it prints the three paths."""
    import os
    import subprocess
    import sys
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    done = subprocess.run([sys.executable, os.path.join(root, "benchmarks",
                                                        "persistent_loops.py"),
                           "--rounds", "1"], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": root})
    assert done.returncode == 0, done.stderr
    assert all(f"  {path}" in done.stdout for path in ("loops", "loky", "alone"))
    idle = subprocess.run([sys.executable, os.path.join(root, "benchmarks",
                                                        "persistent_loops.py"),
                           "--rounds", "1", "--idle", "0", "2"], capture_output=True,
                          text=True, timeout=300, env={**os.environ, "PYTHONPATH": root})
    assert idle.returncode == 0, idle.stderr
    lines = [line for line in idle.stdout.splitlines() if "workers idle" in line]
    assert [line.split("ms")[0].split()[-1] for line in lines] == ["0.0", "2.0"]
    assert all("the slowest worker's group" in line for line in lines)


def test_batching_benchmark_whole_runs_check_the_two_paths_agree(monkeypatch):
    """The batching benchmark's whole runs (tiny here): both paths run, their
    histories are compared (a difference raises), the summary divides alone by batched."""
    from benchmarks.harness import batching as bench
    settings = bench.Settings.tiny()
    rows = bench.whole_runs(settings, log=lambda line: None)
    assert [r["path"] for r in rows] == ["batched", "alone"]
    (summary,) = bench.run_summary(rows)
    assert summary["generation_x"] == pytest.approx(
        rows[1]["generation_seconds"] / rows[0]["generation_seconds"])
    real = bench.make_agent
    monkeypatch.setattr(bench, "make_agent", lambda problem, path, group: real(
        problem, path, group) if path == "batched" else Pendulum(  # another policy alone
            hidden=4, score_batch_size=0))
    with pytest.raises(RuntimeError, match="differs"):
        bench.whole_runs(settings, log=lambda line: None)


def test_batching_benchmark_writes_its_report(tmp_path):
    from benchmarks.harness import batching as bench
    bench.write(bench.benchmark(bench.Settings.tiny(), quick=True), str(tmp_path))
    text = (tmp_path / "batching.md").read_text()
    assert text.startswith("# Batched scoring (`python benchmarks/batching.py --quick`)")
    import json
    result = json.loads((tmp_path / "batching.json").read_text())
    assert {(r["problem"], r["stage"], r["path"]) for r in result["rows"]} == {
        (p, s, path) for p, s in (("cartpole", "start"), ("cartpole", "balanced"),
                                  ("pendulum", "start"))
        for path in ("batched", "alone", "gym")}
    assert [r["path"] for r in result["runs"]] == ["batched", "alone"]
