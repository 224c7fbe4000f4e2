"""Every run has a spec (es_search.spec.RunSpec): a run made from Python with an agent
whose class is importable and whose constructor arguments are plain values is tested,
continued and loaded by the command line and ``load_run`` as a command-line run is."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
import torch

import es_search
from compare import read_history, same_history, same_weights
from es_search.cli import main
from es_search.errors import SettingError
from es_search.problems.sphere import Sphere
from es_search.spec import RunSpec, load_run
from es_search.strategies import STRATEGIES, strategy_from


class Target(es_search.Agent):
    """Moves towards a tensor given to the constructor (not a plain value)."""

    def __init__(self, target):
        super().__init__()
        self.target = target
        self.w = torch.nn.Parameter(torch.zeros_like(target), requires_grad=False)

    def score(self):
        return -float(((self.w - self.target) ** 2).sum())


def test_a_python_run_is_tested_continued_and_loaded_from_its_spec(tmp_path, capsys):
    out = tmp_path / "run"
    es_search.run(Sphere(dim=3), generations=2, population=4, n_jobs=1, seed=5,
                  progress=False, out=out)
    spec = RunSpec.load(out)
    assert (spec.problem, spec.params, spec.strategy, spec.population, spec.seed,
            spec.generations) == ("sphere", {"dim": 3}, "hill-climb", 4, 5, 2)
    assert main(["test", str(out)]) == 0
    assert main(["run", "sphere", "--out", str(out), "--resume", "--generations", "4",
                 "--no-progress", "--no-test", "--n-jobs", "1"]) == 0
    whole = es_search.run(Sphere(dim=3), generations=4, population=4, n_jobs=1, seed=5,
                          progress=False)
    assert same_history(read_history(out / "history.jsonl"), whole.history)
    loaded = load_run(out)
    assert same_weights(loaded.best_weights, whole.best_weights)
    assert loaded.agent.num_evolved() == 3


def test_an_agent_of_a_script_is_found_again_by_the_scripts_path(tmp_path, capsys):
    script, out = tmp_path / "walk.py", tmp_path / "run"
    script.write_text(textwrap.dedent(f"""
        import sys, torch, es_search

        with open({str(tmp_path / "runs.log")!r}, "a") as log:  # each time the file runs
            log.write(__name__ + "\\n")

        class Walk(es_search.Agent):
            def __init__(self, target, dim=2):
                super().__init__()
                self.target = target
                self.w = torch.nn.Parameter(torch.zeros(dim), requires_grad=False)

            def score(self):
                return -float(((self.w - self.target) ** 2).sum())

        if __name__ == "__main__":
            es_search.run(Walk(1.5, dim=3), generations=3, n_jobs=1, progress=False,
                          out={str(out)!r})
    """))
    subprocess.run([sys.executable, str(script)], check=True, cwd=tmp_path,
                   env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert RunSpec.load(out).problem == f"{script}:Walk"
    loaded = load_run(out)  # the file is imported, its run not started again
    assert type(loaded.agent).__name__ == "Walk" and loaded.agent.target == 1.5
    assert loaded.agent.num_evolved() == 3 and loaded.generations == 3
    assert main(["test", str(out)]) == 0
    assert main(["run", f"{script}:Walk", "--out", str(out), "--resume", "--generations", "5",
                 "--no-progress", "--no-test", "--n-jobs", "1"]) == 0  # the same agent
    assert load_run(out).generations == 5
    ran = (tmp_path / "runs.log").read_text().split()  # as a script, then imported once
    assert ran == ["__main__", "es_search_user_walk"]


def test_a_gym_id_s_policy_is_named_by_its_id(tmp_path):
    pytest.importorskip("gymnasium")
    from es_search.problems import build_problem, load_problem
    agent = build_problem(load_problem("gym:CartPole-v1"), {"episodes": 1, "max_steps": 20})
    es_search.run(agent, generations=1, population=2, n_jobs=1, progress=False,
                  out=tmp_path / "run")
    assert RunSpec.load(tmp_path / "run").problem == "gym:CartPole-v1"
    assert load_run(tmp_path / "run").agent.max_steps == 20


def test_an_agent_that_cannot_be_built_again_says_how_to_read_its_run(tmp_path, capsys):
    class Local(es_search.Agent):  # defined in a function: not importable
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.zeros(2), requires_grad=False)

        def score(self):
            return -float((self.w ** 2).sum())

    for agent, name in ((Local(), "local"), (Target(torch.ones(2)), "tensor")):
        es_search.run(agent, generations=1, n_jobs=1, progress=False, out=tmp_path / name)
        assert main(["test", str(tmp_path / name)]) == 2
        assert "cannot be built again from its config.json" in capsys.readouterr().err
        assert es_search.Result.load(tmp_path / name, agent).generations == 1


@pytest.mark.parametrize("name", sorted(STRATEGIES))
def test_a_strategy_is_rebuilt_from_the_spec_as_it_was(name):
    strategy = strategy_from(name, 12, 0.3, None)
    spec = RunSpec.describing(Sphere(dim=4), strategy, generations=3, seed=1)
    again = strategy_from(spec.strategy, spec.population, spec.sigma, spec.strategy_options)
    assert again.config() == strategy.config()


def test_a_run_of_a_spec_takes_its_definition_from_the_spec_only():
    spec = RunSpec("sphere", {"dim": 2}, generations=2, population=4, seed=3)
    result = es_search.run(spec, n_jobs=1, progress=False)
    assert result.generations == 2 and result.seed == 3 and result.config["spec"]["seed"] == 3
    with pytest.raises(SettingError, match="seed.*set by the RunSpec"):
        es_search.run(spec, seed=4, n_jobs=1, progress=False)


class Projected(es_search.Agent):
    """A fixed random projection drawn from whatever RNG state the caller has."""

    def __init__(self, dim=3, sizes=(3,)):
        super().__init__()
        self.register_buffer("proj", torch.randn(dim, dim))
        self.w = torch.nn.Parameter(torch.zeros(dim), requires_grad=False)

    def score(self):
        return -float((self.proj @ self.w - 1).square().sum())


def test_no_spec_where_data_would_build_another_agent():
    """State the arguments do not give (a buffer from the caller's RNG, an attribute set
    afterwards), a tuple argument (JSON makes it a list), a strategy subclass."""
    hill = strategy_from("hill-climb", 4, 0.1, None)
    torch.manual_seed(123)
    assert RunSpec.describing(Projected(), hill, 2, 0) is None
    with torch.random.fork_rng():
        torch.manual_seed(0)  # describing() builds the agent again under the run's seed...
        from es_search.seeding import build_seeded
        same = build_seeded(0, Projected, dim=3)
    assert RunSpec.describing(same, hill, 2, 0) is not None  # ...so this one is rebuilt
    assert RunSpec.describing(build_seeded(0, Projected, sizes=(2,)), hill, 2, 0) is None
    moved = Sphere(dim=2)
    moved.note = "set after construction"
    assert RunSpec.describing(moved, hill, 2, 0) is None

    class Greedy(type(hill)):
        pass
    assert RunSpec.describing(Sphere(dim=2), Greedy(4, 0.1, "auto"), 2, 0) is None


def test_a_spec_run_passes_its_score_kwargs(tmp_path):
    (tmp_path / "aim.py").write_text(textwrap.dedent("""
        import torch, es_search

        class Aim(es_search.Agent):
            def __init__(self):
                super().__init__()
                self.w = torch.nn.Parameter(torch.zeros(2), requires_grad=False)

            def score(self, target):
                return -float(((self.w - target) ** 2).sum())
    """))
    spec = RunSpec(f"{tmp_path / 'aim.py'}:Aim", generations=1, population=2)
    result = es_search.run(spec, score_kwargs={"target": 1.0}, n_jobs=1, progress=False)
    assert result.generations == 1
