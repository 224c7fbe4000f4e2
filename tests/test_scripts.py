"""Each script runs top to bottom with a tiny budget."""
import os
import runpy
import sys

import pytest

SCRIPTS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts")


def run_script(name, *args):
    if SCRIPTS not in sys.path:  # as `python scripts/NAME` puts it first
        sys.path.insert(0, SCRIPTS)
    module = runpy.run_path(os.path.join(SCRIPTS, name), run_name="not_main")
    return module["main"](list(args))


def test_blog_parallel_prints_the_posts_scores_in_order(capsys):
    scores = run_script("blog_parallel.py", "--work", "50", "--n-jobs", "2")
    assert scores == [3.0, 6.0, 9.0, 12.0, 15.0, 18.0]
    assert "SCORES:  [3.0, 6.0, 9.0, 12.0, 15.0, 18.0]" in capsys.readouterr().out


def test_train_cartpole_runs(tmp_path):
    pytest.importorskip("gymnasium")
    value = run_script("train_cartpole.py", "--generations", "2", "--population", "4",
                       "--episodes", "1", "--test-episodes", "2", "--n-jobs", "1",
                       "--no-progress", "--out", str(tmp_path))
    assert 8 <= value <= 500
    assert (tmp_path / "history.jsonl").exists()
    args = ["--population", "4", "--episodes", "1", "--test-episodes", "2", "--n-jobs",
            "1", "--no-progress", "--out", str(tmp_path)]
    # the same --out again: refused unless --resume (here: 2 more generations) or
    # --overwrite
    import es_search
    with pytest.raises(es_search.OutFolderError, match="holds a run already"):
        run_script("train_cartpole.py", "--generations", "2", *args)
    run_script("train_cartpole.py", "--generations", "4", "--resume", *args)
    assert len((tmp_path / "history.jsonl").read_text().splitlines()) == 4


def test_fit_batched_improves_and_batching_changes_nothing(capsys):
    args = ["--generations", "20", "--population", "16", "--n-jobs", "2", "--no-progress"]
    batched = run_script("fit_batched.py", *args)
    start = float(capsys.readouterr().out.split("error: ")[1].split()[0])
    alone = run_script("fit_batched.py", *args, "--score-batch-size", "0")
    assert batched == alone  # one score() per candidate: the same run
    assert batched < 0.8 * start


def test_the_scripts_help_shows_each_fields_docstring():
    import subprocess
    root = os.path.dirname(SCRIPTS)
    done = subprocess.run([sys.executable, os.path.join(SCRIPTS, "fit_batched.py"), "--help"],
                          capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, PYTHONPATH=root, COLUMNS="200"))
    assert done.returncode == 0, done.stderr
    text = " ".join(done.stdout.replace("\u2502", " ").split())  # rich's box drawn
    assert "--generations INT generations of the search (default: 300)" in text
    assert "--seed INT the run's seed: the same seed gives the same run" in text  # RunArgs'
    assert "continue the run saved in --out (default: False)" in text
    assert "--progress, --no-progress show a progress bar (default: True)" in text


@pytest.mark.parametrize("args, message", [
    (["--generations", "0"], "--generations must be an integer >= 1, got 0"),
    (["--resume"], "--resume continues the run saved in an out folder; pass --out DIR"),
    (["--n-jobs", "0"], "--n-jobs must be an integer other than 0"),
    (["--hidden", "0"], "--hidden must be an integer >= 1"),
])
def test_a_scripts_bad_run_setting_is_refused_before_any_work(args, message):
    from es_search.errors import SettingError, setting_message
    from run_args import _flag
    with pytest.raises(SettingError) as refused:  # tyro parsed them; run()'s checks refuse
        run_script("fit_batched.py", *args)
    assert setting_message(refused.value, _flag).startswith(message)


@pytest.mark.parametrize("script, args, message", [
    ("train_cartpole.py", ["--hidden", "-1"], "--hidden must be an integer >= 0 (units of "
                                               "one tanh hidden layer; 0: a linear policy)"),
    ("fit_batched.py", ["--points", "0"], "--points must be an integer >= 4"),
    ("blog_parallel.py", ["--n-jobs", "0"], "--n-jobs must be an integer other than 0"),
])
def test_a_scripts_bad_input_found_in_its_run_is_one_line_exit_2(script, args, message):
    """What es_search refuses once the script runs (the agent's arguments, the out
    folder) is said as the command line names it, without a traceback."""
    import subprocess
    if script == "train_cartpole.py":
        pytest.importorskip("gymnasium")
    done = subprocess.run([sys.executable, os.path.join(SCRIPTS, script), *args],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": os.path.dirname(SCRIPTS)})
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1
    assert lines[0].startswith(f"{os.path.join(SCRIPTS, script)}: error: {message}")
