"""The README's Python examples run as written (the ones that stand alone; the
others are fragments of a run whose agent the reader supplies)."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)


def run_script(tmp_path: Path, text: str) -> str:
    script = tmp_path / "example.py"
    script.write_text(text)
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get(
        "PYTHONPATH", "")}
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_first_example_finds_the_optimum(tmp_path):
    first = python_blocks()[0]
    assert "class Quadratic(es_search.Agent)" in first
    printed = run_script(tmp_path, first + "\nprint(agent.get_flat().tolist())\n")
    best, weights = printed.strip().splitlines()
    assert -1.0 < float(best) <= 0.0  # from -90 at the start (w = 0, optimum w = 3)
    assert all(2.5 < w < 3.5 for w in eval(weights))


@pytest.mark.slow
def test_the_score_batch_example_scores_each_row_on_its_own(tmp_path):
    """The batched classifier, given a data set, passes check_score_batch and runs."""
    (example,) = [b for b in python_blocks() if "def score_batch" in b]
    data = ("import torch, es_search\ntorch.manual_seed(0)\n"
            "X = torch.randn(40, 64)\ny = torch.randint(0, 10, (40,))\n")
    printed = run_script(tmp_path, data + example + (
        "\nprint(len(es_search.check_score_batch(Classifier())))"
        "\nresult = es_search.run(Classifier(), generations=3, n_jobs=2, progress=False)"
        "\nprint(result.best_score, result.evaluations)\n"))
    checked, last = printed.strip().splitlines()
    assert checked == "8"
    best, evaluations = last.split()
    # the starting agent twice (reevaluate="auto" checks for noise), then 3 x 16
    assert 0.0 <= float(best) <= 1.0 and int(evaluations) == 2 + 3 * 16


def test_the_dotted_names_the_readme_uses_work_after_a_bare_import(tmp_path):
    """``es_search.problems.Function(f, x0)``, ``es_search.callbacks.Callback`` and the
    like, after ``import es_search`` alone (which loads neither the problems nor
    gymnasium)."""
    text = (ROOT / "README.md").read_text()
    names = sorted(set(re.findall(r"\bes_search((?:\.[A-Za-z_]\w*)+)", text)))
    assert ".problems.Function" in names and ".callbacks.Callback" in names
    printed = run_script(tmp_path, "import sys, es_search\n"
                         "print(sorted(m for m in sys.modules if m.startswith("
                         "('gymnasium', 'es_search.problems'))))\n"
                         f"for name in {names!r}:\n"
                         "    obj = es_search\n"
                         "    for part in name.strip('.').split('.'):\n"
                         "        obj = getattr(obj, part)\n")
    assert printed.strip() == "[]"
