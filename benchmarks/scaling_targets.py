"""This repository's targets for the scaling benchmark, judged on one run.

Used by ``benchmarks/scaling.py``; ``benchmarks/harness`` measures and
reports, and leaves the verdicts to this file.
"""
from __future__ import annotations

from typing import Any

from benchmarks.harness.model import path_kind
from benchmarks.harness.report import fmt


def targets(rows: list[dict], payload: list[dict], n_cpus: int) -> list[dict]:
    """Each target with the figure this run measured."""
    out = []

    def add(name: str, figure: Any, met: bool | None, note: str = "") -> None:
        out.append({"target": name, "figure": figure, "met": met, "note": note})

    for cost in ("1ms", "10ms", "blog"):
        r = [x for x in rows if x["cost"] == cost and x["pop"] == 64 and x["n"] == 2
             and x["size"] <= 10]
        if r:
            v = r[0]["efficiency_vs_ceiling"]
            add(f"efficiency at 2 workers / ceiling >= 0.95 ({cost} scores, pop 64)",
                round(v, 3), v >= 0.95,
                f"measured {r[0]['task_s'] * 1e3:.2f} ms per task in this process")
        else:
            add(f"efficiency at 2 workers / ceiling >= 0.95 ({cost} scores, pop 64)",
                None, None, "not measured in this run (needs 2 cores and pop 64)")
    top = [x for x in rows if x["n"] == n_cpus]
    r = [x for x in top if x["cost"] == "1ms" and x["pop"] == 64 and x["size"] <= 10]
    if r:
        add(f"vs blog scheme >= 3x per generation (1 ms, pop 64, n_jobs={n_cpus})",
            round(r[0]["vs_blog"], 2), r[0]["vs_blog"] >= 3)
    worst = min(rows, key=lambda x: x["vs_blog"])
    add("faster than the blog scheme at every size measured (worst ratio)",
        round(worst["vs_blog"], 2), worst["vs_blog"] > 1,
        f"worst: {worst['cost']}, pop {worst['pop']}, {worst['size']} params, "
        f"n_jobs={worst['n']}")
    if payload:
        b = [p["bytes_per_candidate"] for p in payload]  # one chunk per worker
        real = [p.get("engine_bytes_per_candidate", p["bytes_per_candidate"])
                for p in payload]  # the engine's own chunking
        add("bytes per candidate < 200 (parallel path, engine's chunking, params "
            f"{min(p['size'] for p in payload):g} to {max(p['size'] for p in payload):g})",
            round(max(real), 1), max(real) < 200)
        spread = max(b) - min(b)
        add("bytes per candidate independent of params (max - min, one chunk per worker)",
            round(spread, 1), spread <= 0.02 * max(b), "independent = within 2%")
    r1 = [x for x in rows if x["cost"] == "trivial" and x["size"] >= 10**6 and
          x["pop"] == 32 and x["n"] == 2]
    if r1:
        parallel = path_kind(r1[0]) == "parallel"
        add("1e6 params, trivial score, pop 32: n_jobs=2 faster than n_jobs=1 (ratio)",
            round(r1[0]["speedup"], 2), r1[0]["speedup"] > 1 and parallel,
            f"path: {path_kind(r1[0])}" + ("" if parallel else
                                           "; in-process runs are not a parallel win"))
    for x in (x for x in top if x["cost"] == "trivial"):
        ratio = x["engine_s"] / x["engine1_s"]
        add(f"trivial scores, pop {x['pop']}, {x['size']:g} params: n_jobs=-1 / n_jobs=1 "
            f"<= 1.2", round(ratio, 2), ratio <= 1.2, f"path: {path_kind(x)}")
    return out


def judge(result: dict) -> list[dict]:
    """The targets of an analysed result, stored in it as ``result["targets"]``."""
    result["targets"] = targets(result["rows"], result["payload"], max(result["n_values"]))
    return result["targets"]


def targets_markdown(verdicts: list[dict]) -> str:
    """The targets table, to follow :func:`benchmarks.harness.report.markdown`'s text."""
    lines = ["", "Targets, from this run:", "",
             "| target | measured | met |", "|---|---|---|"]
    for t in verdicts:
        met = {True: "met", False: "NOT met", None: "not measured"}[t["met"]]
        note = f" ({t['note']})" if t["note"] else ""
        lines.append(f"| {t['target']} | {fmt(t['figure'], 3)}{note} | {met} |")
    return "\n".join(lines) + "\n"


def targets_summary(verdicts: list[dict]) -> str:
    """One line for the README: how many targets were met, and the ones that were not."""
    missed = [t for t in verdicts if t["met"] is not True]
    met = len(verdicts) - len(missed)
    lines = ["", f"Core-scaling targets, from this run: {met} of {len(verdicts)} met"
             + (" (table in scaling.md)." if not missed else "; not met:")]
    for t in missed:
        lines.append(f"- {t['target']}: {fmt(t['figure'], 3)}")
    return "\n".join(lines) + "\n"
