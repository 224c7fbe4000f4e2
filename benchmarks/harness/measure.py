"""Measuring the scaling benchmark: one generation of scoring, timed scheme by scheme.

For each ``n`` workers and configuration (score cost, agent size, population),
:func:`measure_block` times, interleaved rep by rep so that each ratio compares figures
taken moments apart: es_search's :class:`~es_search.Evaluator` at ``n_jobs=1``
and at ``n``, the blog post's Pool scheme and a plain joblib loop (see
:mod:`benchmarks.harness.schemes`). :func:`measure` runs the whole grid of a mode plus worker
start-up, the ceiling (before and after) and the bytes per candidate; it returns raw
measurements, which :func:`benchmarks.harness.model.analyse` turns into figures.
"""
from __future__ import annotations

import math
import multiprocessing
import os
import platform
import statistics
import time
from typing import Any, Iterable, Sequence

import numpy as np
import torch

from es_search.agent import Agent
from es_search.candidates import Candidate
from es_search.front import Evaluator
from ..provenance import commit
from .model import path_kind
from .schemes import PipeCounter, blog_generation, ceiling, joblib_generation
from .workloads import COST_SECONDS, SIGMA, BenchAgent, calibrate, make_agent

MODES = {
    # mode: (reps, [(cost, size, pops)], payload pop, ceiling loops in seconds of work)
    "full": (5, [("trivial", 10, (8, 64, 256)), ("1ms", 10, (8, 64, 256)),
                 ("10ms", 10, (8, 64, 256)), ("blog", 10, (8, 64, 256)),
                 ("trivial", 10**4, (8, 32, 64)), ("1ms", 10**4, (8, 32, 64)),
                 ("trivial", 10**6, (8, 32, 64)), ("1ms", 10**6, (8, 32))], 64, 0.3),
    "quick": (2, [("trivial", 10, (8, 64)), ("1ms", 10, (64,)), ("10ms", 10, (64,)),
                  ("blog", 10, (8,)), ("trivial", 10**4, (32,)),
                  ("trivial", 10**6, (32,))], 64, 0.15),
    "tiny": (1, [("trivial", 10, (4,)), ("1ms", 10, (8,))], 8, 0.02),
}


def _cold_start(n: int, agent: Agent) -> dict:
    """Worker start-up for ``n`` workers: cold (fresh executor) and reused."""
    from joblib.externals.loky import get_reusable_executor
    get_reusable_executor().shutdown(wait=True)
    out = {}
    for label in ("cold_s", "reused_s"):
        with Evaluator(agent, seed=0, n_jobs=n) as ev:
            out[label] = ev.startup_seconds
            pids = sorted(ev.worker_pids)
        out.setdefault("pids", []).append(pids)
    out["workers_reused"] = out["pids"][0] == out["pids"][1]
    rss = []
    for pid in out["pids"][0]:
        try:
            with open(f"/proc/{pid}/status") as f:
                rss += [int(line.split()[1]) / 1024 for line in f if line.startswith("VmRSS")]
        except OSError:
            pass
    out["worker_rss_mb"] = statistics.mean(rss) if rss else None
    del out["pids"]
    return out


def _time(fn: Any) -> tuple[float, int]:
    with PipeCounter() as counter:
        began = time.perf_counter()
        fn()
        seconds = time.perf_counter() - began
    return seconds, counter.bytes


def moved(center: np.ndarray) -> np.ndarray:
    """The next generation's centre: ``center`` with its first value changed."""
    center = center.copy()
    center[0] += 1e-3
    return center


def shared_bytes(ev: Evaluator) -> int:
    """Bytes the engine's pool has written to its shared files (0: no pool)."""
    files = getattr(ev.pool, "files", None)
    return files.bytes_written if files is not None else 0


