"""The evaluation engine at the core limit: any n_jobs gives the same run, workers persist,
a generation sends few bytes per candidate; its backends and its scaling benchmark."""
import json
import os
import sys

import runpy
import subprocess

import joblib
import numpy as np
import pytest

import es_search
from es_search import backends
from benchmarks.harness.schemes import PipeCounter
from benchmarks.harness.model import fit_models
from es_search.bench import BenchAgent
from es_search.candidates import Candidate
from es_search.cli import main as cli_main
from es_search.dispatch import ChunkPolicy
from es_search.front import Evaluator
from es_search.problems.sphere import Sphere

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "benchmarks", "results")


def scaling_script():
    """benchmarks/scaling.py's globals: this repository's targets and README table."""
    return runpy.run_path(os.path.join(ROOT, "benchmarks", "scaling.py"),
                          run_name="not_main")


MIXED = ([Candidate("jitter", 0.1)] * 5 + [Candidate("center")] +
         [Candidate("noise", 0.2, s, k) for k in range(3) for s in (1.0, -1.0)])


def _run(n_jobs, backend=None, **kw):
    result = es_search.run(Sphere(dim=5), generations=3, population=6, sigma=0.3,
                           n_jobs=n_jobs, seed=7, backend=backend, progress=False, **kw)
    return ([h["scores"] for h in result.history],
            {k: v.tolist() for k, v in result.best_weights.items()})


def _scores(n_jobs, fallback=True, agent=None, backend=None):
    agent = agent or Sphere(dim=50)
    with Evaluator(agent, seed=3, n_jobs=n_jobs, backend=backend,
                   sequential_fallback=fallback) as ev:
        scored = ev.score(2, ev.local.get_flat(), MIXED)
        return scored.scores, scored.stats


@pytest.fixture(scope="module")
def reference():
    return _run(1)


def test_runs_identical_for_n_jobs_1_2_all(reference):
    assert _run(2) == reference
    assert _run(-1) == reference


def test_parallel_path_equals_in_process_path():
    alone, _ = _scores(1)
    forced, stats = _scores(2, fallback=False)
    assert stats["last_path"] == "parallel" and stats["parallel_generations"] == 1
    assert forced == alone


def test_workers_persist_across_runs_and_startup_is_timed_apart():
    with Evaluator(Sphere(dim=3), seed=0, n_jobs=2) as first:
        pids = first.worker_pids
        assert first.startup_seconds > 0 and first.stats["overhead_seconds"] > 0
    with Evaluator(Sphere(dim=3), seed=0, n_jobs=2) as second:
        assert second.worker_pids == pids and len(pids) == 2


def test_bytes_per_candidate_small_and_independent_of_parameter_count(monkeypatch):
    # one chunk per worker for both sizes: on a loaded machine the larger agent's
    # jitter can pass BALANCE_FROM, and claimed tasks send other (as small) messages
    monkeypatch.setattr(ChunkPolicy, "BALANCE_FROM", float("inf"))
    sent = {}
    for size in (10, 100_000):
        with Evaluator(BenchAgent(size=size), seed=0, n_jobs=2,
                       sequential_fallback=False) as ev:
            center = ev.local.get_flat()
            candidates = [Candidate("jitter", 0.1)] * 64
            ev.score(0, center, candidates)
            folder = ev.pool.files.folder
            with PipeCounter() as counter:
                ev.score(1, center, candidates)
            sent[size] = counter.bytes / 64
            # the centre went through a file, once, not through the pipe
            names = sorted(os.listdir(folder))
            assert len(names) == 2 and names[0].startswith("center-") and \
                names[1].startswith("skeleton")
        assert not os.path.exists(folder)  # removed on close
    assert 0 < sent[10] < 200
    assert abs(sent[100_000] - sent[10]) < 1.0, sent


