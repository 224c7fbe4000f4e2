"""Measuring Dask (or Ray) against loky: ``benchmarks/cluster.py``.

Everything runs in one process, side by side, interleaved rep by rep (each ratio
compares figures taken moments apart), with the sequential fallback off:

- **generation time** at trivial, 1 ms and 10 ms scores (calibrated pure-Python work,
  population 64), loky with ``n`` workers against the cluster's ``n`` workers;
- **per-generation and per-task overhead** of each: trivial scores at populations
  ``n``, ``8n`` and ``32n``, a straight line through generation time against tasks per
  worker (intercept: per generation; slope: per task);
- **bytes per generation** for 10, 10^4 and 10^6 parameters, as hill-climbing makes
  them (the centre is the previous one or its winner) and as a strategy whose centre
  moves in a way workers cannot derive makes them (a new vector each generation):
  every byte dask.distributed writes to its TCP connections in this process, the
  scheduler and the workers (:class:`ByteCounter`); for loky, this process's pipe
  writes plus the shared-memory files it writes;
- the byte figure of the targets: a whole ``run()`` (hill-climb, 10^6 parameters, population
  16, 5 generations) on the cluster;
- a **simulated large cluster** (:func:`simulate`): many worker processes on this
  machine with sleep-based scores, to fit and check the cost model of
  :mod:`benchmarks.harness.cluster_model`.
"""
from __future__ import annotations

import logging
import math
import os
import statistics
import time
from typing import Any, Callable, Sequence

import joblib  # joblib.cpu_count(): the cores n_jobs=-1 uses (affinity, cgroup quotas)
import numpy as np
import torch

from es_search.agent import Agent
from es_search.candidates import Candidate
from es_search.front import Evaluator
from ..provenance import commit
from .measure import load_average, shared_bytes
from .schemes import PipeCounter
from .workloads import BenchAgent, calibrate

SIGMA = 0.1


class SleepAgent(Agent):
    """``size`` float32 parameters; ``score()`` sleeps ``seconds`` (no CPU: many of
    them fit on a small machine, as the workers of a large cluster would)."""

    def __init__(self, size: int = 10, seconds: float = 0.01):
        super().__init__()
        self.seconds = float(seconds)
        self.w = torch.nn.Parameter(torch.zeros(int(size)), requires_grad=False)

    def score(self, **kwargs: Any) -> float:
        time.sleep(self.seconds)
        return float(self.w[0])


# --------------------------------------------------------------------- bytes written
_SENT = [0]


def _count_tcp_writes() -> int:
    """In any process: make dask.distributed's TCP comms count the bytes they write
    (``TCP.write`` returns them); returns the count so far."""
    from distributed.comm import tcp
    if not getattr(tcp.TCP.write, "_es_search_counting", False):
        original = tcp.TCP.write

        async def write(self: Any, *args: Any, **kwargs: Any) -> int:
            n = await original(self, *args, **kwargs)
            _SENT[0] += n or 0
            return n

        write._es_search_counting = True
        tcp.TCP.write = write
    return _SENT[0]


def _scheduler_sent(dask_scheduler: Any = None) -> tuple[int, int]:
    return os.getpid(), _count_tcp_writes()


class ByteCounter:
    """Bytes that dask.distributed writes to its TCP connections, in this process, the
    scheduler and every worker (what ``TCP.write`` reports: frames and headers). A
    scheduler running in this process (a LocalCluster) is counted once. Installed in
    each process on first use."""

    def __init__(self, client: Any = None):
        self.client = client
        self.noise = 0
        if client is not None:
            self.read()  # installs the counting
            empty = []
            for _ in range(3):  # what reading the counters itself writes
                with self:
                    pass
                empty.append(self.bytes)
            self.noise = sorted(empty)[1]

    def read(self) -> int:
        total = _count_tcp_writes()
        if self.client is not None:
            pid, scheduler = self.client.run_on_scheduler(_scheduler_sent)
            if pid != os.getpid():
                total += scheduler
            total += sum(self.client.run(_count_tcp_writes).values())
        return total

    def __enter__(self) -> "ByteCounter":
        self.bytes = 0
        self._start = self.read()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.bytes = self.read() - self._start - self.noise


