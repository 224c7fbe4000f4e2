"""Real processes: a run killed with SIGKILL and resumed, Ctrl-C (SIGINT) and SIGTERM
to the command line."""
from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

import es_search
from es_search import checkpoint
from es_search.folder import CHECKPOINT
from es_search.problems import load_problem
from compare import read_history, same_history

ROOT = Path(__file__).resolve().parents[1]
AGENTS = str(ROOT / "tests" / "agents.py")
#: the cases of a parametrized test that the fast run leaves out (run with -m slow)
SLOW = pytest.mark.slow
ARGS = ["--population", "4", "--sigma", "0.3", "--seed", "5", "--no-progress",
        "-p", "delay=0.01"]


def cli(*argv: str, **kw) -> subprocess.Popen:
    return printed(shlex.join([sys.executable, "-m", "es_search", *argv]), **kw)


def printed(command: str, **kw) -> subprocess.Popen:
    """A command line run as printed (as a user pastes it into a shell)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get(
        "PYTHONPATH", "")}
    return subprocess.Popen(shlex.split(command), cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def program() -> str:
    """How ``cli()``'s command prints itself in the commands it suggests: ``python -m
    es_search``, with the interpreter's full path unless it is PATH's ``python``."""
    found = shutil.which("python")
    same = found is not None and os.path.abspath(found) == os.path.abspath(sys.executable)
    return shlex.join(["python" if same else sys.executable, "-m", "es_search"])


def wait_for_lines(path: Path, n: int, proc: subprocess.Popen, limit: float = 60) -> int:
    """Poll ``history.jsonl`` until it has ``n`` lines (the run is then mid-way)."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"the run ended early: {proc.communicate()}")
        if path.exists():
            lines = path.read_text().count("\n")
            if lines >= n:
                return lines
        time.sleep(0.01)
    pytest.fail("the run made no progress")


def sigkill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the run and its workers (as when a spot instance goes), then remove what
    their deaths left in /dev/shm: loky's semaphores, joblib's folders and es_search's
    own (the next run would sweep that one), named after the run's process, which no
    process is left to unlink (a reboot would)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:  # every process of the group has ended already
        pass
    proc.communicate()
    shm = Path("/dev/shm")
    if shm.is_dir():
        for path in [*shm.glob(f"sem.loky-{proc.pid}-*"),
                     *shm.glob(f"joblib_memmapping_folder_{proc.pid}_*"),
                     *shm.glob(f"es_search-{proc.pid}-*")]:
            shutil.rmtree(path, ignore_errors=True) if path.is_dir() else \
                path.unlink(missing_ok=True)


def reference(generations: int):
    vec = load_problem(f"{AGENTS}:Vec")  # the same class (module) the CLI loads
    return vec, es_search.run(vec(delay=0.0), generations=generations, population=4,
                              sigma=0.3, seed=5, n_jobs=1, progress=False)


@pytest.mark.filterwarnings("ignore::es_search.ResumeWarning")  # resumed without the delay
@pytest.mark.parametrize("lines, extra", [(1, 0.0), pytest.param(5, 0.004, marks=SLOW),
                                          pytest.param(9, 0.023, marks=SLOW)])
def test_sigkill_at_any_moment_then_resume_is_bit_identical(tmp_path, lines, extra):
    """Killed after ``lines`` generations plus ``extra`` seconds: somewhere in the next
    generation (scoring, writing the history line or the checkpoint)."""
    out = tmp_path / "run"
    proc = cli("run", f"{AGENTS}:Vec", "--generations", "40", "--n-jobs", "2",
               "--out", str(out), *ARGS, start_new_session=True)
    try:
        wait_for_lines(out / "history.jsonl", lines, proc)
        time.sleep(extra)
    finally:  # SIGKILL the run and its workers (as when a spot instance goes)
        sigkill_group(proc)
    assert proc.returncode == -signal.SIGKILL
    done = checkpoint.load(out / CHECKPOINT)["generation"]
    assert 0 <= done < 40
    vec, full = reference(40)
    resumed = es_search.run(vec(delay=0.0), generations=40, population=4, sigma=0.3,
                            seed=5, n_jobs=1, progress=False, out=out, resume=True)
    # delay is a plain attribute, not part of the config: it does not change the scores
    assert same_history(resumed.history, full.history)
    assert all(torch.equal(resumed.best_weights[k], full.best_weights[k])
               for k in full.best_weights)
    assert resumed.best_score == full.best_score
    assert same_history(read_history(out / "history.jsonl"), full.history)


