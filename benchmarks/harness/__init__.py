"""The machinery of the core-scaling, cluster and batching benchmarks.

The core-scaling benchmark: for ``n_jobs`` from 1 to the machine's core count, score costs (trivial, 1 ms, 10 ms of
calibrated pure-Python work, the blog post's agent with its loop scaled to 1000), several
populations and agent sizes, it times one generation of scoring, side by side in the same
blocks of one run, for:

- ``engine``: es_search's :class:`~es_search.Evaluator` (persistent workers,
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

Modules: :mod:`.workloads` (what is scored), :mod:`.schemes` (what the engine is
compared with; the ceiling; byte counting), :mod:`.measure` (timing), :mod:`.model`
(derived figures, Amdahl and overhead models, predictions), :mod:`.report`
(``scaling.md``, ``.json``, ``.png``), :mod:`.command` (the arguments of
``benchmarks/scaling.py``). :mod:`.cluster` and :mod:`.cluster_model` measure Dask against
loky (``benchmarks/cluster.py``); :mod:`.batching` batched scoring against one ``score()``
per candidate (``benchmarks/batching.py``); :mod:`.stats` the interquartile mean and
bootstrap intervals of ``benchmarks/control.py``.
"""
