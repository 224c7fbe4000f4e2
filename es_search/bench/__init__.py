"""The core-scaling benchmark behind ``es-search bench``.

For ``n_jobs`` from 1 to the machine's core count, score costs (trivial, 1 ms, 10 ms of
calibrated pure-Python work, the blog post's agent with its loop scaled to 1000), several
populations and agent sizes, it times one generation of scoring, side by side in the same
blocks of one run, for:

- ``engine``: es_search's :class:`~es_search.evaluation.Evaluator` (persistent workers,
  candidates as seeds, sequential fallback), opened once per block as ``run()`` does;
- ``blog``: the blog post's scheme: a new ``multiprocessing.Pool(n)`` per generation,
  agent objects and weight dicts built in this process and pickled per task;
- ``joblib-loop``: a plain ``joblib.Parallel(n_jobs=n)`` over jittered agent objects;
- the *ceiling*: ``n`` independent processes running the same pure-Python work side by
  side, against one alone: what this machine gives ``n`` perfect workers.

Bytes sent are counted where they go: every ``multiprocessing.connection.Connection``
write made by this process during a generation, per candidate; arrays the engine shares
through files (``/dev/shm``) are counted apart, per generation. Worker start-up is timed
on its own and kept out of the per-generation figures.

Modules: :mod:`~es_search.bench.workloads` (what is scored), :mod:`~es_search.bench.schemes`
(what the engine is compared with; the ceiling; byte counting),
:mod:`~es_search.bench.measure` (timing), :mod:`~es_search.bench.model` (derived figures,
Amdahl and overhead models, predictions), :mod:`~es_search.bench.report` (``scaling.md``,
``.json``, ``.png``), :mod:`~es_search.bench.command` (the ``es-search bench`` verb).
This repository's target verdicts and README table live in ``benchmarks/scaling.py``.

``es-search bench --backend dask`` measures Dask against loky instead
(:mod:`~es_search.bench.cluster`: generation time, overheads, bytes, a simulated
cluster; :mod:`~es_search.bench.cluster_model`: the cost model and ``cluster.md``);
issue 9's verdicts are in ``benchmarks/cluster.py``.

``es-search bench --batching`` measures batched scoring (``Agent.score_batch``) against
one ``score()`` per candidate (:mod:`~es_search.bench.batching`); issue 11's verdicts are
in ``benchmarks/batching.py``.
"""
from .command import add_arguments, benchmark, load, main, run_from_args
from .measure import MODES, measure, measure_block, measure_payload
from .model import analyse, derive, fit_models, path_kind, predict
from .report import markdown, plot, write
from .schemes import PipeCounter, blog_generation, ceiling, joblib_generation
from .workloads import COSTS, BenchAgent, calibrate, spin

__all__ = ["BenchAgent", "COSTS", "MODES", "PipeCounter", "add_arguments", "analyse",
           "benchmark", "blog_generation", "calibrate", "ceiling", "derive", "fit_models",
           "joblib_generation", "load", "main", "markdown", "measure", "measure_block",
           "measure_payload", "path_kind", "plot", "predict", "run_from_args", "spin",
           "write"]