@pytest.mark.slow
def test_ctrl_c_exits_130_prints_the_resume_command_and_resume_finishes(tmp_path, ctrl_c):
    out = tmp_path / "run"
    argv = ["run", f"{AGENTS}:Vec", "--generations", "30", "--n-jobs", "2",
            "--out", str(out), *ARGS]
    proc = cli(*argv)
    wait_for_lines(out / "history.jsonl", 3, proc)
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=30)
    stopped = time.monotonic() - sent
    assert proc.returncode == 130, stderr
    assert stopped < 10  # promptly (generous: the machine may be busy)
    command = program() + " " + shlex.join(argv) + " --resume"
    assert command in stderr
    ckpt = checkpoint.load(out / CHECKPOINT)  # loadable, consistent
    assert len(read_history(out / "history.jsonl")) == ckpt["generation"] >= 3
    # the printed command, run as printed, finishes the run as if never interrupted
    again = printed(command)
    stdout, stderr = again.communicate(timeout=120)
    assert again.returncode == 0, stderr
    _, full = reference(30)
    assert same_history(read_history(out / "history.jsonl"), full.history)
    saved = torch.load(out / "best_weights.pt")
    assert all(torch.equal(saved[k], full.best_weights[k]) for k in saved)


#: sitecustomize of the test below: the first ``import torch`` says so on stdout and
#: waits there for a signal (the command is then still importing, deterministically)
WAIT_IN_TORCHS_IMPORT = """
import signal, sys

class WaitInTorchsImport:
    def find_spec(self, name, path=None, target=None):
        if name == "torch":
            sys.meta_path.remove(self)
            print("importing torch", flush=True)
            signal.pause()
        return None

sys.meta_path.insert(0, WaitInTorchsImport())
"""


@pytest.mark.skipif(not hasattr(signal, "pause"), reason="POSIX signals")
@pytest.mark.parametrize("how", [pytest.param("console script", marks=SLOW), "python -m"])
def test_ctrl_c_while_the_command_imports_torch_is_one_line_exit_130(tmp_path, how, ctrl_c):
    (tmp_path / "sitecustomize.py").write_text(WAIT_IN_TORCHS_IMPORT)
    script = tmp_path / "es-search"  # as pip's console script calls main()
    script.write_text("import sys\nfrom es_search.__main__ import main\n"
                      "if __name__ == '__main__':\n    sys.exit(main())\n")
    command = [str(script)] if how == "console script" else ["-m", "es_search"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    proc = subprocess.Popen([sys.executable, *command, "list"], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert proc.stdout.readline() == "importing torch\n"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert (proc.returncode, out, err) == (130, "", "es-search: interrupted\n")


@pytest.mark.parametrize("folder, script", [
    ("es-search", "train.py"), pytest.param("work", "es-search-notes.py", marks=SLOW),
    pytest.param("es-search.exe", "train.py", marks=SLOW)])
def test_a_program_that_imports_es_search_keeps_its_keyboard_interrupt(tmp_path, folder,
                                                                        script, ctrl_c):
    """Only the command takes SIGINT while it starts: a user's program (here in a folder
    named like the command, as a clone of this repository is) keeps Python's handler."""
    path = tmp_path / folder / script
    path.parent.mkdir()
    path.write_text("import signal\nimport es_search\n"
                    "print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, str(path)], env=env, capture_output=True,
                         text=True, timeout=120)
    assert (out.returncode, out.stdout) == (0, "True\n"), out.stderr


def python_c(script: str) -> subprocess.CompletedProcess:
    """``python -c script`` in a fresh process that imports this checkout's es_search."""
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)


@pytest.mark.skipif(not hasattr(signal, "pthread_sigmask"), reason="POSIX signal masks")
def test_local_workers_start_with_sigint_blocked():
    """A terminal's Ctrl-C goes to the whole process group: the workers start with SIGINT
    blocked (a worker interrupted while Python imports printed a page of tracebacks), in
    a fresh process too, where starting multiprocessing's resource tracker unblocks it."""
    script = ("import signal, torch, es_search\n"
              "class Blocked(es_search.Agent):\n"
              "    def __init__(self):\n"
              "        super().__init__(); self.w = torch.nn.Parameter(torch.zeros(1))\n"
              "    def score(self):\n"
              "        return float(2 in signal.pthread_sigmask(signal.SIG_BLOCK, []))\n"
              "if __name__ == '__main__':\n"
              "    agent = Blocked()\n"
              "    with es_search.Evaluator(agent, n_jobs=2, sequential_fallback=False) as ev:\n"
              "        print(ev.evaluate([agent.get_weights()] * 4))\n"
              "    print(signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, []))\n")
    out = python_c(script)
    assert (out.returncode, out.stdout) == (0, "[1.0, 1.0, 1.0, 1.0]\nFalse\n"), out.stderr


def test_import_es_search_imports_nothing_and_run_stays_the_function():
    """``import es_search`` has no side effect (no torch, no signal handler); its names
    are imported on first use; ``es_search.run`` is the function."""
    script = ("import sys\nimport es_search\n"
              "print(sorted(m for m in sys.modules if m.startswith(('es_search', 'torch'))))\n"
              "import es_search.cli\n"
              "print(es_search.run.__module__, es_search.Agent.__module__)\n")
    out = python_c(script)
    assert (out.returncode, out.stdout) == (
        0, "['es_search']\nes_search.loop es_search.agent\n"), out.stderr


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["loky", "ray"])
def test_sigterm_exits_143_without_leaving_workers_behind(tmp_path, backend):
    """A job scheduler's stop: the run's workers must not outlive it (Python's default
    for SIGTERM is to die at once, leaving a pool's processes behind; the Ray that a run
    starts exited 15, its handler's, without the resume hint)."""
    if backend == "ray":
        pytest.importorskip("ray")
    out = tmp_path / "run"
    argv = ["run", f"{AGENTS}:Vec", "--generations", "30", "--n-jobs", "2",
            "--backend", backend, "--out", str(out), *ARGS]
    proc = cli(*argv)
    wait_for_lines(out / "history.jsonl", 3, proc)
    children = _children(proc.pid)
    assert children  # the loky workers (and its resource tracker)
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 143, stderr
    assert program() + " " + shlex.join(argv) + " --resume" in stderr
    deadline = time.monotonic() + 10
    while any(map(_running, children)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(map(_running, children)), [p for p in children if _running(p)]
    ckpt = checkpoint.load(out / CHECKPOINT)
    assert len(read_history(out / "history.jsonl")) == ckpt["generation"] >= 3


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["loky", "multiprocessing"])
def test_sigterm_to_the_whole_process_group_exits_143(tmp_path, backend):
    """As ``timeout``, Slurm and systemd stop a job: every process of the group at once.
    A multiprocessing worker killed while it holds its pool's task-queue lock (an idle
    one waits holding it) made the pool's terminate wait forever."""
    out = tmp_path / "run"
    argv = ["run", f"{AGENTS}:Vec", "--generations", "1000", "--n-jobs", "2",
            "--backend", backend, "--out", str(out), "--population", "16", "--seed", "5",
            "--no-progress", "-p", "delay=0.001"]  # short tasks: workers often idle
    proc = cli(*argv, start_new_session=True)
    try:
        wait_for_lines(out / "history.jsonl", 3, proc)
        os.killpg(proc.pid, signal.SIGTERM)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            sigkill_group(proc)
    assert proc.returncode == 143, stderr
    assert program() + " " + shlex.join(argv) + " --resume" in stderr
    ckpt = checkpoint.load(out / CHECKPOINT)
    assert len(read_history(out / "history.jsonl")) == ckpt["generation"] >= 3