class LokyBytes:
    """loky's bytes: this process's pipe writes plus the shared-memory files."""

    def __init__(self, evaluator: Evaluator):
        self.evaluator = evaluator

    def __enter__(self) -> "LokyBytes":
        self._files = shared_bytes(self.evaluator)
        self._pipe = PipeCounter().__enter__()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._pipe.__exit__(*exc_info)
        self.bytes = self._pipe.bytes + shared_bytes(self.evaluator) - self._files


# --------------------------------------------------------------------- generations
def _generation(ev: Evaluator, generation: int, center: np.ndarray,
                candidates: list[Candidate]) -> float:
    began = time.perf_counter()
    ev.score(generation, center, candidates)
    return time.perf_counter() - began


def interleaved(evaluators: dict[str, Evaluator], candidates: list[Candidate],
                reps: int, warm: int = 3) -> dict[str, list[float]]:
    """Seconds per generation of each evaluator, taken in turn, ``reps`` times (after
    ``warm`` unrecorded generations each)."""
    centers = {k: ev.local.get_flat() for k, ev in evaluators.items()}
    times: dict[str, list[float]] = {k: [] for k in evaluators}
    for rep in range(warm + reps):
        for key, ev in evaluators.items():
            seconds = _generation(ev, rep, centers[key], candidates)
            if rep >= warm:
                times[key].append(seconds)
    return times


def open_pair(agent: Agent, n: int, backend: Any) -> dict[str, Evaluator]:
    """loky with ``n`` workers and ``backend`` (capped at ``n`` workers), fallback off."""
    return {"loky": Evaluator(agent, seed=0, n_jobs=n, sequential_fallback=False),
            "cluster": Evaluator(agent, seed=0, n_jobs=n, backend=backend,
                                 sequential_fallback=False)}


def measure_generations(backend: Any, n: int, loops: dict, reps: int,
                        log: Callable = print) -> list[dict]:
    """Generation time of loky and the cluster at each score cost, population 64."""
    rows = []
    for cost in ("trivial", "1ms", "10ms"):
        pair = open_pair(BenchAgent(size=10, loops=loops[cost]), n, backend)
        with pair["loky"], pair["cluster"]:
            times = interleaved(pair, [Candidate("jitter", SIGMA)] * 64, reps)
        row = {"cost": cost, "pop": 64, "n": n,
               **{f"{k}_s": statistics.median(v) for k, v in times.items()},
               **{f"{k}_all_s": v for k, v in times.items()}}
        row["ratio"] = row["cluster_s"] / row["loky_s"]
        log(f"{cost:>7} pop 64: loky {row['loky_s'] * 1e3:7.1f} ms, cluster "
            f"{row['cluster_s'] * 1e3:7.1f} ms ({row['ratio']:.2f}x)")
        rows.append(row)
    return rows


def measure_overheads(backend: Any, n: int, reps: int, log: Callable = print) -> dict:
    """Per-generation and per-task overhead of loky and the cluster (trivial scores)."""
    pops = (n, 8 * n, 32 * n)
    points: dict[str, list[tuple[float, float]]] = {"loky": [], "cluster": []}
    pair = open_pair(BenchAgent(size=10), n, backend)
    with pair["loky"], pair["cluster"]:
        for pop in pops:
            times = interleaved(pair, [Candidate("jitter", SIGMA)] * pop, reps)
            for key, values in times.items():
                points[key].append((pop / n, statistics.median(values)))
    out = {}
    for key, pts in points.items():
        slope, intercept = np.polyfit([k for k, _ in pts], [t for _, t in pts], 1)
        out[key] = {"per_generation_s": max(0.0, float(intercept)),
                    "per_task_s": max(0.0, float(slope)), "points": pts}
        log(f"{key}: {out[key]['per_generation_s'] * 1e3:.2f} ms per generation, "
            f"{out[key]['per_task_s'] * 1e6:.0f} us per task")
    return out


def _hill_climb_generation(ev: Evaluator, g: int, center: np.ndarray,
                           candidates: list[Candidate]) -> np.ndarray:
    scores = ev.score(g, center, candidates).scores
    best = int(np.argmax(scores))
    return ev.rebuild(g, center, candidates[best], best)


