"""The command line (es_search.cli): its verbs, options and messages, errors as one line
and an exit status, and runs through the command as a user types them."""
import json
import os
import re
import subprocess
import sys
import textwrap

import pytest

from es_search.cli import main, resume_command
from compare import read_history, same_history

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_cli(*args, cwd=None):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "es_search", *args], capture_output=True,
                          text=True, env=env, cwd=cwd, timeout=300)


@pytest.mark.parametrize("verb", [[], ["run"], ["test"], ["check"], ["list"], ["export"],
                                  ["bench"]])
def test_every_verbs_help_prints_its_options(verb, capsys):
    with pytest.raises(SystemExit) as done:
        main([*verb, "--help"])
    assert done.value.code == 0 and capsys.readouterr().out.startswith("usage: es-search")


def test_list_names_the_builtins_and_strategies(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    for name in ("blog", "cartpole", "sphere", "hill-climb"):
        assert name in out


def test_list_strategy_shows_what_it_does_and_its_options(capsys):
    from es_search import STRATEGIES
    for name, cls in STRATEGIES.items():
        assert main(["list", name]) == 0
        out = capsys.readouterr().out
        lines = out.splitlines()
        assert lines[0].startswith(f"{name}: es_search.strategies.")
        assert lines[-1].startswith("  options (-o NAME=VALUE): ")
        assert ">>>" not in out and "``" not in out  # the doctests are for the Python API
    assert main(["list", "ars"]) == 0
    out = capsys.readouterr().out
    assert "top [b]" in out and "defaults (--population, --sigma): population None, " \
        "sigma 0.03" in out
    assert out.splitlines()[-1] == "  options (-o NAME=VALUE): directions=None, top=None, " \
        "step_size=0.02"
    assert main(["list", "hill-climb"]) == 0
    assert "(the default strategy)" in capsys.readouterr().out.splitlines()[0]


def test_list_problem_shows_its_parameters_and_run_defaults(tmp_path, capsys):
    assert main(["list", "sphere"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "sphere: es_search.problems.sphere.Sphere",
        "  Maximise -sum((x - optimum)^2): the known optimum is 0 at x = optimum.",
        "  parameters (-p NAME=VALUE): dim=10, start=0.0, optimum=3.0",
        "  es-search run sphere uses: strategy hill-climb, population 16, sigma 0.3, "
        "generations 100"]
    path = tmp_path / "mine.py"
    path.write_text(textwrap.dedent("""
        import torch, es_search

        class Mine(es_search.Agent):
            default_config = {"strategy": "pgpe", "strategy_options": {"step_size": 0.2}}

            def __init__(self, target, dim=3):
                super().__init__()
                self.w = torch.nn.Parameter(torch.zeros(dim))
    """))
    assert main(["list", f"{path}:Mine"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1:] == ["  parameters (-p NAME=VALUE): target, dim=3",
                       f"  es-search run {path}:Mine uses: strategy pgpe, population 32 "
                       f"(the strategy's default), sigma 0.1 (the strategy's default), "
                       f"generations 50, -o step_size=0.2"]
    assert main(["list", "nope"]) == 2
    for spec in ("acrobot", "gym:CartPole-v1"):  # their environment is fixed
        assert main(["list", spec]) == 0
        parameters = capsys.readouterr().out.splitlines()[-2]
        assert "hidden=" in parameters and "env_id" not in parameters
    assert main(["run", "acrobot", "-p", "env_id=Acrobot-v1", "--generations", "1",
                 "--no-progress", "--no-test", "--n-jobs", "1"]) == 0  # its own: fine


def test_check_refuses_a_score_that_is_not_finite(tmp_path, capsys):
    (tmp_path / "nan.py").write_text("import torch, es_search\n"
                                     "class NaN(es_search.Agent):\n"
                                     "    def __init__(self):\n"
                                     "        super().__init__()\n"
                                     "        self.w = torch.nn.Parameter(torch.zeros(2))\n"
                                     "    def score(self):\n"
                                     "        return float('nan')\n")
    assert main(["check", f"{tmp_path / 'nan.py'}:NaN"]) == 1  # repeatable, yet useless
    assert capsys.readouterr().err.startswith("es-search check: NaN's score is nan for the "
                                              "starting agent: not a finite number")


def test_a_run_with_no_finite_score_fails(tmp_path, capsys):
    (tmp_path / "nan.py").write_text(textwrap.dedent("""
        import torch, es_search

        class NaN(es_search.Agent):
            def __init__(self):
                super().__init__()
                self.w = torch.nn.Parameter(torch.zeros(2))
            def score(self):
                return float("nan")
    """))
    with pytest.warns(RuntimeWarning, match="non-finite"):
        assert main(["run", f"{tmp_path / 'nan.py'}:NaN", "--generations", "2", "--n-jobs",
                     "1", "--no-progress", "--out", str(tmp_path / "run")]) == 1
    captured = capsys.readouterr()
    assert "best score nan after 2 generations" in captured.out
    assert captured.err.strip().endswith("es-search: error: no finite score in 34 "
                                         "evaluations (every score() was NaN or infinite, "
                                         "or failed under --on-error worst)")
    assert (tmp_path / "run" / "result.json").exists()  # what was done is kept


@pytest.mark.slow
def test_blog_run_writes_results(tmp_path):
    proc = run_cli("run", "blog", "-p", "work=20", "--generations", "3", "--population", "4",
                   "--n-jobs", "2", "--seed", "1", "--out", str(tmp_path / "blog"))
    assert proc.returncode == 0, proc.stderr
    assert "best score" in proc.stdout
    history = (tmp_path / "blog" / "history.jsonl").read_text().splitlines()
    assert len(history) == 3
    assert "es_search" in proc.stderr  # the progress bar
    config = json.loads((tmp_path / "blog" / "config.json").read_text())
    assert config["agent"].endswith("BlogAgent") and config["n_jobs"] == 2


#: a user's agent file: a target to approach, and a test figure
MINE = textwrap.dedent("""
    import torch, es_search

    class Mine(es_search.Agent):
        def __init__(self, target=2.0):
            super().__init__()
            self.w = torch.nn.Parameter(torch.zeros(3))
            self.target = target

        def score(self):
            return -float(((self.w - self.target) ** 2).sum())

        def test_scores(self):
            return {"distance": float((self.w - self.target).norm())}
""")


@pytest.mark.slow
def test_a_users_file_and_class(tmp_path, capsys):
    path = tmp_path / "my_agent.py"
    path.write_text(MINE)
    proc = run_cli("run", f"{path}:Mine", "-p", "target=1.5", "--generations", "5",
                   "--n-jobs", "2", "--no-progress")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    best = float(proc.stdout.split("best score ")[1].split()[0])
    assert -6.75 < best < 0  # started at -3 * 1.5^2


@pytest.mark.parametrize("strategy, population, sigma", [
    ("pgpe", 32, 0.1), ("adaptive-hill-climb", 10, 0.1), ("ars", 16, 0.03)])
def test_a_users_class_runs_with_the_strategys_own_size_and_step(
        tmp_path, capsys, strategy, population, sigma):
    """A class with no default_config: no --population or --sigma means the strategy's
    own defaults, as in es_search.run (the command line gave every strategy 16 and 0.1)."""
    path = tmp_path / "my_agent.py"
    path.write_text(MINE)
    out = tmp_path / "run"
    assert main(["run", f"{path}:Mine", "--strategy", strategy, "--generations", "1",
                 "--n-jobs", "1", "--no-progress", "--no-test", "--out", str(out)]) == 0
    config = json.loads((out / "config.json").read_text())
    assert (config["strategy"]["population"], config["strategy"]["sigma"]) == (population, sigma)
    assert main(["list", f"{path}:Mine"]) == 0
    assert "population 16 (the strategy's default), sigma 0.1 (the strategy's default)" \
        in capsys.readouterr().out  # the default strategy, hill-climb


@pytest.mark.slow
def test_a_module_in_the_current_folder_and_a_run_tested_from_elsewhere(
        tmp_path, monkeypatch, capsys):
    """`es-search run walkers:Mine` finds walkers.py in the current folder, as
    `python -m es_search` does (the installed script's sys.path lacks that folder);
    `es-search test DIR` and a resume find the run's module or file from any folder."""
    project = tmp_path / "project"
    project.mkdir()
    for name in ("es_probe_walkers.py", "other.py"):
        (project / name).write_text(MINE)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if os.path.isabs(p)])  # no "" or "."
    monkeypatch.chdir(project)
    common = ["--generations", "2", "--population", "4", "--n-jobs", "2", "--no-progress"]
    try:
        assert main(["run", "es_probe_walkers:Mine", *common, "--out", "runs/m"]) == 0
        assert main(["run", "es_probe_walkers.py:Mine", *common, "--out", "runs/f"]) == 0
        assert str(project) not in sys.path
        monkeypatch.chdir(tmp_path)
        capsys.readouterr()
        for run in ("m", "f"):
            assert main(["test", f"project/runs/{run}"]) == 0
            assert "distance" in capsys.readouterr().out
        more = ["--generations", "3", "--population", "4", "--n-jobs", "1", "--no-progress"]
        assert main(["run", "project/es_probe_walkers.py:Mine", *more, "--out",
                     "project/runs/f", "--resume"]) == 0
        assert main(["run", "project/other.py:Mine", *more, "--out", "project/runs/f",
                     "--resume"]) == 2
        assert "problem: " in capsys.readouterr().err
    finally:
        sys.modules.pop("es_probe_walkers", None)


@pytest.mark.slow
def test_a_gym_module_in_the_current_folder_registers_its_environment(tmp_path):
    """`es-search run gym:envs:ID`, as the installed script runs it (the current folder
    not on sys.path): envs.py is found there, and the workers make the environment it
    registers by its import path."""
    (tmp_path / "es_probe_envs.py").write_text(textwrap.dedent("""
        import gymnasium
        from gymnasium.envs.classic_control import CartPoleEnv

        class ProbeCart(CartPoleEnv):
            pass

        gymnasium.register("ProbeCart-v0", entry_point="es_probe_envs:ProbeCart",
                           max_episode_steps=50)
    """))
    script = "import sys; from es_search.cli import main; sys.exit(main())"
    env = dict(os.environ, PYTHONPATH=ROOT)
    argv = ["gym:es_probe_envs:ProbeCart-v0", "--generations", "2", "--population", "4",
            "--n-jobs", "2", "--no-progress", "--no-test", "--no-sequential-fallback"]
    for verb in (["list"], ["run"]):
        proc = subprocess.run([sys.executable, "-P", "-c", script, *verb,
                               *(argv if verb == ["run"] else argv[:1])], cwd=tmp_path,
                              env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
    assert "gym:es_probe_envs:ProbeCart-v0: best score" in proc.stdout


def test_a_module_that_fails_to_import_is_one_line_exit_2(tmp_path, monkeypatch, capsys):
    (tmp_path / "es_probe_broken_agents.py").write_text("from math import no_such_name\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert main(["run", "es_probe_broken_agents:Mine", "--generations", "1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("es-search: error: cannot import module 'es_probe_broken_agents': "
                          "cannot import name 'no_such_name' from 'math'")
    assert err.count("\n") == 1 and "Traceback" not in err


def test_a_resume_compares_constructor_arguments_not_how_they_were_given(tmp_path,
                                                                          capsys):
    """-p dim=10 where 10 is sphere's default builds the same agent: the resume goes on;
    another value, or another problem, is refused, naming it."""
    base = ["run", "sphere", "--population", "4", "--n-jobs", "1", "--no-progress",
            "--out", str(tmp_path / "run")]
    assert main(base + ["--generations", "2"]) == 0
    assert main(base + ["--generations", "3", "--resume", "-p", "dim=10",
                        "-p", "optimum=3.0"]) == 0
    capsys.readouterr()
    assert main(base + ["--generations", "4", "--resume", "-p", "dim=5"]) == 2
    assert "arguments.dim: 10 in the checkpoint, 5 now" in capsys.readouterr().err
    assert main(["run", "rastrigin", *base[2:], "--generations", "4", "--resume"]) == 2
    assert "problem: 'sphere' in the checkpoint, 'rastrigin' now" in capsys.readouterr().err


def test_load_run_rebuilds_the_agent_of_a_command_line_run(tmp_path, monkeypatch):
    pytest.importorskip("gymnasium")
    from es_search.spec import load_run
    out = tmp_path / "run"
    assert main(["run", "cartpole", "-p", "episodes=2", "--generations", "3",
                 "--population", "4", "--n-jobs", "1", "--no-progress", "--seed", "7",
                 "--out", str(out)]) == 0
    tested = json.loads((out / "test.json").read_text())
    monkeypatch.chdir(tmp_path)  # from anywhere
    result = load_run(out)
    assert result.generations == 3 and result.seed == 7
    assert result.agent.episodes == 2
    assert result.center_agent().test_scores() == tested["center"]
    assert result.best_agent().test_scores() == tested["best"]


def test_a_reader_that_leaves_early_gets_no_traceback():
    """`es-search list | head -1`: the closed pipe ends the command quietly, 141."""
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen([sys.executable, "-m", "es_search", "list"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    proc.stdout.close()  # before it writes anything
    err = proc.stderr.read().decode()
    proc.stderr.close()
    assert proc.wait(timeout=120) == 141
    assert err == ""


@pytest.mark.slow
def test_a_reader_that_leaves_during_the_test_loses_no_file(tmp_path):
    """`es-search run ... | head -1`: the test's figures are saved before they are printed."""
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
               PYTHONUNBUFFERED="")  # a pipe's default buffering: unbuffered, the line
    # after the summary may already hit the closed pipe and end the command before its test
    out = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "es_search", "run", "cartpole",
                             "--generations", "1", "--no-progress", "--n-jobs", "1",
                             "--out", str(out)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env)
    proc.stdout.readline()  # the run's summary line, then the reader leaves
    proc.stdout.close()
    proc.stderr.read()
    proc.stderr.close()
    # 141: the print after the reader left failed (0 only if every line was written
    # into the pipe before it closed, which the test's episodes make unlikely)
    assert proc.wait(timeout=300) in (141, 0)
    assert set(json.loads((out / "test.json").read_text())) >= {"best"}


@pytest.mark.parametrize("args, message", [
    (["run", "nope"], "unknown problem 'nope'"),
    (["run", "sphere", "--out", ""], "--out must be a folder path (str or pathlib.Path, not "
                                     "empty), got ''"),
    (["run", "cartpol"], "unknown problem 'cartpol' (did you mean 'cartpole'?): use a built-in"),
    (["run", "es_search.problems.blog:Missing"], "has no attribute 'Missing'"),
    (["run", "no/such/file.py:Agent"], "no such file: no/such/file.py"),
    (["run", "no_such_module_xyz:Agent"], "cannot import module 'no_such_module_xyz'"),
    (["run", "es_search.problems.blog:torch"], "is not an es_search.Agent subclass"),
    (["run", "blog", "--sigma", "-1"], "--sigma must be a positive finite number"),
    (["run", "blog", "--generations", "0"], "--generations must be an integer >= 1, got 0"),
    (["run", "blog", "--n-jobs", "0"], "--n-jobs must be an integer other than 0 (0: no "
     "workers)"),
    (["run", "blog", "--n-jobs", "0"], "got 0; use --n-jobs -1 for all cores or --n-jobs 1 "
     "for a plain loop"),
    (["run", "sphere", "--task-timeout", "1", "--n-jobs", "1"],
     "--task-timeout 1.0 needs worker processes, not --n-jobs 1"),
    (["run", "sphere", "--overwrite"], "--overwrite replaces the run saved in an out folder; "
                                       "pass --out DIR"),
    (["run", "bipedalwalker", "--population", "8"], "top must be <= directions (4), got 16; "
     "use a smaller top or more directions (top=16: bipedalwalker's default; "
     "--strategy-option sets another)"),
    (["run", "blog", "--seed", "x"], "--seed: invalid int value: 'x'"),
    (["run", "blog", "--seed", "-1"], "--seed must be a non-negative integer"),
    (["run", "blog", "-p", "work"], "-p expects NAME=VALUE"),
    (["run", "blog", "-p", "nonsense=1"],
     "blog has no parameter 'nonsense' (-p NAME=VALUE); its parameters: w, work"),
    (["run", "sphere", "-p", "dimm=3"],
     "sphere has no parameter 'dimm' (did you mean 'dim'?) (-p NAME=VALUE)"),
    (["run", "blog", "-p", "work=lots"],
     "cannot build blog with -p work='lots': work must be an integer >= 0, got 'lots'"),
    (["run", "blog", "--strategy", "nope"], "invalid choice: 'nope'"),
    (["run", "blog", "--checkpoint-every", "0"],
     "--checkpoint-every must be an integer >= 1 (generations between two checkpoints"),
    (["run", "blog", "--checkpoint-every", "5"],
     "--checkpoint-every 5 sets how often the run folder's checkpoint is written; pass "
     "--out DIR"),
    (["run", os.path.join(ROOT, "tests", "agents.py")],
     "agents.py' names a file; name the agent class too, as "),
    (["run", os.path.join(ROOT, "tests", "agents.py") + ":vec"],
     "agents.py has no attribute 'vec' (did you mean 'Vec'?); its "
     "es_search.Agent classes: Quadratic, NoisyEverywhere"),
    (["run", "es_search.problems.sphere:Spher"], "es_search.problems.sphere has no attribute "
     "'Spher' (did you mean 'Sphere'?); its es_search.Agent classes: Sphere, Rastrigin"),
    (["run", os.path.join(ROOT, "tests", "agents.py") + ":SlowTest"],
     "SlowTest.__init__() missing 1 required positional argument: 'marker' (give it with "
     "-p NAME=VALUE)"),
    (["run", os.path.join(ROOT, "tests", "agents.py") + ":TakesData"],
     "score_kwargs={} do not fit TakesData.score(data): missing a required argument: "
     "'data'; give its arguments defaults, take them in __init__ (set by --param)"),
    (["check", os.path.join(ROOT, "tests", "agents.py") + ":TakesData"],
     "score_kwargs={} do not fit TakesData.score(data): missing a required argument"),
    *[([verb, os.path.join(ROOT, "tests", "agents.py") + ":Parameterless"],
       "Parameterless has no evolved parameters, so there is nothing to search")
      for verb in ("run", "check")],
    (["run", "cartpole", "-p", "greedy=banana"],
     "cannot build cartpole with -p greedy='banana': greedy must be True or False"),
    (["run", "gym:CartPole-v1", "-p", "crn=yes"], "crn must be True or False, got 'yes'"),
    (["run", "acrobot", "-p", "env_id=CartPole-v1"],
     "Acrobot is a policy for Acrobot-v1, not 'CartPole-v1': for another environment use "
     "GymPolicy('CartPole-v1') (es-search run gym:CartPole-v1)"),
    (["run", "sphere", "--csv", os.path.join(ROOT, "README.md", "x.csv")],
     "README.md/x.csv' cannot be written: '" + os.path.join(ROOT, "README.md")
     + "' is a file, not a folder"),
    (["bench", "--quick", "--out", os.path.join(ROOT, "README.md")],
     "README.md' is a file, not a folder (choose a folder; it is created if missing)"),
    (["bench", "--n-jobs", "1,two"], "--n-jobs takes integers like 1,2,4; got '1,two'"),
    (["run", "sphere", "-p", "dim=3", "-p", "dim=4"],
     "-p dim is given twice (dim=3 and dim=4); give it once"),
    (["run", "sphere", "-o", "reevaluate=True", "-o", "reevaluate=False"],
     "-o reevaluate is given twice"),
    (["run", "sphere", "-o", "population=8"], "--strategy-option must be the strategy's own "
     "options, without population, got {'population': 8}; give --population on its own"),
    (["run", "sphere", "-p", "start=nan"], "start must be a finite number, got 'nan'"),
    (["run", "sphere", "-p", "optimum=1e400"], "optimum must be a finite number, got inf"),
    (["frobnicate"], "invalid choice: 'frobnicate'"),
    (["list", "gym:Nope-v0"], "unknown gymnasium environment id 'Nope-v0'"),
    (["list", "pgp"], "unknown problem or strategy 'pgp' (did you mean 'pgpe'?); es-search "
                      "list names them all"),
    (["list", "PGPE"], "unknown problem or strategy 'PGPE' (did you mean 'pgpe'?)"),  # hopper
    (["run", "sphere", "--csv", "/proc/x/y.csv"],
     "CSV path '/proc/x/y.csv' cannot be written: no file can be created in '/proc'"),
    (["run", "sphere", "--tensorboard", "/proc/x"],
     "TensorBoard log_dir '/proc/x' cannot be written: no file can be created in '/proc'"),
    (["bench", "--quick", "--out", "/proc/x"],
     "--out /proc/x cannot be written: no file can be created in '/proc'"),
    (["run", os.path.join(ROOT, "tests", "agents.py") + ":ConstructorRaises", "-p", "dim=-1"],
     "cannot build " + os.path.join(ROOT, "tests", "agents.py")
     + ":ConstructorRaises with -p dim=-1: "
     "RuntimeError: no dimension -1"),
    (["test", "/no/such/run"], "no run folder at /no/such/run (a folder with a config.json: "
                               "pass the run's --out DIR)"),
    (["test", "/"], "no run folder at / (a folder with a config.json"),
    (["test", "/etc/passwd"], "no run folder at /etc/passwd (a folder with a config.json"),
    (["check", "blog", "--population", "1"],
     "--population must be an integer >= 2 (candidates scored in groups), got 1"),
    (["check", "nope"], "unknown problem 'nope'"),
])
def test_bad_input_is_one_line_and_exit_2(args, message, capsys):
    assert main(args) == 2
    err = capsys.readouterr().err
    assert message in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_csv_onto_a_file_of_the_run_folder_is_refused_before_any_work(tmp_path, capsys):
    """--csv DIR/history.jsonl replaced the run's history with a CSV (a resume then failed)."""
    out = tmp_path / "run"
    flags = ["--generations", "2", "--no-progress", "--no-test", "--n-jobs", "1"]
    assert main(["run", "sphere", *flags, "--out", str(out)]) == 0
    files = {p: p.read_bytes() for p in out.iterdir() if p.is_file()}
    capsys.readouterr()
    for name, again in (("history.jsonl", "--resume"), ("config.json", "--overwrite"),
                        ("failures/generation-0.csv", "--resume")):
        assert main(["run", "sphere", *flags, "--out", str(out), again,
                     "--csv", str(out / name)]) == 2
        err = capsys.readouterr().err
        assert err == (f"es-search: error: CSV({str(out / name)!r}) would write over the run "
                       f"folder's own {name.split('/')[0]} (in {out}): give it a file of its "
                       f"own\n")
        assert {p: p.read_bytes() for p in out.iterdir() if p.is_file()} == files
    empty = tmp_path / "empty"  # refused before --resume says it starts a new run there
    assert main(["run", "sphere", *flags, "--out", str(empty), "--resume",
                 "--csv", str(empty / "history.jsonl")]) == 2
    assert capsys.readouterr().out == "" and not empty.exists()


def test_true_and_false_are_read_as_a_shell_user_writes_them(tmp_path):
    """-p greedy=false was the string 'false', which the policy read as True."""
    def scores(*params):
        out = tmp_path / "-".join(params or ("default",))
        assert main(["run", "cartpole", *sum((["-p", p] for p in params), []),
                     "--generations", "1", "--no-progress", "--no-test", "--n-jobs", "1",
                     "--out", str(out)]) == 0
        return [r["scores"] for r in read_history(out / "history.jsonl")]
    default = scores()
    assert scores("greedy=false") == scores("greedy=False") == default
    assert scores("greedy=TRUE") == scores("greedy=True") != default


def test_errors_through_the_console_entry_point_have_no_traceback():
    proc = run_cli("run", "nope")
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and "unknown problem" in proc.stderr


def test_a_run_ends_with_the_best_agents_test_and_test_measures_it_again(tmp_path, capsys):
    pytest.importorskip("gymnasium")
    import torch
    from es_search.problems import load_problem
    from es_search.selection import describe
    out = tmp_path / "cp"
    assert main(["run", "cartpole", "--generations", "3", "--population", "8", "--n-jobs",
                 "1", "--no-progress", "--seed", "2", "--strategy", "pgpe", "--out",
                 str(out)]) == 0
    printed = capsys.readouterr().out
    saved = json.loads((out / "test.json").read_text())
    end = json.loads((out / "result.json").read_text())  # what the run hands back
    assert describe(end["chosen"], end["selection"]) + f" ({out}/chosen_weights.pt)" in printed
    for key, label in (("best", "best agent"), ("center", "final centre")):
        label += " (handed back)" if key == end["chosen"] else ""
        assert f"test of the {label}, outside the search: test_return_mean " \
               f"{saved[key]['test_return_mean']:.6g}" in printed
        assert saved[key]["test_episodes"] == 100
        tested = load_problem("cartpole")()  # the figures are these weights'
        tested.set_weights(torch.load(out / f"{key}_weights.pt"))
        assert tested.test_scores() == saved[key]
    assert saved["best"] != saved["center"]  # PGPE's mean is not its best sample
    (out / "test.json").unlink()
    assert main(["test", str(out)]) == 0
    assert capsys.readouterr().out.splitlines() == [
        line for line in printed.splitlines() if line.startswith("test of")]
    assert json.loads((out / "test.json").read_text()) == saved
    (out / "best_weights.pt").write_bytes(b"not a torch file")
    assert main(["test", str(out)]) == 2
    err = capsys.readouterr().err
    assert "cannot load" in err and "best_weights.pt" in err and len(err.splitlines()) == 1
    assert "weights_only" not in err  # torch's advice to unpickle anything: not for a torn file
    # a hill climber whose parent is still its best: one line, one test
    out = tmp_path / "hc"
    assert main(["run", "cartpole", "--generations", "2", "--population", "4", "--n-jobs",
                 "1", "--no-progress", "--out", str(out)]) == 0
    lines = [x for x in capsys.readouterr().out.splitlines() if x.startswith("test of")]
    saved = json.loads((out / "test.json").read_text())
    assert len(lines) == 1 and lines[0].startswith("test of the best agent (also the final "
                                                   "centre; handed back), outside the search")
    assert saved["best"] == saved["center"]
    # an interrupted run has handed nothing back: its best so far is tested, as such
    import es_search

    def interrupt(record):
        raise KeyboardInterrupt
    out = tmp_path / "cut"
    with pytest.raises(KeyboardInterrupt):
        es_search.run(es_search.RunSpec("cartpole", generations=5, population=4), n_jobs=1,
                      progress=False, out=out, callbacks=[interrupt])
    capsys.readouterr()
    assert main(["test", str(out)]) == 0
    first, second = capsys.readouterr().out.splitlines()
    assert first == f"{out}: an unfinished run (resume it to finish); its best so far:"
    assert second.startswith("test of the best agent, outside the search: test_return_mean")


def test_a_second_run_into_a_run_folder_needs_resume_or_overwrite(tmp_path, capsys):
    out = tmp_path / "sphere"
    first = ["run", "sphere", "--generations", "3", "--n-jobs", "1", "--no-progress",
             "--out", str(out)]
    assert main(first) == 0
    saved = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    capsys.readouterr()
    assert main(["run", "sphere", "-p", "dim=4", "--generations", "2", "--n-jobs", "1",
                 "--no-progress", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"--out {str(out)!r} holds a run already (3 generation(s)" in err
    assert "continue it with --resume, replace it with --overwrite" in err
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == saved
    assert main(first + ["--resume", "--overwrite"]) == 2
    assert "--resume continues the run in --out, --overwrite replaces it: pass one of them" \
        in capsys.readouterr().err
    assert main(["run", "sphere", "-p", "dim=4", "--generations", "2", "--n-jobs", "1",
                 "--no-progress", "--out", str(out), "--overwrite"]) == 0
    assert json.loads((out / "config.json").read_text())["spec"]["params"] == {"dim": 4}
    assert len((out / "history.jsonl").read_text().splitlines()) == 2
    # Ctrl-C's advice continues the run: --resume added, --overwrite dropped
    assert resume_command(["run", "sphere", "--out", "x", "--overwrite"]) == \
        "es-search run sphere --out x --resume"


def test_no_test_and_problems_without_test_figures(tmp_path, capsys):
    assert main(["run", "sphere", "--generations", "2", "--n-jobs", "1", "--no-progress"]) == 0
    assert "handed back: the best evaluation (not saved: --out DIR writes the run)\n" in \
        capsys.readouterr().out  # a run without --out says it kept nothing
    out = tmp_path / "sphere"
    assert main(["run", "sphere", "--generations", "2", "--n-jobs", "1", "--no-progress",
                 "--out", str(out)]) == 0
    assert "test of the best agent" not in capsys.readouterr().out
    assert main(["test", str(out)]) == 0
    assert "Sphere defines no test figures" in capsys.readouterr().out
    assert not (out / "test.json").exists()
    pytest.importorskip("sklearn")
    out = tmp_path / "digits"
    assert main(["run", "digits", "-p", "hidden=0", "--generations", "2", "--n-jobs", "1",
                 "--no-progress", "--no-test", "--out", str(out)]) == 0
    assert "test of the best agent" not in capsys.readouterr().out
    assert not (out / "test.json").exists()
    assert main(["test", str(out)]) == 0
    saved = json.loads((out / "test.json").read_text())
    assert set(saved) == {"best", "center"}
    assert set(saved["best"]) == {"test_accuracy", "train_accuracy"}


def test_a_finished_run_resumed_with_nothing_to_do_reuses_its_earlier_test(tmp_path,
                                                                           capsys):
    """No generation left: its test.json is these weights' test, shown again and not run
    again (with --no-test, listed as the earlier test's); a missing one is made."""
    (tmp_path / "tested.py").write_text(textwrap.dedent("""
        import os, torch, es_search

        class Tested(es_search.Agent):
            def __init__(self):
                super().__init__()
                self.w = torch.nn.Parameter(torch.zeros(2))

            def score(self):
                return -float(((self.w - 1) ** 2).sum())

            def test_scores(self):  # counted in a file: each test is one line
                with open(os.path.join(os.path.dirname(__file__), "tests.log"), "a") as f:
                    f.write("tested\\n")
                return {"zeta": 0.25, "alpha": 3}  # shown in this order, not sorted
    """))
    out, log = tmp_path / "run", tmp_path / "tests.log"
    run = ["run", f"{tmp_path / 'tested.py'}:Tested", "--generations", "2",
           "--population", "4", "--n-jobs", "1", "--no-progress", "--out", str(out)]

    def tests() -> int:
        return len(log.read_text().splitlines()) if log.exists() else 0

    assert main(run) == 0
    first = capsys.readouterr().out.splitlines()
    tested, saved = tests(), (out / "test.json").read_text()
    shown = [line for line in first if line.startswith("test of")]
    assert tested >= 1 and shown and "zeta 0.25, alpha 3" in shown[0]
    done = (f"the run in {out}/ had already completed its 2 generations: nothing left "
            f"to do (a larger --generations continues it)")
    assert main(run + ["--resume"]) == 0
    again = capsys.readouterr().out.splitlines()
    assert tests() == tested and (out / "test.json").read_text() == saved
    handed = f"handed back: the best evaluation ({out}/chosen_weights.pt)"  # a hill climber's
    assert again[1:] == [handed, done, f"the figures of its earlier test ({out / 'test.json'}; "
                               f"es-search test {out} tests it again):", *shown,
                         again[-1]]
    assert again[-1].startswith(f"results in {out}/ (") and \
        again[-1].endswith(", test.json from its earlier test)")
    assert main(run + ["--resume", "--no-test"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert tests() == tested and listed[1:] == [handed, done, again[-1]]
    (out / "test.json").unlink()  # not tested (interrupted, or --no-test): tested now
    assert main(run + ["--resume"]) == 0
    made = capsys.readouterr().out.splitlines()
    assert tests() == 2 * tested and made[1:] == [handed, done, *shown, made[-1]]
    assert made[-1].startswith(f"results in {out}/ (") and made[-1].endswith(", test.json)")
    assert json.loads((out / "test.json").read_text()) == json.loads(saved)
    assert main(run + ["--resume", "--select-tasks", "4"]) == 0  # the end's choice redone
    redone = capsys.readouterr().out.splitlines()
    assert redone[2] == (f"the run in {out}/ had already completed its 2 generations: what "
                         f"it hands back chosen again on --select-tasks 4 (a larger "
                         f"--generations continues it)")
    assert tests() == 3 * tested  # and tested
    assert json.loads((out / "result.json").read_text())["select_tasks"] == 4
    assert main(run[:2] + ["--generations", "3"] + run[4:] + ["--resume"]) == 0
    assert tests() == 4 * tested  # a generation more: tested anew
    assert capsys.readouterr().out.splitlines()[-1].startswith(f"results written to {out}/")


def test_check_passes_a_row_exact_problem_and_names_a_group_dependent_one(tmp_path, capsys):
    pytest.importorskip("gymnasium")
    assert main(["check", "pendulum", "--population", "4", "--exact"]) == 0
    repeatable, out = capsys.readouterr().out.splitlines()
    assert repeatable.startswith("pendulum: scored twice under one task seed, the same "
                                 "score, -") and repeatable.endswith(" (repeatable)")
    assert out.startswith("pendulum: 4 candidates get the same scores in one group, in "
                          "two groups, one by one (bit for bit): ")
    path = tmp_path / "normalised.py"
    path.write_text(textwrap.dedent("""
        import torch, es_search

        class Normalised(es_search.Agent):
            def __init__(self, dim=3):
                super().__init__()
                self.w = torch.nn.Parameter(torch.zeros(dim))

            def score_batch(self, params, seeds):
                s = -((params["w"] - 1) ** 2).sum(dim=1)
                return s - s.mean()  # scores relative to the group's: a mistake
    """))
    assert main(["check", f"{path}:Normalised", "-p", "dim=2"]) == 1
    captured = capsys.readouterr()
    assert captured.out.endswith("Normalised: scored twice under one task seed, the same "
                                 "score, 0 (repeatable)\n")
    assert captured.err.startswith("es-search check: Normalised.score_batch() scores 8 of "
                                   "8 candidates differently")
    assert "candidate_rngs" in captured.err


def test_a_bare_command_prints_the_verbs(capsys):
    assert main([]) == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: es-search")
    assert all(verb in err for verb in ("run", "test", "check", "list", "bench"))


USER_AGENTS = '''
import torch, es_search

class NoScore(es_search.Agent):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(3))

class ListTest(NoScore):
    def score(self):
        return -float((self.w - 1).pow(2).sum())
    def test_scores(self):
        return [1, 2]

class RaisingTest(ListTest):
    def test_scores(self):
        raise ValueError("no test set")

class Raises(ListTest):
    def score(self):
        raise ValueError("boom")

class Counts(ListTest):
    def __init__(self):
        super().__init__()
        self.calls = 0
    def score(self):
        self.calls += 1
        return super().score() + 0.01 * self.calls
'''


def test_a_failing_agent_is_one_message_with_the_right_exit_status(tmp_path, capsys):
    (tmp_path / "mine.py").write_text(USER_AGENTS)
    spec = str(tmp_path / "mine.py")
    common = ["--generations", "2", "--n-jobs", "1", "--no-progress"]
    assert main(["run", f"{spec}:NoScore", *common]) == 2  # refused before any work
    err = capsys.readouterr().err
    assert err.strip() == ("es-search: error: NoScore does not define score(): write "
                           "score(self) returning a number, higher is better (or "
                           "score_batch(self, params, seeds) for groups of candidates)")
    assert main(["run", f"{spec}:Raises", *common]) == 1  # the run failed: its message,
    err = capsys.readouterr().err                       # no frames of es_search's own
    assert err.startswith("es-search: error: Raises.score() failed on the starting agent")
    assert err.count("Traceback") == 1 and "ValueError: boom" in err
    for name, what in (("ListTest", "returned list [1, 2]; it must return a dict of name "
                                    "-> number"),
                       ("RaisingTest", "raised ValueError: no test set")):
        out = tmp_path / name
        assert main(["run", f"{spec}:{name}", *common, "--out", str(out)]) == 1
        err = capsys.readouterr().err
        assert err.strip() == (f"es-search: error: {name}.test_scores() {what}"
                               + (" (or {} for none)" if name == "ListTest" else "")
                               + f"; the run itself is complete in {out}/: once "
                               f"test_scores() is fixed, test it with: es-search test {out}")
        assert (out / "result.json").exists()
        assert main(["test", str(out)]) == 1
        assert f"{name}.test_scores() {what}" in capsys.readouterr().err


@pytest.mark.slow
def test_warnings_read_as_the_command_lines(tmp_path, capsys):
    (tmp_path / "mine.py").write_text(USER_AGENTS)
    script = tmp_path / "es-search"  # as pip's console script calls main()
    script.write_text("import sys\nfrom es_search.__main__ import main\n"
                      "if __name__ == '__main__':\n    sys.exit(main())\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for command in ([sys.executable, str(script)], [sys.executable, "-m", "es_search"]):
        done = subprocess.run([*command, "run", f"{tmp_path / 'mine.py'}:Counts",
                               "--generations", "1", "--no-progress", "--n-jobs", "1",
                               "--no-test"],
                              env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        assert done.stderr.startswith("es-search: UnrepeatableScoreWarning: Counts is not "
                                      "repeatable"), done.stderr
        assert "a run takes --no-repeat-check to skip this check" in done.stderr  # its flag
        assert "sys.exit(main())" not in done.stderr


def test_a_spec_names_its_own_settings_and_the_command_line_their_flags():
    """RunSpec's refusals name the library's settings (``params``); es-search writes
    them as its flags (the bad-input cases above: ``--param``)."""
    from es_search.errors import SettingError
    from es_search.spec import RunSpec
    with pytest.raises(SettingError) as info:
        RunSpec(os.path.join(ROOT, "tests", "agents.py") + ":TakesData").build_agent({})
    assert (info.value.setting, info.value.value) == ("score_kwargs", {})
    assert "(set by params)" in str(info.value) and "-p" not in str(info.value)


def test_resume_without_generations_continues_to_the_runs_own(tmp_path, capsys):
    out = tmp_path / "run"
    common = ["run", "sphere", "--n-jobs", "1", "--no-progress", "--out", str(out)]
    assert main([*common, "--generations", "60", "--stop-at=-1e9"]) == 0  # stops at 0
    assert len(read_history(out / "history.jsonl")) == 1
    assert main([*common, "--resume"]) == 0  # the problem's default would be 100: no,
    assert len(read_history(out / "history.jsonl")) == 60  # the run's own 60


def test_a_command_line_run_continued_from_python_stays_the_commands(tmp_path, capsys):
    """A run started by the command and continued by es_search.run(resume=True) keeps
    its spec (with the new length): es-search test and --resume still rebuild it."""
    import dataclasses

    import es_search
    from es_search.spec import RunSpec
    out = tmp_path / "run"
    common = ["run", "sphere", "-p", "dim=3", "--n-jobs", "1", "--no-progress", "--no-test",
              "--out", str(out)]
    assert main([*common, "--generations", "3"]) == 0
    spec = RunSpec.load(out)
    es_search.run(spec.build_agent(), generations=5, population=spec.population,
                  sigma=spec.sigma, strategy=spec.strategy, seed=spec.seed, out=out,
                  resume=True, n_jobs=1, progress=False)
    assert RunSpec.load(out) == dataclasses.replace(spec, generations=5)
    assert main([*common, "--resume"]) == 0  # its own 5 generations: nothing left
    assert len(read_history(out / "history.jsonl")) == 5
    assert main(["test", str(out)]) == 0


@pytest.mark.slow
def test_no_sequential_fallback_keeps_a_crashing_score_in_the_workers(tmp_path):
    """A trivial score() is scored in the command's own process by default; one that
    can crash its process is kept in the workers, where a crash is a WorkerError."""
    (tmp_path / "crash.py").write_text(textwrap.dedent("""
        import os, torch, es_search

        class Crash(es_search.Agent):
            def __init__(self):
                super().__init__()
                self.w = torch.nn.Parameter(torch.zeros(2))

            def score(self):
                if float(self.w[0]) > 0.0:  # every other candidate, about
                    os._exit(9)  # as a segfault in a C extension would
                return -float((self.w ** 2).sum())
    """))
    argv = ["run", "crash.py:Crash", "--generations", "2", "--population", "4",
            "--n-jobs", "2", "--no-progress", "--max-retries", "0", "--seed", "0"]
    proc = run_cli(*argv, "--no-sequential-fallback", cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert "a worker process died" in proc.stderr and "Traceback" not in proc.stderr


def test_resume_takes_every_setting_not_given_again_from_the_run(tmp_path, capsys):
    out = tmp_path / "run"
    common = ["run", "sphere", "--n-jobs", "1", "--no-progress"]
    settings = ["--seed", "1", "--population", "6", "--sigma", "0.2", "--strategy",
                "adaptive-hill-climb", "-o", "reevaluate=True", "-p", "dim=4"]
    assert main([*common, *settings, "--generations", "4", "--out", str(tmp_path / "full")]
                ) == 0
    assert main([*common, *settings, "--generations", "4", "--out", str(out),
                 "--stop-at=-1e9"]) == 0
    assert main([*common, "--out", str(out), "--resume"]) == 0  # nothing given again
    resumed, full = (read_history(path / "history.jsonl") for path in (out, tmp_path / "full"))
    assert len(resumed) == 4 and [h["best_score"] for h in resumed] == \
        [h["best_score"] for h in full]
    capsys.readouterr()
    assert main([*common, "--out", str(out), "--resume", "--generations", "5",
                 "--seed", "2"]) == 2  # what is given again must still agree
    assert "seed: 1 in the checkpoint, 2 now" in capsys.readouterr().err


def test_resume_keeps_the_runs_select_tasks_and_checkpoint_every(tmp_path, capsys):
    out = str(tmp_path / "run")
    common = ["run", "sphere", "--n-jobs", "1", "--no-progress", "--no-test", "--out", out]
    assert main([*common, "--generations", "2", "--select-tasks", "3",
                 "--checkpoint-every", "2"]) == 0
    assert main([*common, "--generations", "3", "--resume"]) == 0  # neither given again
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert (config["select_tasks"], config["checkpoint_every"]) == (3, 2)
    assert json.loads((tmp_path / "run" / "result.json").read_text())["select_tasks"] == 3
    assert main([*common, "--generations", "4", "--resume", "--select-tasks", "5"]) == 0
    assert json.loads((tmp_path / "run" / "config.json").read_text())["select_tasks"] == 5
    bare = ["run", "--n-jobs", "1", "--no-progress", "--no-test", "--out", out]
    assert main([*bare, "--resume", "--generations", "5"]) == 0  # the run's own problem
    assert len(read_history(tmp_path / "run" / "history.jsonl")) == 5
    capsys.readouterr()
    assert main(bare) == 2
    assert "required: problem (left out only with --resume" in capsys.readouterr().err


def test_testing_a_run_that_goes_on_is_refused(tmp_path, capsys):
    from compare import claim
    out = tmp_path / "run"
    assert main(["run", "sphere", "--generations", "2", "--n-jobs", "1", "--no-progress",
                 "--out", str(out)]) == 0
    capsys.readouterr()
    with claim(out):  # what a run going on in it holds (here: this thread)
        thread = __import__("concurrent.futures").futures.ThreadPoolExecutor(1)
        assert thread.submit(main, ["test", str(out)]).result(60) == 2
        thread.shutdown()
    err = capsys.readouterr().err
    assert "in use by another es_search run" in err and "test it once the run has ended" in err


def test_a_refused_resume_leaves_the_folder_as_it_was(tmp_path, capsys):
    import es_search
    from es_search.problems.sphere import Sphere
    out = tmp_path / "api"
    es_search.run(Sphere(dim=3), generations=2, n_jobs=1, progress=False, out=out)
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    assert main(["run", "sphere", "-p", "dim=10", "--out", str(out), "--resume",
                 "--no-progress", "--n-jobs", "1"]) == 2  # the run's dim is 3
    assert "arguments.dim: 3 in the checkpoint, 10 now" in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before


def test_resume_into_an_empty_folder_says_it_starts_a_run(tmp_path, capsys):
    out = tmp_path / "typo"
    assert main(["run", "sphere", "--generations", "2", "--n-jobs", "1", "--no-progress",
                 "--out", str(out), "--resume"]) == 0
    printed = capsys.readouterr().out
    assert f"{out} holds no run yet: --resume starts a new one there" in printed
    assert re.search(r"best score \S+ after 2 generations, \d+ evaluations in \d+\.\d s of "
                     r"search \(\d+\.\d s this command\)", printed)
    assert main(["run", "sphere", "--generations", "2", "--n-jobs", "1", "--no-progress",
                 "--out", str(out), "--resume"]) == 0
    assert "holds no run yet" not in capsys.readouterr().out


def test_a_run_whose_workers_die_says_the_command_that_continues_it(tmp_path, capsys):
    path = tmp_path / "dies.py"
    path.write_text(textwrap.dedent("""
        import os, torch, es_search

        class Dies(es_search.Agent):
            def __init__(self):
                super().__init__()
                self.w = torch.nn.Parameter(torch.zeros(2))
                self.home = os.getpid()

            def score(self):
                if os.getpid() != self.home:  # in a worker: it dies
                    os._exit(3)
                return -float((self.w ** 2).sum())
    """))
    out = tmp_path / "run"
    argv = ["run", f"{path}:Dies", "--generations", "3", "--n-jobs", "2", "--no-progress",
            "--no-sequential-fallback", "--max-retries", "0", "--out", str(out)]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "continue with:\n  " in err and err.rstrip().endswith(f"{out} --resume")
    assert "resume=True" not in err


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_output_that_cannot_be_written_is_one_line_and_exit_1(tmp_path):
    with open("/dev/full", "w") as full:
        done = subprocess.run([sys.executable, "-m", "es_search", "list"], stdout=full,
                              stderr=subprocess.PIPE, text=True, timeout=120)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "es-search: error: [Errno 28] No space left on device"]


def test_resume_takes_the_runs_other_p_values_name_by_name(tmp_path, capsys):
    """--resume with one -p given again (the run's own value) keeps the run's others;
    one given with another value is refused."""
    out = str(tmp_path / "run")
    base = ["run", "sphere", "--n-jobs", "1", "--no-progress", "--out", out]
    assert main([*base, "--generations", "2", "-p", "dim=3", "-p", "optimum=1.0"]) == 0
    assert main([*base, "--generations", "3", "--resume", "-p", "dim=3"]) == 0
    assert len(read_history(tmp_path / "run" / "history.jsonl")) == 3
    capsys.readouterr()
    assert main([*base, "--generations", "4", "--resume", "-p", "dim=4"]) == 2
    assert f"--out '{out}' holds a run of another problem or constructor arguments: " \
        "arguments.dim: 3 in the checkpoint, 4 now; use the run's problem and --param, or " \
        "another --out" in capsys.readouterr().err


def test_p_values_may_be_json():
    from es_search.cli_parser import _parse_param
    assert _parse_param('env_kwargs={"is_slippery": false}') == (
        "env_kwargs", {"is_slippery": False})
    assert _parse_param("x=[1, null, true]") == ("x", [1, None, True])
    assert _parse_param("x={1: 2}") == ("x", {1: 2})  # a Python literal, as before
    assert _parse_param("x={bad") == ("x", "{bad") and _parse_param("x=") == ("x", "")


def test_list_leaves_greedy_out_for_continuous_actions(capsys):
    pytest.importorskip("gymnasium")
    assert main(["list", "pendulum"]) == 0
    assert "greedy" not in capsys.readouterr().out
    assert main(["list", "cartpole"]) == 0
    assert "greedy=False" in capsys.readouterr().out


def test_a_setting_is_named_by_the_parsers_own_flag():
    """The command line names a setting by the flag its parser gives it: no table of
    names, no rewriting of the library's message."""
    import argparse

    from es_search.cli import flag_term
    from es_search.errors import SettingError, setting_message
    from es_search.checks import check_n_jobs
    parser = argparse.ArgumentParser(prog="x", exit_on_error=False)
    parser.add_argument("-w", "--workers", dest="n_jobs", type=int)
    parser.add_argument("--continue", dest="resume", action="store_true")
    parser.add_argument("--folder", dest="out")
    term = flag_term(parser)
    assert (term("n_jobs"), term("n_jobs", "2"), term("resume", "True")) == (
        "--workers", "--workers 2", "--continue")
    assert term("score_kwargs", "{}") == "score_kwargs={}"  # no flag: as Python writes it
    from es_search.cli import build_parser
    run = flag_term(build_parser().verbs["run"])  # its settings' flags, from Settings
    assert (run("repeat_check", "False"), run("progress"), run("checkpoint_every", "5"),
            run("EarlyStopping patience", "0")) == (
        "--no-repeat-check", "--progress", "--checkpoint-every 5", "--patience 0")
    error = SettingError("resume", True, "continues the run in {out}; pass {out=DIR}",
                         got=False)
    assert setting_message(error, term) == "--continue continues the run in --folder; pass --folder DIR"
    with pytest.raises(SettingError) as info:
        check_n_jobs(parser.parse_args(["--workers", "0"]).n_jobs)
    message = setting_message(info.value, term)
    assert message.startswith("--workers must be an integer other than 0")
    assert "use --workers -1 for all cores or --workers 1 for a plain loop" in message
    assert "n_jobs" not in message
    import warnings

    import es_search
    from es_search.errors import one_line_warnings
    from es_search.errors import warn_user
    with warnings.catch_warnings(record=True) as caught:  # a warning naming a setting
        warnings.simplefilter("always")
        warn_user("pass {out=DIR}; {resume=True} continues it", template=True)
    assert str(caught[0].message) == "pass out=DIR; resume=True continues it"
    with one_line_warnings("es-search", term):  # the command line's: its flags
        shown = warnings.formatwarning(caught[0].message, RuntimeWarning,
                                       es_search.__file__, 1)
    assert shown == "es-search: RuntimeWarning: pass --folder DIR; --continue continues it\n"


def test_a_file_that_runs_when_imported_is_imported_up_to_its_run(tmp_path, capsys,
                                                                    monkeypatch):
    """A script without ``if __name__ == "__main__":`` ran its search again when es-search
    imported it for its class (``test``, ``--resume``): the import stops at its run()."""
    script = tmp_path / "unguarded.py"
    script.write_text(textwrap.dedent("""
        import torch, es_search

        class Quadratic(es_search.Agent):
            def __init__(self):
                super().__init__()
                self.w = torch.nn.Parameter(torch.zeros(2))

            def score(self):
                return -float(((self.w - 1) ** 2).sum())

        def main():  # called unguarded, below
            es_search.run(Quadratic(), generations=2, n_jobs=1, out="runs/quad",
                          progress=False)

        main()
    """))
    monkeypatch.chdir(tmp_path)
    import runpy
    runpy.run_path(str(script), run_name="__main__")  # as `python unguarded.py`: runs
    def files():
        return {p.name: p.read_bytes() for p in (tmp_path / "runs" / "quad").iterdir()
                if p.name != ".lock"}
    saved = files()
    assert "chosen_weights.pt" in saved
    capsys.readouterr()
    assert main(["test", "runs/quad"]) == 0
    assert capsys.readouterr().out.startswith("runs/quad: Quadratic defines no test figures")
    assert main(["run", "unguarded.py:Quadratic", "--out", "runs/quad", "--resume",
                 "--generations", "2", "--n-jobs", "1", "--no-progress"]) == 0
    assert "nothing left to do" in capsys.readouterr().out
    assert files() == saved  # not run again
    from es_search import load_run
    assert type(load_run("runs/quad").chosen_agent()).__name__ == "Quadratic"  # rebuilt


def test_a_script_that_parses_its_arguments_at_import_is_imported_without_them(
        tmp_path, capsys, monkeypatch):
    """es_search imports the script for its class with no arguments (it read es-search's
    own, ``test runs/p``, and exited with its usage); one that needs some says so."""
    script = tmp_path / "parsing.py"
    script.write_text(textwrap.dedent("""
        import argparse, torch, es_search

        parser = argparse.ArgumentParser()
        parser.add_argument("--generations", type=int, default=2)
        args = parser.parse_args()

        class Pol(es_search.Agent):
            def __init__(self):
                super().__init__()
                self.w = torch.nn.Parameter(torch.zeros(2))

            def score(self):
                return -float(((self.w - 1) ** 2).sum())

        if __name__ == "__main__":
            es_search.run(Pol(), generations=args.generations, n_jobs=1, out="runs/p",
                          progress=False)
    """))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["parsing.py", "--generations", "3"])
    import runpy
    runpy.run_path(str(script), run_name="__main__")
    monkeypatch.setattr(sys, "argv", ["es-search", "test", "runs/p"])  # as the command has
    capsys.readouterr()
    assert main(["test", "runs/p"]) == 0
    assert "Pol defines no test figures" in capsys.readouterr().out
    needs = tmp_path / "needs.py"
    needs.write_text(script.read_text().replace("default=2", "required=True"))
    assert main(["run", "needs.py:Pol", "--generations", "1"]) == 2
    err = capsys.readouterr().err
    assert "importing needs.py exited (sys.exit(2))" in err and "if __name__ ==" in err


def test_a_python_run_of_a_module_class_resumes_by_file_or_module(tmp_path, monkeypatch,
                                                                   capsys):
    """A script's ``from walker_mod import Walker`` and the command's
    ``walker_mod.py:Walker`` or ``walker_mod:Walker`` name one class: the run resumes
    whichever way it is spelled (it was refused as 'another problem')."""
    (tmp_path / "walker_mod.py").write_text(textwrap.dedent("""
        import torch, es_search

        class Walker(es_search.Agent):
            def __init__(self, dim: int = 3):
                super().__init__()
                self.w = torch.nn.Parameter(torch.zeros(dim))

            def score(self):
                return -float(((self.w - 1) ** 2).sum())
    """))
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "walker_mod", raising=False)
    import es_search
    from walker_mod import Walker
    es_search.run(Walker(dim=4), generations=2, n_jobs=1, out="runs/w", progress=False)
    for generations, spelling in (("3", "walker_mod.py:Walker"), ("4", "walker_mod:Walker")):
        assert main(["run", spelling, "--out", "runs/w", "--resume", "--generations",
                     generations, "--n-jobs", "1", "--no-progress", "--no-test"]) == 0
        assert f"after {generations} generations" in capsys.readouterr().out



def test_a_file_that_imports_a_module_beside_it_runs_here_and_on_the_workers(tmp_path,
                                                                              monkeypatch):
    """``python FILE.py`` imports the modules beside FILE; es-search failed with
    ModuleNotFoundError (and the workers cannot import them by name either)."""
    project = tmp_path / "project"
    (project / "aim_pkg").mkdir(parents=True)
    (project / "aim_help.py").write_text("def target():\n    return 1.0\n")
    (project / "aim_pkg" / "__init__.py").write_text("SCALE = 2.0\n")
    (project / "aimer.py").write_text(textwrap.dedent("""
        import torch, es_search
        from aim_help import target
        from aim_pkg import SCALE

        class Aim(es_search.Agent):
            def __init__(self):
                super().__init__()
                self.w = torch.nn.Parameter(torch.zeros(3))

            def score(self):
                return -float(((self.w - SCALE * target()) ** 2).sum())
    """))
    monkeypatch.chdir(tmp_path)
    for name in ("aim_help", "aim_pkg"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    from es_search.problems import load_problem
    aim = load_problem("project/aimer.py:Aim")
    assert str(project) not in sys.path
    import es_search
    runs = [es_search.run(aim(), generations=2, n_jobs=n, sequential_fallback=False,
                          progress=False).history for n in (1, 2)]
    assert same_history(*runs) and runs[0][-1]["best_score"] > -12.0


def test_a_python_run_with_score_kwargs_resumes_from_the_command_line(tmp_path, monkeypatch,
                                                                        capsys):
    """The command has no flag for score_kwargs: a resume takes the run's own, saved in
    its folder (it was refused as a changed configuration)."""
    (tmp_path / "target_mod.py").write_text(textwrap.dedent("""
        import torch, es_search

        class Aim(es_search.Agent):
            def __init__(self):
                super().__init__()
                self.w = torch.nn.Parameter(torch.zeros(3))

            def score(self, target):
                return -float(((self.w - target) ** 2).sum())
    """))
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "target_mod", raising=False)
    import es_search
    from target_mod import Aim
    kw = dict(n_jobs=1, progress=False, score_kwargs={"target": 0.5})
    full = es_search.run(Aim(), generations=3, **kw)
    es_search.run(Aim(), generations=2, out="runs/a", **kw)
    assert main(["run", "target_mod.py:Aim", "--out", "runs/a", "--resume", "--generations",
                 "3", "--n-jobs", "1", "--no-progress", "--no-test"]) == 0
    assert [h["best_score"] for h in read_history(tmp_path / "runs/a/history.jsonl")] == \
        [h["best_score"] for h in full.history]