def measure_block(cost: str, size: int, pop: int, n: int, reps: int, loops: dict,
                  n_cpus: int) -> dict:
    """Time every scheme on one configuration at ``n`` workers, interleaved."""
    parent = make_agent(cost, size, loops)
    n_jobs = -1 if n == n_cpus else n
    candidates = [Candidate("jitter", SIGMA)] * pop
    rows: dict[str, list] = {"engine1": [], "engine": [], "blog": [], "joblib": []}
    paths, shm = [], []
    with Evaluator(parent, seed=0, n_jobs=1) as one, \
            Evaluator(parent, seed=0, n_jobs=n_jobs) as many:
        center = one.local.get_flat()
        for ev in (one, many):  # as run() does: the start agent's score, in-process
            ev.score(-1, center, [Candidate("center")])
        generation = 0
        # let the engine's fallback settle, as it does over the first generations of a
        # run (up to 5 generations or 0.3 s)
        began = time.perf_counter()
        while generation < 5 and time.perf_counter() - began < 0.3:
            center = moved(center)
            many.score(generation, center, candidates)
            generation += 1
        for rep in range(reps + 1):  # rep 0 warms every path up and is not recorded
            # a new centre every generation, as an ES strategy moves it (an unchanged
            # centre is not sent again: that would flatter the large agents' figures)
            center = moved(center)
            # n_jobs=1 and n_jobs=n take turns to go first (the first one after the
            # blog scheme's fork runs on colder caches)
            files = shared_bytes(many)
            if rep % 2:
                t_one = _time(lambda: one.score(generation, center, candidates))
            t_many = (None if n == 1 else
                      _time(lambda: many.score(generation, center, candidates)))
            if not rep % 2:
                t_one = _time(lambda: one.score(generation, center, candidates))
            t_many = t_one if t_many is None else t_many
            path = many.stats["last_path"] or "in-process"
            files = shared_bytes(many) - files
            t_blog = _time(lambda: blog_generation(parent, pop, n))
            t_job = _time(lambda: joblib_generation(parent, pop, n))
            generation += 1
            if rep == 0:
                continue
            rows["engine1"].append(t_one)
            rows["engine"].append(t_many)
            rows["blog"].append(t_blog)
            rows["joblib"].append(t_job)
            paths.append(path)
            shm.append(files)
        stats = dict(many.stats)
    out: dict[str, Any] = {"cost": cost, "size": parent.num_evolved(), "pop": pop, "n": n,
                           "n_jobs": n_jobs, "paths": paths,
                           "engine_overhead_estimate_s": stats["overhead_seconds"],
                           "shared_file_bytes_per_generation": max(shm) if shm else 0}
    for name, values in rows.items():
        out[f"{name}_s"] = statistics.median(v[0] for v in values)
        out[f"{name}_bytes_per_candidate"] = max(v[1] for v in values) / pop
    return out


def measure_overheads(n: int, reps: int) -> dict:
    """What the workers add to scoring, ``T = a + ceil(P / n) (t + h)`` per generation
    of ``P`` tasks of ``t`` seconds on ``n`` workers: trivial scores of a 10-parameter
    agent sent to the workers (no in-process fallback) and scored in this process, at
    populations ``n``, ``8 n`` and ``32 n``, all taking turns generation by generation;
    the median of ``reps`` generations each (after one warm one), fitted by least
    squares: ``a`` the workers' intercept, ``h`` their slope less this process's per
    task (the task's own cost, ``t``, counted in the model already)."""
    agent = make_agent("trivial", 10, {"trivial": 0})
    pops = (n, 8 * n, 32 * n)
    times: dict[tuple, list[float]] = {(w, pop): [] for w in (1, n) for pop in pops}
    with Evaluator(agent, seed=0, n_jobs=n, sequential_fallback=False) as many, \
            Evaluator(agent, seed=0, n_jobs=1) as one:
        center, generation = many.local.get_flat(), 0
        for rep in range(reps + 1):
            for pop in pops:
                center = moved(center)
                for w, ev in ((n, many), (1, one)):
                    seconds = _time(lambda: ev.score(generation, center,
                                                     [Candidate("jitter", SIGMA)] * pop))[0]
                    if rep:
                        times[w, pop].append(seconds)
                generation += 1
    ks = [math.ceil(pop / n) for pop in pops]
    fits = {w: np.polyfit(ks, [statistics.median(times[w, pop]) for pop in pops], 1)
            for w in (1, n)}
    (slope, a), task = fits[n], fits[1][0] / n  # in this process: n tasks per k
    return {"n": n, "per_generation_s": float(a), "per_task_s": float(slope - task),
            "task_s": float(task),
            "points": [(k, statistics.median(times[n, pop]), statistics.median(times[1, pop]))
                       for k, pop in zip(ks, pops)]}


def measure_payload(sizes: Sequence[int], pop: int, n: int) -> list[dict]:
    """Bytes through the pipe per candidate on the parallel path (fallback off), with one
    chunk per worker (the comparison across sizes) and with the engine's own hand-out
    (tasks of 2 ms or more, such as building a 10^6-parameter candidate, are claimed: each
    worker's call carries the whole generation's candidates)."""
    out = []
    for size in sizes:
        agent = BenchAgent(size=size)
        row: dict[str, Any] = {"size": size, "pop": pop, "n": n}
        for label in ("one_chunk", "engine"):
            with Evaluator(agent, seed=0, n_jobs=n, sequential_fallback=False) as ev:
                if label == "one_chunk":
                    ev.chunking.BALANCE_FROM = float("inf")
                center = ev.local.get_flat()
                candidates = [Candidate("jitter", SIGMA)] * pop
                ev.score(0, center, candidates)  # warm: the file name's length is fixed
                files = shared_bytes(ev)
                center = moved(center)
                _, sent = _time(lambda: ev.score(1, center, candidates))
                files = shared_bytes(ev) - files
                chunks = len(ev.chunking.bounds(pop, ev.policy))
            if label == "one_chunk":
                row.update(bytes_per_candidate=sent / pop, shared_file_bytes_per_generation=files)
            else:
                row.update(engine_chunks=chunks, engine_bytes_per_candidate=sent / pop)
        out.append(row)
    return out


