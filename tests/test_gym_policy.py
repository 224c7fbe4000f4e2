"""GymPolicy for any gymnasium id: construction errors, gym:ID, actions, running
statistics (task_report / merge_reports), common random numbers, reward_offset."""
from __future__ import annotations

import re
import sys
import warnings

import numpy as np
import pytest
import torch

import es_search
from es_search.cli import main
from es_search.moments import Moments
from es_search.problems import BUILTINS, GymPolicy, ProblemError, load_problem
from es_search.problems.gym_env import _mujoco_warnings_to_python, make_env

gym = pytest.importorskip("gymnasium")


class _Asymmetric(gym.Env):
    """A 3-d random walk with an asymmetric Box action space (for the squashing test)."""

    observation_space = gym.spaces.Box(-np.inf, np.inf, (3,), np.float64)
    action_space = gym.spaces.Box(np.array([0.0, -3.0]), np.array([1.0, -1.0]), dtype=np.float64)

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self._t = 0
        return self.np_random.normal(size=3) * [1.0, 10.0, 0.1], {}

    def step(self, action):
        self._t += 1
        obs = self.np_random.normal(size=3) * [1.0, 10.0, 0.1] + [5.0, 0.0, -2.0]
        return obs, float(np.sum(action)), False, self._t >= 25, {}


gym.register("EsSearchTest/Asymmetric-v0", entry_point=_Asymmetric)


class _Sequences(gym.Env):
    """Observations of varying length: no fixed-size vector."""

    observation_space = gym.spaces.Sequence(gym.spaces.Discrete(3))
    action_space = gym.spaces.Discrete(2)


gym.register("EsSearchTest/Sequences-v0", entry_point=_Sequences)