def test_an_unchanged_centre_is_not_written_again():
    files = backends.SharedFiles()
    try:
        center = np.arange(5.0)
        first = files.put_array("center", center)
        written = files.bytes_written
        # another array with the same values: the same file, nothing written
        assert files.put_array("center", center.copy()) == first
        assert files.bytes_written == written
        center[0] = 7.0  # the caller changed its array in place: a new file
        moved = files.put_array("center", center)
        assert moved != first and backends.load(moved)[0] == 7.0
        assert not os.path.exists(first.path)
        zero = files.put_array("center", np.zeros(5))
        # bit for bit: -0.0 == 0.0, but a worker computing with it may differ
        assert files.put_array("center", -np.zeros(5)) != zero
    finally:
        files.close()


def test_same_bytes_compares_bits_not_values():
    same = backends.same_bytes
    assert same(np.zeros(3), np.zeros(3))
    assert not same(np.zeros(3), -np.zeros(3))
    assert same(np.full(2, np.nan), np.full(2, np.nan))
    assert not same(np.zeros(3), np.zeros(3, dtype=np.float32))
    assert not same(np.zeros(3), np.zeros(4))
    a = np.arange(6.0)
    assert same(a[::2], np.array([0.0, 2.0, 4.0]))  # not contiguous: compared all the same


def test_a_centre_that_stays_or_moves_gives_the_in_process_scores():
    """Workers keep the centre they loaded for an unchanged reference: a centre that
    stays for some generations and then moves is scored as in this process."""
    candidates = [Candidate("jitter", 0.1)] * 8
    centers = [np.zeros(10), np.zeros(10), np.ones(10), np.ones(10), np.zeros(10)]

    def scores(n_jobs):
        with Evaluator(BenchAgent(size=10), seed=3, n_jobs=n_jobs,
                       sequential_fallback=False) as ev:
            return [ev.score(g, c, candidates).scores for g, c in enumerate(centers)]

    assert scores(2) == scores(1)


def test_folders_of_dead_processes_are_swept(tmp_path, monkeypatch):
    dead = tmp_path / "es_search-999999999-x"  # no such pid
    alive = tmp_path / f"es_search-{os.getpid()}-y"
    other = tmp_path / "something-else"
    for folder in (dead, alive, other):
        folder.mkdir()
    monkeypatch.setattr(backends, "_shm_root", lambda: str(tmp_path))
    files = backends.SharedFiles()
    assert not dead.exists() and alive.exists() and other.exists()
    files.close()
    assert not os.path.exists(files.folder)


@pytest.mark.skipif(not os.path.isdir("/dev/shm") or not hasattr(os, "statvfs"),
                    reason="no /dev/shm")
def test_a_small_dev_shm_is_not_used(monkeypatch):
    """A container's /dev/shm is often 64 MB: the workers' files go to the temporary
    folder unless /dev/shm has SHM_MIN_FREE bytes free."""
    import collections
    import tempfile
    real = os.statvfs
    Stats = collections.namedtuple("Stats", "f_bavail f_frsize")
    free = {"bytes": 64 * 2 ** 20}
    monkeypatch.setattr(os, "statvfs", lambda path: Stats(free["bytes"] // 4096, 4096)
                        if str(path) == "/dev/shm" else real(path))
    files = backends.SharedFiles()
    try:
        assert os.path.dirname(files.folder) == tempfile.gettempdir()
    finally:
        files.close()
    free["bytes"] = backends.SHM_MIN_FREE + 4096
    if os.access("/dev/shm", os.W_OK):
        assert backends._shm_root() == "/dev/shm"


def test_thread_backend_is_refused():
    with pytest.raises(ValueError, match="thread-based"):
        Evaluator(Sphere(dim=3), seed=0, n_jobs=2, backend="threading")  # at construction
    Evaluator(Sphere(dim=3), seed=0, n_jobs=1, backend="threading")  # no workers: fine


def test_parallel_config_backend_is_used(reference):
    with joblib.parallel_config(backend="multiprocessing"):
        assert _run(2) == reference


def test_the_users_joblib_works_after_a_run_on_loky():
    """es_search keeps loky workers of its own between runs: loky's reusable executor
    is joblib's, which assumes it made it (a joblib.Parallel after a run failed)."""
    _scores(2, fallback=False)
    assert joblib.Parallel(n_jobs=2)(joblib.delayed(abs)(-i) for i in range(4)) == [0, 1, 2, 3]
    _scores(2, fallback=False)  # and es_search after joblib


def test_a_run_after_the_workers_were_released_starts_new_ones_without_a_retry():
    """The command releases its workers when its work is done; a run after that (or
    after a library user's release) starts new ones, not a retry on the ended ones."""
    import warnings
    from es_search.interrupt import release_workers
    _scores(2, fallback=False)
    release_workers()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a retry warns
        assert _scores(2, fallback=False)[0] == _scores(1)[0]


def test_dask_without_client_says_how_to_make_one(monkeypatch):
    distributed = pytest.importorskip("distributed")

    def no_client():
        raise ValueError("No clients found")

    monkeypatch.setattr(distributed, "get_client", no_client)
    with pytest.raises(ValueError, match="Client"):
        Evaluator(Sphere(dim=3), seed=0, backend="dask")


def test_missing_ray_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(ImportError, match=r"\[ray\]"):
        Evaluator(Sphere(dim=3), seed=0, backend="ray")


@pytest.fixture(scope="module")
def dask_client():
    distributed = pytest.importorskip("distributed")
    cluster = distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                       dashboard_address=None)
    client = distributed.Client(cluster)
    yield client
    client.close()
    cluster.close()