def default_n_values(n_cpus: int) -> list[int]:
    """1 to ``n_cpus`` up to 8 cores; beyond, powers of two and ``n_cpus``.

    >>> default_n_values(2), default_n_values(20)
    ([1, 2], [1, 2, 4, 8, 16, 20])
    """
    if n_cpus <= 8:
        return list(range(1, n_cpus + 1))
    values = {1, n_cpus}
    k = 2
    while k < n_cpus:
        values.add(k)
        k *= 2
    return sorted(values)


def cpu_model() -> str:
    """The processor's model name (``/proc/cpuinfo``; ``platform.processor()`` elsewhere),
    or ``""``: two machines of one kind can differ several-fold in a benchmark's times."""
    import platform
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def load_average() -> str:
    """The machine's 1, 5 and 15 minute load averages, as a benchmark reports them."""
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:  # pragma: no cover
        return "n/a"


def measure(mode: str = "quick", n_values: Iterable[int] | None = None,
            log: Any = print) -> dict:
    """Run every measurement of ``mode``; returns them as a JSON-able dict (no figures
    derived: see :func:`benchmarks.harness.model.analyse`)."""
    import joblib
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}; got {mode!r}")
    began = time.perf_counter()
    n_cpus = joblib.cpu_count()  # what n_jobs=-1 uses: affinity and cgroup quotas
    n_values = sorted(set(n_values or default_n_values(n_cpus)) | {1})
    if max(n_values) > n_cpus:
        raise ValueError(f"n_jobs values go up to the {n_cpus} cores of this machine")
    reps, grid, payload_pop, ceiling_s = MODES[mode]
    result: dict[str, Any] = {
        "mode": mode, "reps": reps, "n_values": n_values,
        "machine": {"cpus": n_cpus, "processor": platform.processor(),
                    "machine": platform.machine(), "python": platform.python_version(),
                    "torch": torch.__version__, "joblib": joblib.__version__,
                    "start_method": multiprocessing.get_start_method(),
                    "load_start": load_average(), "commit": commit()}}
    log(f"calibrating on {n_cpus} cores (load {result['machine']['load_start']})")
    loops = {"trivial": 0}
    result["calibration"] = {}
    for cost in ("1ms", "10ms"):
        cal = calibrate(COST_SECONDS[cost])
        loops[cost] = cal["loops"]
        result["calibration"][cost] = cal
    n_top = max(n_values)
    log(f"worker start-up, n_jobs={n_top}")
    result["startup"] = {"n": n_top, **_cold_start(n_top, BenchAgent())}
    log("ceiling: independent processes side by side")
    ceil_loops = max(1, round(ceiling_s / (result["calibration"]["1ms"]["ns_per_loop"] * 1e-9)))
    first = ceiling(n_values, ceil_loops, reps=max(3, reps))
    rows = []
    for n in n_values:
        for cost, size, pops in grid:
            for pop in pops:
                row = measure_block(cost, size, pop, n, reps, loops, n_cpus)
                log(f"n={n} {cost:>7} pop {pop:>3} {row['size']:>8g} params: engine "
                    f"{row['engine_s'] * 1e3:8.1f} ms ({path_kind(row)}), blog "
                    f"{row['blog_s'] * 1e3:8.1f} ms, joblib {row['joblib_s'] * 1e3:8.1f} ms, "
                    f"n_jobs=1 {row['engine1_s'] * 1e3:8.1f} ms")
                rows.append(row)
    # measured again at the end: a load spike during one measurement can only lower the
    # efficiency, so the higher of the two is the better estimate of what the machine gives
    log("ceiling again, after the measurements")
    again = ceiling(n_values, ceil_loops, reps=max(3, reps))
    result["ceiling_runs"] = [first, again]
    result["ceiling"] = {n: max(first[n], again[n], key=lambda c: c["efficiency"])
                         for n in n_values}
    result["rows"] = rows
    if n_top > 1:
        log(f"the engine's overheads on {n_top} workers (trivial scores)")
        result["overheads"] = measure_overheads(n_top, max(5, reps))
    n_payload = 2 if n_cpus >= 2 else 1
    sizes = sorted({size for _, size, _ in grid} | {10, 10**4, 10**6}) if mode != "tiny" \
        else [10, 10**3]
    result["payload"] = measure_payload(sizes, payload_pop, n_payload) if n_cpus >= 2 else []
    result["machine"]["load_end"] = load_average()
    result["seconds"] = time.perf_counter() - began
    return result