class _ShiftedActions(gym.Env):
    """Actions numbered -1, 0, +1 (Discrete(3, start=-1)); the reward is the action
    taken, and an action outside the space raises."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float64)
    action_space = gym.spaces.Discrete(3, start=-1)

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self._t = 0
        return np.zeros(2), {}

    def step(self, action):
        if not self.action_space.contains(action):
            raise ValueError(f"invalid action {action!r}")
        self._t += 1
        return np.zeros(2), float(action), False, False, {}


gym.register("EsSearchTest/Shifted-v0", entry_point=_ShiftedActions,
             max_episode_steps=10)


class Recording(GymPolicy):
    """A GymPolicy that records every raw observation it acts on."""

    def actor(self, layers, rng=None):
        act = super().actor(layers, rng)

        def recorded(obs):
            self.seen.append(obs.copy())
            return act(obs)
        return recorded


# ----------------------------------------------------------------------------- construction
def test_any_registered_id_builds_directly_and_through_gym_prefix():
    agent = GymPolicy("MountainCarContinuous-v0", hidden=(4, 3))
    assert (agent.obs_dim, agent.act_dim, agent.discrete) == (2, 1, False)
    assert agent.num_evolved() == 2 * 4 + 4 + 4 * 3 + 3 + 3 * 1 + 1
    cls = load_problem("gym:CartPole-v1")
    assert issubclass(cls, GymPolicy) and cls.env_id == "CartPole-v1"
    built = cls(hidden=8)
    assert built.discrete and built.num_evolved() == 4 * 8 + 8 + 8 * 2 + 2
    assert GymPolicy("CartPole-v1").num_evolved() == 4 * 2 + 2  # linear by default


@pytest.mark.parametrize("env_id,message", [("NoSuchTask-v0", "unknown gymnasium"),
                                            ("CartPole-v99", "unknown gymnasium"),
                                            ("", "env_id must be a gymnasium environment id")])
def test_unknown_id_fails_at_construction(env_id, message):
    with pytest.raises(ValueError, match=message):
        GymPolicy(env_id)


def test_missing_extra_names_the_extra(monkeypatch):
    def missing(*args, **kwargs):
        raise gym.error.DependencyNotInstalled("Box2D is not installed")
    monkeypatch.setattr(gym, "make", missing)
    with pytest.raises(ImportError, match=r"\[box2d\]"):
        GymPolicy("LunarLanderContinuous-v3")
    with pytest.raises(ImportError, match=r"\[mujoco\]"):
        load_problem("hopper")()


@pytest.mark.parametrize("env_id, extra", [("Hopper-v5", "mujoco"), ("LunarLander-v3", "box2d"),
                                           ("BipedalWalkerHardcore-v3", "box2d"),
                                           ("CartPole-v1", "gym"), ("Acrobot-v1", "gym")])
def test_without_gymnasium_the_message_names_the_tasks_extra(monkeypatch, env_id, extra):
    monkeypatch.setitem(sys.modules, "gymnasium", None)  # as if not installed
    from es_search.extras import install_command
    with pytest.raises(ImportError, match=rf"^gymnasium is not installed; install it with "
                                          rf"{re.escape(install_command(extra))}$"):
        make_env(env_id)


def test_a_mujoco_env_leaves_no_log_file_and_prints_nothing(tmp_path, monkeypatch, capfd):
    """MuJoCo 4.0 warns about gymnasium's half_cheetah.xml (settotalmass is deprecated): by
    default it prints a WARNING line and writes MUJOCO_LOG.TXT into the current folder."""
    mujoco = pytest.importorskip("mujoco")
    monkeypatch.chdir(tmp_path)
    before = mujoco.get_mju_user_warning()
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        make_env("HalfCheetah-v5").close()
        make_env("Hopper-v5").close()
    assert list(tmp_path.iterdir()) == []
    assert "WARNING" not in capfd.readouterr().out
    assert mujoco.get_mju_user_warning() is before


def test_mujoco_warnings_become_python_warnings():
    mujoco = pytest.importorskip("mujoco")
    xml = ('<mujoco><compiler settotalmass="2"/><worldbody><body><freejoint/>'
           '<geom size=".1"/></body></worldbody></mujoco>')
    with pytest.warns(Warning) as caught:
        try:
            with _mujoco_warnings_to_python("gymnasium.envs.mujoco:X"):
                mujoco.MjModel.from_xml_string(xml)
        except ValueError:
            pytest.skip("this MuJoCo refuses settotalmass instead of warning")
        warnings.warn("sentinel", UserWarning)     # pytest.warns needs one when MuJoCo is silent
    mujoco_warnings = [w for w in caught if str(w.message).startswith("MuJoCo: ")]
    if not mujoco_warnings:
        pytest.skip("this MuJoCo compiles settotalmass without a warning")
    assert [w.category for w in mujoco_warnings] == [DeprecationWarning]
    assert "settotalmass" in str(mujoco_warnings[0].message)


@pytest.mark.parametrize("kwargs,error", [
    ({"hidden": -1}, ValueError), ({"hidden": (4, 0)}, ValueError),
    ({"hidden": "64"}, TypeError), ({"hidden": 2.5}, TypeError),
    ({"normalize": "sometimes"}, ValueError), ({"normalize": 1}, TypeError),
    ({"reward_offset": float("nan")}, ValueError), ({"reward_offset": "x"}, ValueError),
    ({"episodes": 0}, ValueError), ({"max_steps": 0}, ValueError),
    ({"reward_clip": 0}, ValueError), ({"reward_clip": -1.0}, ValueError),
    ({"reward_clip": float("inf")}, ValueError), ({"reward_clip": True}, ValueError)])
def test_bad_options_fail_at_construction(kwargs, error, monkeypatch):
    def no_env(*args, **kw):
        raise AssertionError("an environment was made before the options were checked")

    monkeypatch.setattr("es_search.problems.gym_policy.make_env", no_env)
    with pytest.raises(error):
        GymPolicy("Pendulum-v1", **kwargs)


def test_discrete_and_tuple_observations_are_flattened():
    lake = GymPolicy("FrozenLake-v1")
    assert lake.obs_dim == 16  # Discrete(16): one-hot
    assert lake.flat_observation(np.int64(5)).tolist() == [0.0] * 5 + [1.0] + [0.0] * 10
    blackjack = GymPolicy("Blackjack-v1", episodes=5)
    assert blackjack.obs_dim == 32 + 11 + 2  # Tuple(Discrete(32), Discrete(11), Discrete(2))
    assert np.isfinite(blackjack.score())
    with pytest.raises(ValueError, match="observations that flatten to a vector of fixed "
                                         "size .* EsSearchTest/Sequences-v0 has Sequence"):
        GymPolicy("EsSearchTest/Sequences-v0")


def test_env_kwargs_reach_gymnasium_make_in_every_worker():
    """Non-slippery FrozenLake (a Discrete observation, one-hot) has a known optimum, a
    return of 1 for reaching the goal: a short search finds it, and the run is the
    same on 1 and 2 workers (each worker makes the environment with the kwargs)."""
    def search(n_jobs):
        policy = GymPolicy("FrozenLake-v1", env_kwargs={"is_slippery": False},
                           greedy=True, episodes=1)
        return es_search.run(policy, generations=30, population=16, sigma=0.5, seed=0,
                             n_jobs=n_jobs, progress=False, sequential_fallback=False)
    one, two = search(1), search(2)
    assert one.history == [dict(h, seconds=one.history[i]["seconds"])
                           for i, h in enumerate(two.history)]
    assert one.best_agent().returns(episodes=3).tolist() == [1.0, 1.0, 1.0]
    made = GymPolicy("FrozenLake-v1", env_kwargs={"is_slippery": False}).make_env()
    assert made.spec.kwargs["is_slippery"] is False


@pytest.mark.parametrize("env_kwargs,error,message", [
    ({"slippery": False}, ValueError, "does not take env_kwargs {'slippery': False}"),
    ("is_slippery=False", TypeError, "env_kwargs must be a dict")])
def test_bad_env_kwargs_fail_at_construction(env_kwargs, error, message):
    with pytest.raises(error, match=message):
        GymPolicy("FrozenLake-v1", env_kwargs=env_kwargs)


def test_normalize_true_and_false_keep_their_meaning():
    assert GymPolicy("Pendulum-v1", normalize=True, norm_episodes=1,
                     max_steps=20).normalize == "fixed"
    assert GymPolicy("Pendulum-v1", normalize=False).normalize == "off"
    running = GymPolicy("Pendulum-v1", normalize="running")
    assert set(running.shared_state()) == {"obs_count", "obs_mean", "obs_m2", "obs_std"}
    assert GymPolicy("Pendulum-v1").shared_state() == {}


def test_builtins_for_the_ladder_build_with_their_defaults():
    for name, env_id in [("lunarlander", "LunarLanderContinuous-v3"),
                         ("hopper", "Hopper-v5"), ("halfcheetah", "HalfCheetah-v5"),
                         ("bipedalwalker", "BipedalWalker-v3")]:
        assert name in BUILTINS
        cls = load_problem(name)
        agent = cls(episodes=2)
        assert agent.env_id == env_id and agent.episodes == 2
        assert agent.normalize == "running" and agent.hidden == ()
        assert cls.default_config["strategy"] in ("ars", "pgpe")
    assert load_problem("hopper")().reward_offset == -1.0


# ----------------------------------------------------------------------------- CLI
def test_cli_runs_a_gym_id(capsys):
    code = main(["run", "gym:MountainCarContinuous-v0", "-p", "hidden=(4,)",
                 "-p", "max_steps=15", "-p", "normalize=running", "--generations", "2",
                 "--population", "2", "--n-jobs", "1", "--no-progress"])
    assert code == 0
    assert "gym:MountainCarContinuous-v0: best score" in capsys.readouterr().out


def test_cli_unknown_gym_id_is_one_line_exit_2(capsys):
    code = main(["run", "gym:NoSuchTask-v0", "--generations", "1", "--no-progress"])
    assert code == 2
    err = capsys.readouterr().err
    assert "unknown gymnasium environment id 'NoSuchTask-v0'" in err
    assert len(err.strip().splitlines()) == 1
    with pytest.raises(ProblemError):
        load_problem("gym:")


# ----------------------------------------------------------------------------- actions
def test_discrete_actions_are_sampled_or_greedy():
    agent = GymPolicy("CartPole-v1")
    agent.set_weights({"layers.0.bias": torch.tensor([0.0, np.log(3.0)])})  # p = 1/4, 3/4
    layers, obs = agent._numpy_layers(), np.zeros(4)
    rng = np.random.default_rng(0)
    draws = np.array([agent.actor(layers, rng)(obs) for _ in range(4000)])
    assert set(draws) == {0, 1} and abs(draws.mean() - 0.75) < 0.03
    greedy = GymPolicy("CartPole-v1", greedy=True)
    greedy.set_weights({"layers.0.bias": torch.tensor([0.0, 0.1])})
    assert {greedy.actor(greedy._numpy_layers())(obs) for _ in range(50)} == {1}


def test_box_actions_are_squashed_to_asymmetric_bounds():
    agent = GymPolicy("EsSearchTest/Asymmetric-v0", hidden=5)
    low, high = np.array([0.0, -3.0]), np.array([1.0, -1.0])
    assert np.allclose(agent.actor(agent._numpy_layers())(np.zeros(3)), (low + high) / 2)
    agent.set_flat(np.random.default_rng(1).normal(0, 20, agent.num_evolved()))
    layers = agent._numpy_layers()
    actions = np.array([agent.actor(layers)(x) for x in
                        np.random.default_rng(2).normal(0, 10, (200, 3))])
    assert np.all(actions >= low) and np.all(actions <= high)
    assert actions[:, 1].min() < -2.9 and actions[:, 1].max() > -1.1  # both ends reached
    raw = GymPolicy("EsSearchTest/Asymmetric-v0", hidden=5, squash=False)  # ARS's: raw
    raw.set_weights(agent.get_weights())
    (w1, b1), (w2, b2) = layers
    x = np.random.default_rng(3).normal(0, 10, 3)
    assert np.allclose(raw.actor(layers)(x), w2 @ np.tanh(w1 @ x + b1) + b2)


# ----------------------------------------------------------------------------- running statistics
def _scored_reports(agent, seeds):
    reports = []
    for seed in seeds:
        agent.task_seed = seed
        agent.score()
        reports.append(agent.task_report())
    return reports


def test_merged_reports_equal_the_statistics_of_all_observations_in_order():
    agent = Recording("EsSearchTest/Asymmetric-v0", normalize="running", episodes=2)
    agent.set_flat(np.random.default_rng(0).normal(0, 0.5, agent.num_evolved()))
    agent.seen = []
    first = _scored_reports(agent, [3, 4, 5])
    assert agent.merge_reports([first[0], None, first[1], first[2]]) == {"steps": 150}
    second = _scored_reports(agent, [6, 7])
    assert agent.merge_reports(second) == {"steps": 100}
    every = np.array(agent.seen)
    assert len(every) == 250 and float(agent.obs_count) == 250
    assert np.allclose(agent.obs_mean.numpy(), every.mean(axis=0), rtol=1e-12, atol=1e-12)
    assert np.allclose(agent.obs_m2.numpy(), ((every - every.mean(0)) ** 2).sum(0),
                       rtol=1e-10)
    assert np.allclose(agent.obs_std.numpy(), every.std(axis=0), rtol=1e-10)


def test_moments_merge_in_any_split_equals_the_whole():
    data = np.random.default_rng(3).normal(5.0, [1.0, 100.0], (101, 2))
    whole = Moments.of(data)
    for cuts in ([10, 50], [1, 2, 100], [0, 0, 101]):
        parts = np.split(data, cuts)
        merged = Moments.empty(2)
        for part in parts:
            merged = merged.merge(Moments.of(part))
        assert merged.count == whole.count
        assert np.allclose(merged.mean, whole.mean, rtol=1e-13)
        assert np.allclose(merged.m2, whole.m2, rtol=1e-11)


def test_a_score_uses_the_statistics_of_the_start_of_its_generation():
    agent = GymPolicy("EsSearchTest/Asymmetric-v0", normalize="running", hidden=3)
    agent.set_flat(np.random.default_rng(0).normal(0, 1, agent.num_evolved()))
    agent.task_seed = 11
    alone = agent.score()
    reports = _scored_reports(agent, [12, 13])  # other candidates on the same worker
    agent.task_seed = 11
    assert agent.score() == alone
    agent.merge_reports(reports)
    agent.task_seed = 11
    assert agent.score() != alone  # the new statistics are used
    other = GymPolicy("EsSearchTest/Asymmetric-v0", normalize="running", hidden=3)
    other.set_flat(agent.get_flat())
    other.load_shared_state(agent.shared_state())
    other.task_seed = 11
    assert other.score() == agent.score()


def test_steps_are_reported_in_every_mode():
    agent = GymPolicy("Pendulum-v1", max_steps=7, episodes=3)
    agent.task_seed = 1
    agent.score()
    assert agent.task_report() == {"steps": 21, "obs": None}
    assert agent.merge_reports([agent.task_report()] * 2) == {"steps": 42}


# ----------------------------------------------------------------------------- seeds, offset
def test_common_random_numbers_share_episode_seeds_within_a_generation():
    crn = GymPolicy("CartPole-v1", crn=True, episodes=2)
    plain = GymPolicy("CartPole-v1", episodes=2)
    seeds = {}
    for task_seed in (101, 202):
        for agent in (crn, plain):
            agent.task_seed, agent.generation_seed = task_seed, 77
        seeds[task_seed] = (crn.episode_seeds(), plain.episode_seeds())
    assert seeds[101][0] == seeds[202][0] == [77, 78]
    assert seeds[101][1] != seeds[202][1]
    crn.generation_seed = None  # outside the engine: the task seed
    assert crn.episode_seeds() == [202, 203]
    crn.generation_seed, crn.selecting = 77, True  # the end's test: each task its own
    assert crn.episode_seeds() == [202, 203]
    crn.selecting = False
    # same generation, same weights: the same score whatever the task seed, even with
    # sampled actions (they come from generators seeded by the episode seeds)
    crn.set_flat(np.random.default_rng(0).normal(0, 1, crn.num_evolved()))
    values = []
    for task_seed in (5, 6):
        crn.task_seed, crn.generation_seed = task_seed, 9
        np.random.seed(task_seed)
        values.append(crn.score())
    assert values[0] == values[1]


def test_reward_offset_changes_the_score_not_the_test_returns():
    base = GymPolicy("Pendulum-v1", max_steps=30, episodes=2)
    offset = GymPolicy("Pendulum-v1", max_steps=30, episodes=2, reward_offset=-1.0)
    weights = np.random.default_rng(4).normal(0, 1, base.num_evolved())
    for agent in (base, offset):
        agent.set_flat(weights)
        agent.task_seed = 8
    assert offset.score() == pytest.approx(base.score() - 30.0)
    assert np.array_equal(offset.returns(3, seed=1), base.returns(3, seed=1))
    assert len(base.returns(3, seed=1)) == 3
    offset.selecting = True  # the end's selection test: what the user tests, unshaped
    assert offset.score() == base.score()


def test_reward_clip_clips_each_step_in_the_score_not_the_test_returns():
    kwargs = dict(max_steps=30, episodes=2)
    base = GymPolicy("Pendulum-v1", **kwargs)  # rewards in [-16.3, 0]
    clipped = GymPolicy("Pendulum-v1", reward_clip=1.0, reward_offset=-0.5, **kwargs)
    loose = GymPolicy("Pendulum-v1", reward_clip=1e9, **kwargs)
    weights = np.random.default_rng(4).normal(0, 1, base.num_evolved())
    for agent in (base, clipped, loose):
        agent.set_flat(weights)
        agent.task_seed = 8
    assert loose.score() == base.score() < -30.0  # nothing to clip: the same score
    assert -45.0 <= clipped.score() < -15.0  # each step in [-1, 0], then -0.5
    assert clipped.score() > base.score() - 15.0
    clipped.selecting = True
    assert clipped.score() == base.score()
    assert np.array_equal(clipped.returns(3, seed=1), base.returns(3, seed=1))
    assert load_problem("bipedalwalker")().reward_clip == 1.0


def test_cli_takes_the_strategy_of_the_builtin(tmp_path, capsys):
    out = tmp_path / "run"
    code = main(["run", "hopper", "--generations", "1", "-p", "max_steps=10",
                 "--n-jobs", "1", "--no-progress", "--out", str(out)])
    assert code == 0
    import json
    strategy = json.loads((out / "config.json").read_text())["strategy"]
    assert strategy["name"] == "ars" and strategy["top"] == 4
    assert strategy["population"] == 16 and strategy["step_size"] == 0.02


def test_test_scores_are_true_returns_of_fresh_episodes():
    plain = GymPolicy("CartPole-v1")
    offset = GymPolicy("CartPole-v1", reward_offset=-1.0, reward_clip=0.5)
    with torch.no_grad():
        for agent in (plain, offset):
            for _, p in agent.evolved_parameters():
                p.copy_(torch.linspace(-0.5, 0.5, p.numel()).reshape(p.shape))
    figures = offset.test_scores()
    assert figures == plain.test_scores()  # no reward_offset, no reward_clip
    returns = plain.returns(plain.test_episodes, seed=1_000_000)
    assert figures["test_return_mean"] == returns.mean() and returns.mean() > 9
    assert figures["test_episodes"] == 20 and figures["test_return_std"] == returns.std()


class _Target:
    """A tiny environment a user's script registers itself (not importable by id)."""

    def __new__(cls, *args, **kwargs):  # built lazily: gymnasium is an extra
        import gymnasium as gym

        class Target(gym.Env):
            observation_space = gym.spaces.Box(-1, 1, (2,), np.float32)
            action_space = gym.spaces.Box(-1, 1, (1,), np.float32)

            def reset(self, seed=None, options=None):
                super().reset(seed=seed)
                self.x, self.t = self.np_random.uniform(-1, 1, 2).astype(np.float32), 0
                return self.x.copy(), {}

            def step(self, action):
                self.t += 1
                reward = -float((action[0] - self.x[0]) ** 2)
                return self.x.copy(), reward, False, self.t >= 20, {}

        return Target()