def test_dask_local_cluster_gives_the_loky_result(dask_client, reference):
    assert _run(-1, backend="dask") == reference
    with joblib.parallel_config(backend="dask"):
        assert _run(-1) == reference
    forced, stats = _scores(-1, fallback=False, backend="dask")
    assert stats["last_path"] == "parallel"
    assert forced == _scores(1)[0]


def test_cli_scheduler_refuses_another_backend(capsys):
    code = cli_main(["run", "sphere", "--scheduler", "tcp://127.0.0.1:8786",
                     "--backend", "loky"])
    assert code == 2
    assert "--scheduler" in capsys.readouterr().err


def test_amdahl_fit_recovers_the_serial_fraction():
    f, ceil = 0.1, {n: {"efficiency": 1.0} for n in (1, 2, 4, 8)}
    rows = [{"cost": "1ms", "size": 10, "pop": 64, "n": n, "paths": ["parallel"],
             "speedup": 1 / (f + (1 - f) / n), "task_s": 1e-3,
             "engine_s": 64e-3 * (f + (1 - f) / n)} for n in (2, 4, 8)]
    model = fit_models(rows, ceil, None)
    assert model["amdahl_serial_fraction"]["1ms"] == pytest.approx(f)
    # a machine that gives n processes only 90% each: the engine's own fraction remains
    slow = {n: {"efficiency": 1.0 if n == 1 else 0.9} for n in (1, 2, 4, 8)}
    for r in rows:
        r["speedup"] *= 0.9
    model = fit_models(rows, slow, None)
    assert model["amdahl_serial_fraction"]["1ms"] == pytest.approx(f)


@pytest.mark.slow
@pytest.mark.skipif(joblib.cpu_count() < 2, reason="needs 2 cores")
def test_es_search_bench_prints_and_writes_its_json(tmp_path, capsys):
    assert cli_main(["bench", "--quick", "--n-jobs", "1,2", "--out", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "bench.json").read_text())
    rows = result["rows"]
    assert [(r["score_ms"], r["n_jobs"]) for r in rows] == [
        (ms, n) for ms in (0, 1, 10) for n in (1, 2)]
    assert all(r["generation_s"] > 0 for r in rows)
    for one, two in zip(rows[::2], rows[1::2]):
        assert one["speedup"] == 1.0
        assert two["speedup"] == pytest.approx(one["generation_s"] / two["generation_s"])
    # 10 ms scores: 64 of them take at least 0.3 s in all, whatever the workers
    assert all(r["generation_s"] > 0.3 / max(r["n_jobs"], 1) for r in rows[-2:])
    out = capsys.readouterr().out
    assert "| 10 ms | 2 |" in out and "bench.json" in out
    assert cli_main(["bench", "--n-jobs", "0,1", "--out", str(tmp_path)]) == 2
    assert "--n-jobs values go from 1" in capsys.readouterr().err


