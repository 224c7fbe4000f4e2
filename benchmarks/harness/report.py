"""The scaling benchmark's outputs: ``scaling.md`` (tables), ``scaling.json``
(everything), ``scaling.png`` (speedup against workers)."""
from __future__ import annotations

import json
import os
import sys
from typing import Any, Sequence

from .model import path_kind
from .workloads import BLOG_WORK, COSTS


def fmt(v: Any, digits: int = 2) -> str:
    """``-`` for a missing figure, ``digits`` decimals for a float.

    >>> fmt(None), fmt(1.2345), fmt(3)
    ('-', '1.23', '3')
    """
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.{digits}f}"
    return str(v)


def _header(result: dict) -> list[str]:
    m = result["machine"]
    return [
        f"Measured at commit {m.get('commit', '(not recorded)')}. "
        f"Machine: {m['cpus']} cores ({m['processor'] or m['machine']}), Python "
        f"{m['python']}, torch {m['torch']}, joblib {m['joblib']}; load average at start "
        f"{m['load_start']}, at end {m['load_end']}. Mode: {result['mode']}, "
        f"{result['reps']} timed generations per figure (median); wall time "
        f"{result['seconds']:.0f} s.",
        "",
        "Calibration (pure-Python loop, this process): " + "; ".join(
            f"{k} = {v['loops']} loops ({v['ns_per_loop']:.1f} ns/loop)"
            for k, v in result["calibration"].items()) +
        f"; blog agent: loop to {BLOG_WORK}.",
        "",
        f"Worker start-up (n_jobs={result['startup']['n']}, not in any figure below): "
        f"cold {result['startup']['cold_s']:.2f} s, reused {result['startup']['reused_s']:.3f} s"
        f" (workers reused: {result['startup']['workers_reused']}); "
        f"worker RSS {fmt(result['startup']['worker_rss_mb'], 0)} MB.",
        "",
        "Ceiling (n processes running the same pure-Python work side by side vs one; "
        "measured before and after the rest, the higher efficiency kept): " +
        ", ".join(f"n={n}: {c['efficiency']:.3f} efficiency ({c['speedup']:.2f}x)"
                  for n, c in result["ceiling"].items()) +
        ("" if "ceiling_runs" not in result else " (before / after: " + ", ".join(
            f"n={n}: {before['efficiency']:.3f} / {after['efficiency']:.3f}"
            for (n, before), after in zip(result["ceiling_runs"][0].items(),
                                          result["ceiling_runs"][1].values())) + ")") + ".",
    ]


