"""Pendulum and Acrobot built-ins, observation normalisation, and the CLI's strategy options."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import es_search
from es_search.cli import main
from es_search.problems import BUILTINS, load_problem
from es_search.problems.sphere import Rosenbrock

pytest.importorskip("gymnasium")

from es_search.problems import GymPolicy  # noqa: E402
from es_search.problems.control import Acrobot  # noqa: E402


def Pendulum(**kwargs):  # the GymPolicy of benchmarks/control.py's pendulum
    return GymPolicy("Pendulum-v1", **{"hidden": 16, "episodes": 1, **kwargs})


def test_builtins_name_the_new_problems():
    assert {"pendulum", "acrobot", "rosenbrock"} <= set(BUILTINS)
    from es_search.problems import batched_control
    assert load_problem("pendulum") is batched_control.Pendulum
    assert load_problem("cartpole") is batched_control.CartPole
    assert load_problem("acrobot") is Acrobot
    assert load_problem("rosenbrock") is Rosenbrock


def test_rosenbrock_optimum_and_value():
    assert Rosenbrock(dim=4, start=1.0).score() == 0.0
    x = np.array([0.5, -0.3, 1.2])
    agent = Rosenbrock(dim=3)
    agent.set_flat(x)
    expected = sum(100 * (x[i + 1] - x[i] ** 2) ** 2 + (1 - x[i]) ** 2 for i in range(2))
    assert agent.score() == pytest.approx(-expected)


def test_pendulum_policy_is_continuous_and_bounded():
    agent = Pendulum(max_steps=30)
    assert agent.act_dim == 1 and not agent.discrete
    assert agent.num_evolved() == 3 * 16 + 16 + 16 + 1
    agent.set_flat(np.full(agent.num_evolved(), 5.0))
    action = agent.actor(agent._numpy_layers())(np.array([1.0, 0.0, 8.0]))
    assert action.shape == (1,) and abs(action[0]) <= 2.0


def test_episodes_are_seeded_from_the_task_seed():
    agent = Acrobot(max_steps=40)
    agent.set_flat(np.linspace(-1, 1, agent.num_evolved()))
    scores = []
    for seed in (7, 7, 8):
        agent.task_seed = seed
        np.random.seed(seed)
        scores.append(agent.score())
    assert scores[0] == scores[1]
    pend = Pendulum(max_steps=40)
    returns = []
    for seed in (1, 1, 2):
        pend.task_seed = seed
        returns.append(pend.score())
    assert returns[0] == returns[1] != returns[2]


def test_normalisation_statistics_are_fixed_buffers_not_evolved():
    a, b = Pendulum(normalize=True, max_steps=50), Pendulum(normalize=True, max_steps=50)
    plain = Pendulum(max_steps=50)
    assert torch.equal(a.obs_mean, b.obs_mean) and torch.equal(a.obs_std, b.obs_std)
    assert a.num_evolved() == plain.num_evolved()
    assert torch.all(a.obs_std > 0) and not torch.equal(a.obs_std, plain.obs_std)
    # thetadot (observation 2) swings over [-8, 8]: its std is far from cos/sin's
    assert a.obs_std[2] > 2 * a.obs_std[0]
    weights = np.linspace(-1, 1, plain.num_evolved())  # the start outputs 0 always
    a.set_flat(weights)
    plain.set_flat(weights)
    a.task_seed = plain.task_seed = 3
    assert a.score() != plain.score()  # the statistics are used


def test_normalised_runs_do_not_depend_on_the_worker_count():
    torch.manual_seed(0)
    agent = Acrobot(max_steps=60, norm_episodes=2)
    runs = [es_search.run(agent, generations=2, population=4, sigma=0.5, n_jobs=n,
                          seed=1, strategy="openai-es", progress=False)
            for n in (1, 2)]
    assert [h["scores"] for h in runs[0].history] == [h["scores"] for h in runs[1].history]


@pytest.mark.parametrize("kwargs", [{"hidden": -1}, {"episodes": 0}, {"max_steps": 0},
                                    {"norm_episodes": 0}])
def test_bad_policy_settings_fail_at_construction(kwargs):
    with pytest.raises(ValueError):
        Pendulum(**kwargs)
    with pytest.raises(ValueError):
        Pendulum(normalize="yes")


def test_greedy_is_refused_for_continuous_actions(capsys):
    from es_search.problems.batched_control import CartPole, Pendulum as BatchedPendulum
    for make in (lambda: BatchedPendulum(greedy=True),
                 lambda: es_search.problems.GymPolicy("Pendulum-v1", greedy=True)):
        with pytest.raises(ValueError, match="Pendulum-v1's actions are continuous"):
            make()
    assert CartPole(greedy=True).greedy and not BatchedPendulum(greedy=False).greedy
    assert main(["run", "pendulum", "-p", "greedy=true", "--generations", "1",
                 "--no-progress"]) == 2
    assert "leave greedy out" in capsys.readouterr().err


def test_cli_passes_strategy_options(tmp_path, capsys):
    out = tmp_path / "run"
    code = main(["run", "sphere", "-p", "dim=3", "--generations", "3", "--n-jobs", "1",
                 "--strategy", "adaptive-hill-climb", "-o", "reevaluate=True",
                 "-o", "min_sigma=0.01", "--no-progress", "--out", str(out)])
    assert code == 0
    config = json.loads((out / "config.json").read_text())["strategy"]
    assert config["name"] == "adaptive-hill-climb"
    assert config["reevaluate"] is True and config["min_sigma"] == 0.01


@pytest.mark.parametrize("argv,message", [
    (["-o", "learning_rate"], "NAME=VALUE"),
    (["-o", "no_such=1"], "has no option 'no_such'; its options: learning_rate"),
    (["-o", "learning_rate=-1"], "learning_rate"),
])
def test_cli_bad_strategy_options_exit_2(argv, message, capsys):
    code = main(["run", "sphere", "--generations", "1", "--n-jobs", "1", "--no-progress",
                 "--strategy", "openai-es"] + argv)
    assert code == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_cli_list_shows_every_strategy_and_problem(capsys):
    assert main(["list"]) == 0
    text = capsys.readouterr().out
    for name in list(es_search.STRATEGIES) + ["pendulum", "acrobot", "rosenbrock"]:
        assert name in text
    assert "learning_rate=0.01" in text


def test_cli_runs_pendulum(capsys):
    code = main(["run", "pendulum", "--generations", "1", "--population", "2",
                 "-p", "max_steps=20", "--n-jobs", "1", "--no-progress"])
    assert code == 0
    assert "pendulum: best score" in capsys.readouterr().out


def test_the_same_cli_command_gives_the_same_run(tmp_path):
    """A built-in's random initial weights come from --seed, not from whatever state
    torch's generator is in (two runs in one process: the second would otherwise start
    from other weights); the caller's RNGs are left as they were."""
    import json

    import torch
    runs = []
    for k in range(2):
        before = torch.random.get_rng_state()
        assert main(["run", "pendulum", "--generations", "2", "--population", "4",
                     "-p", "max_steps=20", "--n-jobs", "1", "--no-progress", "--seed", "7",
                     "--out", str(tmp_path / str(k))]) == 0
        assert torch.equal(torch.random.get_rng_state(), before)
        torch.randn(3)  # the caller's generator moves on between the two commands
        lines = (tmp_path / str(k) / "history.jsonl").read_text().splitlines()
        runs.append([json.loads(line)["scores"] for line in lines])
    assert runs[0] == runs[1]