@pytest.mark.slow
def test_benchmark_runs_end_to_end(tmp_path, capsys):
    # the harness measures and reports: no targets, no README
    lib, repo = tmp_path / "lib", tmp_path / "repo"
    script = scaling_script()
    assert script["main"](["--tiny", "--out", str(lib)]) == 0
    result = json.loads((lib / "scaling.json").read_text())
    n_cpus = joblib.cpu_count()  # the cores n_jobs=-1 uses, as the benchmark counts them
    assert {r["n"] for r in result["rows"]} == set(range(1, min(n_cpus, 8) + 1)) or \
        max(r["n"] for r in result["rows"]) == n_cpus
    assert all(r["engine_s"] > 0 and r["blog_s"] > 0 for r in result["rows"])
    if n_cpus > 1:  # the overhead model's costs, measured on trivial scores in the workers
        over = result["overheads"]
        assert [p[0] for p in over["points"]] == [1, 8, 32] and over["n"] == n_cpus
        assert result["model"]["overhead_per_task_s"] == over["per_task_s"]
        assert over["task_s"] > 0 and over["per_generation_s"] > 0
    assert (lib / "scaling.png").stat().st_size > 1000
    # benchmarks/scaling.py judges the targets of that run and rewrites the README
    readme = tmp_path / "README.md"
    readme.write_text("before\n<!-- scaling-table:begin -->\nOLD-TABLE\n"
                      "<!-- scaling-table:end -->\nafter\n")
    assert script["main"](["--render", str(lib / "scaling.json"), "--out", str(repo),
                           "--readme", str(readme)]) == 0
    result = json.loads((repo / "scaling.json").read_text())
    assert result["targets"] and all("met" in t for t in result["targets"])
    text = readme.read_text()
    assert "OLD-TABLE" not in text and "| score | pop |" in text and text.endswith("after\n")
    assert "Core-scaling targets, from this run:" in text and " met" in text
    assert (repo / "scaling.png").stat().st_size > 1000
    with pytest.raises(ValueError, match="markers"):
        script["update_readme"](str(repo / "scaling.md"), "x")
    with pytest.raises(SystemExit):  # refused before measuring
        script["main"](["--tiny", "--out", str(repo), "--readme", str(repo / "scaling.md")])
    assert "markers" in capsys.readouterr().err


def test_committed_results_are_reproduced_by_render(tmp_path):
    """benchmarks/results/scaling.md is what --render makes of the committed scaling.json:
    every figure in it comes from the saved measurements."""
    assert scaling_script()["main"](["--render", os.path.join(RESULTS, "scaling.json"),
                                     "--out", str(tmp_path)]) == 0
    with open(os.path.join(RESULTS, "scaling.md")) as f:
        assert (tmp_path / "scaling.md").read_text() == f.read()


def test_cli_runs_on_a_dask_scheduler(dask_client, capsys):
    address = dask_client.scheduler.address
    assert cli_main(["run", "sphere", "--scheduler", address, "--generations", "2",
                     "--population", "4", "--no-progress"]) == 0
    assert "best score" in capsys.readouterr().out


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs CPU affinity")
def test_the_benchmark_counts_the_cores_this_process_may_use(tmp_path):
    """Pinned to one core (as a container's quota or taskset pins it), the benchmark
    measures n_jobs=1 only, as n_jobs=-1 would use, and says no model was fitted."""
    code = ("import os, runpy, sys; "
            "os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]}); "
            "script = runpy.run_path('benchmarks/scaling.py', run_name='x'); "
            f"sys.exit(script['main'](['--tiny', '--out', {str(tmp_path)!r}]))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": ROOT})
    assert done.returncode == 0, done.stderr
    result = json.loads((tmp_path / "scaling.json").read_text())
    assert {r["n"] for r in result["rows"]} == {1} and result["machine"]["cpus"] == 1
    assert "no parallel generation was measured" in (tmp_path / "scaling.md").read_text()


def test_the_benchmark_harness_doctests_pass():
    """pytest's --doctest-modules leaves benchmarks/ out: the harness's examples run here."""
    import doctest
    import importlib
    for name in ("command", "measure", "model", "report", "stats"):
        module = importlib.import_module(f"benchmarks.harness.{name}")
        results = doctest.testmod(module)
        assert results.attempted > 0 and results.failed == 0, name