def measure_bytes(client: Any, backend: Any, n: int, sizes: Sequence[int] = (10, 10**4, 10**6),
                  pop: int = 16, generations: int = 3, log: Callable = print) -> list[dict]:
    """Bytes per generation, loky and the cluster, for hill-climb-like centres (kept or
    derived) and for centres that move anew each generation (sent whole)."""
    rows = []
    candidates = [Candidate("jitter", SIGMA)] * pop
    rng = np.random.default_rng(0)
    for size in sizes:
        row: dict[str, Any] = {"size": size, "pop": pop, "n": n}
        pair = open_pair(BenchAgent(size=size), n, backend)
        with pair["loky"], pair["cluster"]:
            for key, ev in pair.items():
                counter_of = (lambda: LokyBytes(ev)) if key == "loky" else \
                    (lambda: ByteCounter(client))
                center = ev.local.get_flat()
                center = _hill_climb_generation(ev, 0, center, candidates)  # warm
                with counter_of() as counted:
                    for g in range(1, generations + 1):
                        center = _hill_climb_generation(ev, g, center, candidates)
                row[f"{key}_hill_climb_bytes"] = counted.bytes / generations
                moved = ev.local.get_flat() + rng.standard_normal(size).astype(np.float32)
                ev.score(100, moved, candidates)  # warm
                steps = [0.01 * rng.standard_normal(size) for _ in range(generations)]
                with counter_of() as counted:
                    began = time.perf_counter()
                    for g, step in enumerate(steps, 101):
                        moved = moved + step
                        ev.score(g, moved, candidates)
                    seconds = time.perf_counter() - began
                row[f"{key}_moving_bytes"] = counted.bytes / generations
                row[f"{key}_moving_s"] = seconds / generations
        log(f"{size:>8g} params: bytes per generation, hill-climb loky "
            f"{row['loky_hill_climb_bytes']:,.0f} / cluster {row['cluster_hill_climb_bytes']:,.0f};"
            f" moving centre loky {row['loky_moving_bytes']:,.0f} / cluster "
            f"{row['cluster_moving_bytes']:,.0f}")
        rows.append(row)
    return rows


def measure_run_bytes(client: Any, backend: Any, size: int = 10**6, pop: int = 16,
                      generations: int = 5, log: Callable = print) -> dict:
    """The targets' figure: bytes of a whole hill-climb run on the cluster, its
    ``generations`` generations of ``pop`` candidates (``bytes``: without the end's
    selection test), and of the same run with it (``bytes_with_selection``: the test
    sends each distinct weights it compares, e.g. an earlier centre, to the workers)."""
    import es_search
    from es_search.selection import SELECT_TASKS
    out = {"size": size, "pop": pop, "generations": generations, "select_tasks": SELECT_TASKS}
    for key, select_tasks in (("bytes", 0), ("bytes_with_selection", SELECT_TASKS)):
        with ByteCounter(client) as counted:
            es_search.run(BenchAgent(size=size), generations=generations, population=pop,
                          sigma=SIGMA, n_jobs=-1, backend=backend, sequential_fallback=False,
                          progress=False, select_tasks=select_tasks)
        out[key] = counted.bytes
        log(f"run(): {size:g} params, population {pop}, {generations} generations, "
            f"select_tasks={select_tasks}: {counted.bytes / 1e6:.2f} MB written by all "
            f"processes")
    return out


# --------------------------------------------------------------------- simulated cluster
def _cpu() -> float:
    return time.process_time()


class _QuietClose:
    """Hides the warnings of ``logger`` from :meth:`arm` to the end of the block: a
    LocalCluster of many simulated workers on a few cores logs "Worker process still
    alive after 4.0 seconds, killing" for workers its nanny kills while closing."""

    def __init__(self, logger: str):
        self.logger = logging.getLogger(logger)
        self.level = self.logger.level

    def __enter__(self) -> _QuietClose:
        return self

    def arm(self) -> None:
        self.logger.setLevel(logging.ERROR)

    def __exit__(self, *exc: Any) -> None:
        self.logger.setLevel(self.level)


