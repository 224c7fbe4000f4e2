"""``es-search bench``: measure (or load a saved run), analyse, write the outputs."""
from __future__ import annotations

import argparse
import json
from typing import Any, Iterable, Sequence

from .measure import measure
from .model import analyse, predict
from .report import markdown, write


def benchmark(mode: str = "quick", n_values: Iterable[int] | None = None,
              log: Any = print) -> dict:
    """Run the benchmark and analyse it; returns everything as a JSON-able dict."""
    return analyse(measure(mode, n_values, log))


def load(path: str) -> dict:
    """A saved ``scaling.json``, its predictions recomputed from its fitted model."""
    try:
        with open(path) as f:
            result = json.load(f)
    except OSError as exc:
        raise ValueError(f"--render: cannot read {path}: {exc.strerror or exc}") from None
    except ValueError:
        raise ValueError(f"--render: {path} is not JSON; pass the scaling.json of a "
                         f"benchmark run") from None
    if not isinstance(result, dict):
        result = {}
    for key in ("rows", "ceiling", "model", "n_values", "payload"):
        if key not in result:
            raise ValueError(f"{path} is not a scaling.json written by es-search bench "
                             f"(no {key!r}); pass the scaling.json of a benchmark run")
    result["ceiling"] = {int(k): v for k, v in result["ceiling"].items()}
    result["predictions"] = predict(result["rows"], result["model"])
    return result


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true", help="about a minute")
    parser.add_argument("--tiny", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out", default="bench-results", help="folder for the outputs")
    parser.add_argument("--n-jobs", default=None, metavar="LIST",
                        help="comma-separated worker counts (default: 1 to all cores)")
    parser.add_argument("--render", default=None, metavar="JSON",
                        help="measure nothing: write the outputs from a saved scaling.json")
    parser.add_argument("--backend", default=None, choices=("dask",),
                        help="dask: Dask and loky side by side (generation time, overheads, "
                             "bytes, cost model checked on a simulated cluster) into "
                             "cluster.md / cluster.json")
    parser.add_argument("--workers", type=int, default=None, metavar="N",
                        help="--backend dask: worker processes of the LocalCluster (and of "
                             "loky) (default 2)")
    parser.add_argument("--scheduler", default=None, metavar="ADDRESS",
                        help="--backend dask: run on this scheduler instead of a LocalCluster")
    parser.add_argument("--batching", action="store_true",
                        help="batched against per-candidate scoring instead: CartPole and "
                             "Pendulum (extra gym), populations 16, 64, 256, --n-jobs "
                             "workers (default 1 and all cores), whole runs, digits (extra "
                             "digits) into batching.md / batching.json")


def parse_n_values(text: str | None) -> list[int] | None:
    """``--n-jobs 1,2,4`` as a list (``None`` when not given).

    >>> parse_n_values("1,2,4")
    [1, 2, 4]
    """
    if not text:
        return None
    try:
        n_values = [int(x) for x in text.split(",")]
    except ValueError:
        raise ValueError(f"--n-jobs takes integers like 1,2,4; got {text!r}") from None
    if min(n_values) < 1:
        raise ValueError("--n-jobs values must be >= 1")
    return n_values


def result_from_args(args: argparse.Namespace) -> dict:
    """Measure as the arguments say, or load ``--render``'s saved run."""
    n_values = parse_n_values(args.n_jobs)
    if getattr(args, "render", None):
        return load(args.render)
    mode = "tiny" if args.tiny else "quick" if args.quick else "full"
    return benchmark(mode, n_values)


def report(result: dict, out: str, sections: Sequence[str] = ()) -> int:
    """Write the outputs into ``out`` and print the tables and the files written."""
    paths = write(result, out, sections)
    print()
    print(markdown(result) + "".join(sections))
    print("wrote " + ", ".join(paths.values()))
    return 0


def check_out(out: str) -> None:
    """--out: a folder that is, or can be, created (checked before measuring)."""
    from pathlib import Path
    path = Path(out)
    blocking = next((p for p in (path, *path.parents) if p.exists()), None)
    if blocking is not None and not blocking.is_dir():
        raise ValueError(f"--out {out}: {blocking} is a file, not a folder (choose a "
                         f"folder; it is created if missing)")
    from ..files import writable_folder_problem
    problem = writable_folder_problem(path)
    if problem:
        raise ValueError(f"--out {out} cannot be written: {problem} (choose a folder you "
                         f"can write)")


def run_from_args(args: argparse.Namespace) -> int:
    check_out(args.out)
    dask = getattr(args, "backend", None) == "dask" or getattr(args, "scheduler", None)
    if getattr(args, "workers", None) is not None and not dask:
        raise ValueError("--workers sizes the LocalCluster of --backend dask; the core-"
                         "scaling benchmark takes --n-jobs LIST")
    if getattr(args, "batching", False):
        if getattr(args, "backend", None) or getattr(args, "render", None):
            raise ValueError("--batching runs on loky and measures: it takes neither "
                             "--backend nor --render")
        from .batching import batching_from_args
        return batching_from_args(args)
    if getattr(args, "backend", None) == "dask" or getattr(args, "scheduler", None):
        return cluster_from_args(args)
    return report(result_from_args(args), args.out)


def cluster_from_args(args: argparse.Namespace, log: Any = print) -> int:
    """``es-search bench --backend dask``: measure, fit, write cluster.md/json."""
    import os
    from ..extras import require
    from .cluster import measure_cluster
    from .cluster_model import analyse as analyse_cluster, markdown as cluster_markdown
    workers = 2 if args.workers is None else args.workers
    if workers < 1:
        raise ValueError(f"--workers must be >= 1, got {workers}")
    distributed = require("distributed", "dask")
    mode = "tiny" if args.tiny else "quick" if args.quick else "full"
    counts = {"tiny": (1, 2), "quick": (2, 4, 8, 16), "full": (2, 4, 8, 16, 32, 64)}[mode]
    if args.scheduler:
        client = distributed.Client(args.scheduler, timeout="30s")
        cluster = None
        n = len(client.nthreads())
    else:
        cluster = distributed.LocalCluster(n_workers=workers, processes=True,
                                           threads_per_worker=1, dashboard_address=":0")
        client = distributed.Client(cluster)
        n = workers
    try:
        result = measure_cluster(client, client, n, mode, simulate_counts=counts, log=log)
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
    result = analyse_cluster(result)
    os.makedirs(args.out, exist_ok=True)
    paths = {k: os.path.join(args.out, f"cluster.{k}") for k in ("md", "json")}
    with open(paths["md"], "w") as f:
        f.write(cluster_markdown(result))
    with open(paths["json"], "w") as f:
        json.dump(result, f, indent=1, default=str)
    print(cluster_markdown(result))
    print("wrote " + ", ".join(paths.values()))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="es-search bench",
                                     description="core-scaling benchmark of es_search's "
                                                 "evaluation engine")
    add_arguments(parser)
    return run_from_args(parser.parse_args(argv))