@pytest.mark.slow
@pytest.mark.parametrize("signum, status", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_stopped_while_testing_the_ended_run_says_how_to_test_it(tmp_path, signum, status,
                                                                  ctrl_c):
    """The run is whole once it has ended: the message points at ``es-search test``,
    not at a resume, and a SIGTERM then too leaves no worker behind."""
    out, marker = tmp_path / "run", tmp_path / "testing"
    proc = cli("run", f"{AGENTS}:SlowTest", "--generations", "3", "--n-jobs", "2",
               "--out", str(out), *ARGS[:-2], "-p", f"marker={marker}")
    deadline = time.monotonic() + 60
    while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert marker.exists(), proc.communicate()
    children = _children(proc.pid)
    proc.send_signal(signum)
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == status, stderr
    assert "interrupted while testing" in stderr and "--resume" not in stderr
    assert program() + " " + shlex.join(["test", str(out)]) in stderr
    assert (out / "result.json").is_file() and not (out / "test.json").exists()
    assert len(read_history(out / "history.jsonl")) == 3
    deadline = time.monotonic() + 10
    while any(map(_running, children)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(map(_running, children))


@pytest.mark.slow
@pytest.mark.parametrize("signum, status", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_stopped_test_verb_offers_no_resume(tmp_path, signum, status, ctrl_c):
    out, marker = tmp_path / "run", tmp_path / "testing"
    made = cli("run", f"{AGENTS}:SlowTest", "--generations", "1", "--n-jobs", "1",
               "--out", str(out), "--no-test", *ARGS[:-2], "-p", f"marker={marker}")
    assert made.wait(timeout=60) == 0, made.communicate()
    proc = cli("test", str(out))
    deadline = time.monotonic() + 60
    while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert marker.exists(), proc.communicate()
    proc.send_signal(signum)
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == status, stderr
    assert stderr.strip() == "es-search: interrupted"


def _children(pid: int) -> list[int]:
    """Every descendant of ``pid`` (Linux /proc)."""
    found, todo = [], [pid]
    while todo:
        parent = todo.pop()
        for task in Path(f"/proc/{parent}/task").iterdir():
            kids = (task / "children").read_text().split()
            found += map(int, kids)
            todo += map(int, kids)
    return found


def _running(pid: int) -> bool:
    try:  # a zombie (dead, not yet reaped) counts as gone
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["loky", "multiprocessing"])
def test_workers_end_soon_after_their_run_is_killed(tmp_path, backend):
    """``kill -9`` of the run alone (the OOM killer's way): its workers, which nobody
    can stop any more, end within seconds instead of idling for loky's 300 s."""
    out = tmp_path / "run"
    proc = cli("run", f"{AGENTS}:Vec", "--generations", "1000", "--n-jobs", "2",
               "--backend", backend, "--out", str(out), *ARGS)
    children: list[int] = []
    try:
        wait_for_lines(out / "history.jsonl", 2, proc)
        children = _children(proc.pid)
        assert children
        proc.kill()  # this process only, not its group
        deadline = time.monotonic() + 15
        while any(map(_running, children)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(map(_running, children)), [p for p in children if _running(p)]
    finally:
        for pid in filter(_running, children):  # (they hold the run's stderr open)
            os.kill(pid, signal.SIGKILL)
        sigkill_group(proc)


@pytest.mark.slow
def test_cli_resume_refuses_other_parameters(tmp_path):
    out = tmp_path / "run"
    first = cli("run", f"{AGENTS}:Vec", "--generations", "1", "--n-jobs", "1",
                "--out", str(out), *ARGS)
    assert first.wait(timeout=60) == 0
    other = cli("run", f"{AGENTS}:Vec", "--generations", "2", "--n-jobs", "1",
                "--out", str(out), "--resume", *ARGS[:-1], "dim=5")
    _, stderr = other.communicate(timeout=60)
    assert other.returncode == 2
    assert "holds a run of another problem or constructor arguments: arguments.dim: 4 in " \
        "the checkpoint, 5 now; use the run's problem and --param" in stderr


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::es_search.ResumeWarning")  # resumed without the delay
def test_sigkill_between_sparse_checkpoints_then_resume_is_bit_identical(tmp_path):
    """--checkpoint-every 4: killed with generations in history.jsonl that the last
    checkpoint lacks; the resume redoes them and equals the uninterrupted run."""
    out = tmp_path / "run"
    proc = cli("run", f"{AGENTS}:Vec", "--generations", "40", "--n-jobs", "2",
               "--checkpoint-every", "4", "--out", str(out), *ARGS, start_new_session=True)
    try:
        wait_for_lines(out / "history.jsonl", 6, proc)
    finally:
        sigkill_group(proc)
    assert proc.returncode == -signal.SIGKILL
    done = checkpoint.load(out / CHECKPOINT)["generation"]
    assert done % 4 == 0 and done <= len(read_history(out / "history.jsonl"))
    vec, full = reference(40)
    resumed = es_search.run(vec(delay=0.0), generations=40, population=4, sigma=0.3,
                            seed=5, n_jobs=1, progress=False, out=out, resume=True)
    assert same_history(resumed.history, full.history)
    assert resumed.best_score == full.best_score
    assert same_history(read_history(out / "history.jsonl"), full.history)


def test_workers_watch_their_parent_and_the_process_that_opened_them_does_not():
    """A local worker watches its parent from its start (the executor's initializer),
    to end with it (kill -9, the OOM killer); the process that opened the pool never
    watches its own (it must live on under nohup, after a terminal closed)."""
    import threading

    def watched():
        return "es_search-parent-watch" in [t.name for t in threading.enumerate()]

    vec = load_problem(f"{AGENTS}:Vec")
    for backend in ("loky", "multiprocessing"):
        with es_search.Evaluator(vec(), n_jobs=2, backend=backend,
                                 sequential_fallback=False) as evaluator:
            assert evaluator.pool.run_chunks(watched, [()] * 2) == [True, True]
    assert not watched()


CHILDREN = r"""
import os, sys
sys.argv = ["es-search", "run", "sphere", "--generations", "2", "--n-jobs", "2",
            "--no-sequential-fallback", "--no-test", "--no-progress", "--out", sys.argv[1]]
from es_search import cli
status = cli.main()  # as the console script calls it
workers = []
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        with open(f"/proc/{pid}/stat") as f:
            ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            command = f.read().decode(errors="replace")
    except OSError:
        continue
    if ppid == os.getpid() and "popen_loky" in command:
        workers.append(pid)
print(status, len(workers))
"""


@pytest.mark.slow
@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads /proc")
def test_the_command_ends_its_workers_before_it_returns(tmp_path):
    """The command line's loky workers are gone when main() returns, not joined by
    loky's exit handler (seconds after the results were printed, in which a Ctrl-C
    printed a traceback and exited 0)."""
    script = tmp_path / "children.py"
    script.write_text(CHILDREN)
    done = subprocess.run([sys.executable, str(script), str(tmp_path / "run")],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[-2:] == ["0", "0"]