def simulate(worker_counts: Sequence[int], seconds: float = 0.01, per_worker: int = 4,
             reps: int = 3, size: int = 10, log: Callable = print) -> list[dict]:
    """Generation times on LocalClusters of ``worker_counts`` single-thread processes,
    scores sleeping ``seconds``, population ``per_worker`` per worker; with the CPU
    seconds per generation of this process (client and scheduler) and of all workers
    together (on a small machine many workers compete for its cores)."""
    from es_search.extras import require
    distributed = require("distributed", "dask")
    rows = []
    candidates_of = lambda n: [Candidate("jitter", SIGMA)] * (per_worker * n)  # noqa: E731
    for n in worker_counts:
        with _QuietClose("distributed.nanny") as quiet, \
                distributed.LocalCluster(n_workers=n, processes=True, threads_per_worker=1,
                                         dashboard_address=":0", memory_limit=0) as cluster, \
                distributed.Client(cluster) as client:
            client.wait_for_workers(n, timeout=600)
            with Evaluator(SleepAgent(size=size, seconds=seconds), seed=0, n_jobs=-1,
                           backend=client, sequential_fallback=False) as ev:
                center = ev.local.get_flat()
                for g in range(2):  # warm
                    ev.score(g, center, candidates_of(n))
                workers_cpu = sum(client.run(_cpu).values())
                client_cpu = _cpu()
                times = [_generation(ev, g, center, candidates_of(n))
                         for g in range(2, 2 + reps)]
                client_cpu = (_cpu() - client_cpu) / reps
                workers_cpu = (sum(client.run(_cpu).values()) - workers_cpu) / reps
                workers = ev.n_workers
            quiet.arm()  # tens of workers on a few cores close slower than a nanny waits
        t = statistics.median(times)
        rows.append({"n": n, "workers": workers, "pop": per_worker * n, "score_s": seconds,
                     "generation_s": t, "overhead_s": t - per_worker * seconds,
                     "client_cpu_s": client_cpu, "workers_cpu_s": workers_cpu,
                     "cores": joblib.cpu_count()})
        log(f"simulated {n:>3} workers, population {per_worker * n:>4}: {t * 1e3:7.1f} ms per "
            f"generation ({(t - per_worker * seconds) * 1e3:.1f} ms beyond the scores; CPU "
            f"per generation: this process {client_cpu * 1e3:.1f} ms, workers "
            f"{workers_cpu * 1e3:.1f} ms)")
    return rows


def calibrated_loops() -> dict:
    return {"trivial": 0, "1ms": calibrate(1e-3)["loops"], "10ms": calibrate(1e-2)["loops"]}


def tasks_per_worker(pop: int, n: int) -> int:
    return math.ceil(pop / max(1, min(pop, n)))


# --------------------------------------------------------------------- the whole run
def measure_cluster(backend: Any, client: Any, n: int, mode: str = "full",
                    simulate_counts: Sequence[int] = (2, 4, 8, 16, 32, 64),
                    log: Callable = print) -> dict:
    """Everything ``benchmarks/cluster.py`` reports, as a JSON-able dict.
    ``mode``: "full", "quick" (fewer repetitions) or "tiny" (a smoke test). ``client``:
    the Dask client whose bytes are counted; None (Ray): generation times and overheads
    only (the bytes are Dask's TCP writes, the simulated clusters LocalClusters)."""
    import platform
    reps = {"full": 7, "quick": 3, "tiny": 1}[mode]
    sizes = (10, 1000) if mode == "tiny" else (10, 10**4, 10**6)
    began = time.perf_counter()
    result: dict[str, Any] = {
        "backend": "Dask" if client is not None else "Ray",
        "n": n, "reps": reps, "mode": mode, "machine": {
            "cpus": joblib.cpu_count(), "python": platform.python_version(),
            "load_start": load_average(), "commit": commit()},
        "bytes_source": "Dask: bytes dask.distributed's TCP comms write (TCP.write's "
                        "count) in this process, the scheduler and the workers, less "
                        "what reading the counters writes; loky: this process's "
                        "pipe writes plus the shared-memory files it writes"
                        if client is not None else "not measured"}
    log(f"calibrating (load {result['machine']['load_start']})")
    loops = calibrated_loops()
    result["loops"] = loops
    result["generations"] = measure_generations(backend, n, loops, reps, log)
    result["overheads"] = measure_overheads(backend, n, max(1, reps // 2), log)
    if client is not None:
        result["bytes"] = measure_bytes(client, backend, n, sizes=sizes,
                                        generations=1 if mode == "tiny" else 3, log=log)
        result["run_bytes"] = measure_run_bytes(
            client, backend, size=max(sizes), generations=2 if mode == "tiny" else 5, log=log)
        result["simulated"] = simulate(simulate_counts, reps=1 if mode == "tiny" else 3,
                                       log=log) if simulate_counts else []
    result["machine"]["load_end"] = load_average()
    result["seconds"] = time.perf_counter() - began
    return result
