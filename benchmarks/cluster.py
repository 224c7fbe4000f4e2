"""Dask (or Ray) against loky, with this repository's targets.

    python benchmarks/cluster.py [--quick] [--workers 2] [--scheduler ADDRESS] [--out DIR]
    python benchmarks/cluster.py --backend ray [--quick] [--workers 2]
    python benchmarks/cluster.py --render benchmarks/results/cluster.json --out DIR

It measures with ``benchmarks/harness/cluster.py`` (generation time,
per-generation and per-task overhead, bytes per generation, a cost model checked on a
simulated cluster of up to 64 worker processes), then judges the targets and
writes ``cluster.md`` (with the targets) and ``cluster.json`` into ``--out``. With
``--backend ray`` (a local Ray of ``--workers`` CPUs) it measures the generation times
and overheads only and writes ``cluster-ray.md`` and ``cluster-ray.json``.
``--render`` measures nothing: it re-renders and re-judges a saved run. Timing runs
belong under the shared lock: ``flock /work/coord/bench.lock python benchmarks/cluster.py``.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Sequence

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [p for p in (os.path.dirname(HERE),) if p not in sys.path]

from benchmarks.harness.cluster_model import analyse, markdown  # noqa: E402

MB = 1e6


def targets(result: dict) -> list[dict]:
    """The targets, each with this run's figure."""
    out = []
    name = result.get("backend", "Dask")
    gens = {r["cost"]: r for r in result["generations"]}
    for cost, limit in (("1ms", 1.25), ("10ms", 1.05)):
        r = gens.get(cost)
        out.append({"target": f"{name} generation time <= {limit}x loky's ({cost} scores, "
                              f"pop 64, {result['n']} workers)",
                    "figure": None if r is None else round(r["ratio"], 3),
                    "met": None if r is None else r["ratio"] <= limit})
    rb = result.get("run_bytes")
    if rb is None:  # Ray: not measured
        return out
    target_case = rb["size"] >= 10**6 and rb["pop"] == 16 and rb["generations"] == 5
    out.append({"target": "< 16 MB through the network for 5 generations of 16 candidates "
                          "of a 10^6-parameter agent",
                "figure": f"{rb['bytes'] / MB:.2f} MB",
                "met": (rb["bytes"] < 16 * MB) if target_case else None})
    return out


def targets_markdown(verdicts: list[dict]) -> str:
    lines = ["", "Targets, from this run:", "", "| target | measured | met |",
             "|---|---|---|"]
    for t in verdicts:
        met = {True: "met", False: "NOT met", None: "not measured"}[t["met"]]
        lines.append(f"| {t['target']} | {t['figure']} | {met} |")
    return "\n".join(lines) + "\n"


def measure(args: argparse.Namespace) -> dict:
    """Measure on a LocalCluster of ``--workers`` processes, or on ``--scheduler``."""
    from es_search.extras import require
    from benchmarks.harness.cluster import measure_cluster
    if args.workers < 1:
        raise SystemExit(f"--workers must be >= 1, got {args.workers}")
    mode = "tiny" if args.tiny else "quick" if args.quick else "full"
    if args.backend == "ray":
        if args.scheduler:
            raise SystemExit("--scheduler is Dask's; --backend ray starts a local Ray")
        ray = require("ray", "ray")
        # Ray's workers import the benchmark's agent: its processes inherit this variable
        os.environ["PYTHONPATH"] = os.pathsep.join(
            p for p in (os.path.dirname(HERE), os.environ.get("PYTHONPATH")) if p)
        ray.init(num_cpus=args.workers, include_dashboard=False, log_to_driver=False)
        try:
            return measure_cluster("ray", None, args.workers, mode, simulate_counts=())
        finally:
            ray.shutdown()
    distributed = require("distributed", "dask")
    counts = {"tiny": (1, 2), "quick": (2, 4, 8, 16), "full": (2, 4, 8, 16, 32, 64)}[mode]
    if args.scheduler:
        client, cluster = distributed.Client(args.scheduler, timeout="30s"), None
        n = len(client.nthreads())
    else:
        cluster = distributed.LocalCluster(n_workers=args.workers, processes=True,
                                           threads_per_worker=1, dashboard_address=":0")
        client, n = distributed.Client(cluster), args.workers
    try:
        return measure_cluster(client, client, n, mode, simulate_counts=counts)
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="cluster", description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--tiny", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--backend", choices=["dask", "ray"], default="dask")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--scheduler", default=None)
    parser.add_argument("--out", default="bench-results")
    parser.add_argument("--render", default=None, metavar="JSON")
    args = parser.parse_args(argv)
    if args.render:
        with open(args.render) as f:
            result: dict[str, Any] = analyse(json.load(f))
    else:
        result = analyse(measure(args))
    result["targets"] = targets(result)
    os.makedirs(args.out, exist_ok=True)
    text = markdown(result) + targets_markdown(result["targets"])
    stem = "cluster" if result.get("backend", "Dask") == "Dask" else "cluster-ray"
    with open(os.path.join(args.out, f"{stem}.md"), "w") as f:
        f.write(text)
    with open(os.path.join(args.out, f"{stem}.json"), "w") as f:
        json.dump(result, f, indent=1, default=str)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