def _rows(result: dict) -> list[str]:
    lines = [
        "| score | pop | params | n_jobs | engine ms/gen | path | speedup | efficiency | "
        "eff/ceiling | blog ms/gen | engine vs blog | joblib-loop ms/gen | engine vs "
        "joblib | overhead us/task engine / blog / joblib | bytes/cand engine / blog / "
        "joblib |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in result["rows"]:
        lines.append(
            f"| {r['cost']} | {r['pop']} | {r['size']:g} | {r['n']} | "
            f"{r['engine_s'] * 1e3:.1f} | {path_kind(r)} | {r['speedup']:.2f} | "
            f"{r['efficiency']:.2f} | {r['efficiency_vs_ceiling']:.2f} | "
            f"{r['blog_s'] * 1e3:.1f} | {r['vs_blog']:.1f}x | {r['joblib_s'] * 1e3:.1f} | "
            f"{r['vs_joblib']:.1f}x | {r['engine_overhead_us']:.0f} / "
            f"{r['blog_overhead_us']:.0f} / {r['joblib_overhead_us']:.0f} | "
            f"{r['engine_bytes_per_candidate']:.0f} / {r['blog_bytes_per_candidate']:.0f} / "
            f"{r['joblib_bytes_per_candidate']:.0f} |")
    lines += ["", "Bytes through the pipe per candidate, engine's parallel path (fallback "
              "off, a new centre each generation), with one chunk per worker and with the "
              "engine's own chunking (tasks of 2 ms or more are cut into up to 4 chunks per "
              "worker), and bytes written once per generation to the shared-memory file:", "",
              "| params | pop | workers | bytes/candidate | engine's chunks | "
              "bytes/candidate, engine's chunks | shared file bytes/generation |",
              "|---|---|---|---|---|---|---|"]
    for p in result["payload"]:
        chunks = p.get("engine_chunks", "-")
        engine = p.get("engine_bytes_per_candidate")
        lines.append(f"| {p['size']:g} | {p['pop']} | {p['n']} | "
                     f"{p['bytes_per_candidate']:.1f} | {chunks} | "
                     f"{'-' if engine is None else f'{engine:.1f}'} | "
                     f"{p['shared_file_bytes_per_generation']} |")
    return lines


def _model(result: dict) -> list[str]:
    model = result["model"]
    a, h = model["overhead_per_generation_s"], model["overhead_per_task_s"]
    lines = ["Amdahl serial fraction fitted on the engine's parallel generations (of the "
             "speedup relative to the ceiling): "
             + ", ".join(f"{k} {v:.4f}" for k, v in model["amdahl_serial_fraction"].items())
             + f". Overhead model measured on trivial scores sent to the workers: "
             f"{fmt(a and a * 1e3, 2)} ms per generation, {fmt(h and h * 1e6, 1)} us per "
             f"task ({_points(result)}). Predicted speedup:", "",
             "| score | pop | ms/task | Amdahl 16 / 64 / 256 cores | overhead model 16 / 64 / "
             "256 cores |", "|---|---|---|---|---|"]
    for p in result["predictions"]:
        am = " / ".join(fmt(p.get(f"amdahl_{c}"), 1) for c in (16, 64, 256))
        ov = " / ".join(fmt(p.get(f"overhead_{c}"), 1) for c in (16, 64, 256))
        lines.append(f"| {p['cost']} | {p['pop']} | {p['task_ms']:.3f} | {am} | {ov} |")
    return lines


def _points(result: dict) -> str:
    over = result.get("overheads")
    if not over:
        return "not measured"
    return (f"{over['n']} workers, {over['task_s'] * 1e6:.1f} us a task in this process; "
            + ", ".join(f"{k} tasks each: {t * 1e3:.2f} ms, {one * 1e3:.2f} ms here"
                        for k, t, one in over["points"]))


def _caveat(result: dict) -> list[str]:
    """How far each model can be trusted (with 2 worker counts, Amdahl's hardly)."""
    if max(result["n_values"]) == 1:
        return ["", "This process may use one core only (its CPU affinity or cgroup quota, "
                "as n_jobs=-1 counts cores), so no parallel generation was measured and "
                "neither model could be fitted: run it where 2 cores or more are free."]
    return ["", "Both models cap the workers at the population. With worker counts 1 and "
            f"{max(result['n_values'])} only, Amdahl's serial fraction rests on one "
            "speedup per point and noise can put it at 0 (perfect scaling); the overhead "
            "model uses directly measured costs (per generation, per task) and is the "
            "one to plan with."]


def markdown(result: dict) -> str:
    """The tables of an analysed result (see :func:`benchmarks.harness.model.analyse`)."""
    lines = _header(result) + [""] + _rows(result) + [""] + _model(result) + _caveat(result)
    return "\n".join(lines) + "\n"


def summary(result: dict) -> str:
    """What a README shows: the machine, the overhead model's costs and its predicted
    speedups (the full tables, Amdahl's fit and the caveats are in ``scaling.md``)."""
    model = result["model"]
    a, h = model["overhead_per_generation_s"], model["overhead_per_task_s"]
    lines = _header(result)[:1] + [
        "", f"Overhead model measured on trivial scores sent to the workers: "
        f"{fmt(a and a * 1e3, 2)} ms per generation, {fmt(h and h * 1e6, 1)} us per task "
        f"({_points(result)}). Predicted speedup, workers capped at the population:",
        "", "| score | pop | ms/task | 16 / 64 / 256 cores |", "|---|---|---|---|"]
    for p in result["predictions"]:
        ov = " / ".join(fmt(p.get(f"overhead_{c}"), 1) for c in (16, 64, 256))
        lines.append(f"| {p['cost']} | {p['pop']} | {p['task_ms']:.3f} | {ov} |")
    if max(result["n_values"]) == 1:
        lines += [""] + _caveat(result)[1:]
    return "\n".join(lines) + "\n"


def plot(result: dict, path: str) -> None:
    """Speedup against workers for each score cost at the largest population, to ``path``."""
    from es_search.extras import require
    matplotlib = require("matplotlib", "plot")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = result["rows"]
    ns = sorted({r["n"] for r in rows})
    fig, ax = plt.subplots(figsize=(6.5, 4.2), dpi=100)
    ax.plot(ns, ns, "k--", lw=1, label="ideal")
    ax.plot(ns, [result["ceiling"][n]["speedup"] for n in ns], "k:", lw=1.5,
            label="ceiling (independent processes)")
    top = max(r["pop"] for r in rows)
    for cost in COSTS:
        sel = {r["n"]: r for r in rows if r["cost"] == cost and r["pop"] == top and
               r["size"] <= 10}
        if len(sel) == len(ns):
            ax.plot(ns, [sel[n]["speedup"] for n in ns], "o-", label=f"es_search, {cost}")
            if cost == "1ms":
                ax.plot(ns, [sel[n]["engine1_s"] / sel[n]["blog_s"] for n in ns], "s--",
                        alpha=0.7, label="blog Pool scheme, 1ms")
                ax.plot(ns, [sel[n]["engine1_s"] / sel[n]["joblib_s"] for n in ns], "^--",
                        alpha=0.7, label="joblib loop over agents, 1ms")
    ax.set_xlabel("workers (n_jobs)")
    ax.set_ylabel("speedup vs es_search n_jobs=1")
    ax.set_title(f"Speedup per generation, population {top}")
    ax.set_xticks(ns)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def write(result: dict, out: str, sections: Sequence[str] = ()) -> dict[str, str]:
    """Write ``scaling.md`` (the tables, then each of ``sections``), ``scaling.json`` and
    ``scaling.png`` (skipped, with a note, without matplotlib) into ``out``."""
    os.makedirs(out, exist_ok=True)
    paths = {k: os.path.join(out, f"scaling.{k}") for k in ("md", "json", "png")}
    with open(paths["md"], "w") as f:
        f.write(markdown(result) + "".join(sections))
    with open(paths["json"], "w") as f:
        json.dump(result, f, indent=1, default=str)
    try:
        plot(result, paths["png"])
    except ImportError as exc:
        print(f"no plot: {exc}", file=sys.stderr)
        del paths["png"]
    return paths