def test_an_environment_registered_in_the_script_is_made_in_the_workers_too():
    """gym.register in the user's script registers the id in that process only; the
    workers make it from the spec the policy carries (they once failed with 'unknown
    gymnasium environment id')."""
    import cloudpickle
    import gymnasium as gym

    import es_search
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    gym.register("EsSearchTarget-v0", entry_point=_Target)
    try:
        runs = [es_search.run(GymPolicy("EsSearchTarget-v0"), generations=3, population=4,
                              n_jobs=n_jobs, seed=2, progress=False,
                              sequential_fallback=False) for n_jobs in (1, 2)]
    finally:
        gym.registry.pop("EsSearchTarget-v0")
        cloudpickle.unregister_pickle_by_value(sys.modules[__name__])
    assert runs[0].history[-1]["scores"] == runs[1].history[-1]["scores"]
    assert runs[0].best_score == runs[1].best_score > -20.0
    with pytest.raises(ValueError, match="unknown gymnasium environment id 'EsSearchTarget"):
        GymPolicy("EsSearchTarget-v0")  # gone from the registry: refused at construction


def test_a_module_colon_id_imports_the_module_that_registers_it(tmp_path, monkeypatch):
    """gymnasium.make's "module:Id" form: the module is imported, then the id looked up."""
    import gymnasium as gym
    (tmp_path / "es_probe_envs.py").write_text(
        "import gymnasium as gym\n"
        "gym.register('EsProbeCartPole-v0', entry_point="
        "'gymnasium.envs.classic_control.cartpole:CartPoleEnv', max_episode_steps=50)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        policy = GymPolicy("es_probe_envs:EsProbeCartPole-v0", greedy=True)
        same = GymPolicy("CartPole-v1", greedy=True)  # the same dynamics, other limit
        assert policy.returns(episodes=3).tolist() == same.returns(episodes=3).tolist()
    finally:
        gym.registry.pop("EsProbeCartPole-v0", None)
        sys.modules.pop("es_probe_envs", None)
    with pytest.raises(ValueError, match=r"gymnasium environment id 'es_probe_nothing:X-v0': "
                                         r"cannot import module 'es_probe_nothing'"):
        GymPolicy("es_probe_nothing:X-v0")


@pytest.mark.parametrize("greedy", [False, True])
def test_discrete_actions_start_where_the_space_starts(greedy):
    """Discrete(3, start=-1): the policy plays -1, 0 and 1 (it played 0, 1 and 2)."""
    policy = GymPolicy("EsSearchTest/Shifted-v0", greedy=greedy)
    with torch.no_grad():
        policy.layers[-1].bias.copy_(torch.tensor([9.0, 0.0, 0.0]))  # prefers action -1
    assert policy.returns(episodes=2).tolist() == [-10.0, -10.0] if greedy else \
        all(r < 0 for r in policy.returns(episodes=2))
    with torch.no_grad():
        policy.layers[-1].bias.copy_(torch.tensor([0.0, 0.0, 9.0]))  # prefers +1
    assert all(r > 0 for r in policy.returns(episodes=2))


def test_test_returns_are_of_whole_episodes_where_the_environment_ends_them():
    """max_steps cuts the search's episodes, not the test's: Acrobot's time limit is
    500 steps, and a policy that never swings up scores -500, not -max_steps."""
    policy = GymPolicy("Acrobot-v1", max_steps=50)
    assert policy.score() == -50.0
    assert policy.returns(episodes=2).tolist() == [-500.0, -500.0]
    assert policy.test_scores()["test_return_mean"] == -500.0


def test_a_deprecated_id_is_named_deprecated_not_unknown():
    with pytest.raises(ValueError, match=r"^deprecated gymnasium environment id 'Taxi-v3'.*"
                                         r"Taxi-v"):
        GymPolicy("Taxi-v3")
    with pytest.raises(ValueError, match="^unknown gymnasium environment id"):
        GymPolicy("NoSuchThing-v0")
