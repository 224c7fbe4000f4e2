"""The cluster cost model and the report of ``benchmarks/cluster.py``.

A generation of ``P`` tasks of ``t`` seconds on ``N`` workers costs

    T(N) = a0 + a1 N  +  ceil(P / N) (t + h)  +  b B(N)

- ``a0 + a1 N``: per generation (``a1``: each worker's call and answer), fitted on the
  simulated cluster's smallest sizes (sleep-based scores: the overhead is all that is
  not sleeping);
- ``h``: per task, from trivial scores at three populations (the slope);
- ``b``: per byte, from the generation time of 10^6 against 10 parameters when the
  centre travels whole; ``B(N)``: bytes per generation, ``N`` times the per-worker
  bytes measured (a centre that moves anew: sent to each worker) or nearly nothing
  (hill-climb: the workers keep or derive it).

:func:`analyse` fits it, checks it on the simulated cluster's larger sizes (up to 64
workers) and predicts 16 / 64 / 256 workers; :func:`markdown` writes the report.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

PREDICT = (16, 64, 256)
FIT_UP_TO = 8  # simulated sizes used to fit a0, a1; the larger ones check the model


def fit(result: dict) -> dict:
    sim = result.get("simulated") or []
    fit_rows = [r for r in sim if r["n"] <= FIT_UP_TO] or sim
    h = result["overheads"]["cluster"]["per_task_s"]
    # what the simulated generations spent beyond sleeping and the per-task cost
    beyond = [r["overhead_s"] - r["pop"] / r["n"] * h for r in fit_rows]
    a0 = a1 = None
    if len(fit_rows) >= 2:
        a1, a0 = np.polyfit([r["n"] for r in fit_rows], beyond, 1)
        a0, a1 = float(a0), max(0.0, float(a1))
    elif fit_rows:
        a0, a1 = beyond[0], 0.0
    by_size = {r["size"]: r for r in result.get("bytes") or []}
    b = per_worker = None
    if len(by_size) >= 2:
        small, large = by_size[min(by_size)], by_size[max(by_size)]
        extra = large["cluster_moving_bytes"] - small["cluster_moving_bytes"]
        if extra > 0:
            b = max(0.0, (large["cluster_moving_s"] - small["cluster_moving_s"]) / extra)
        per_worker = {size: {k: r[f"cluster_{k}_bytes"] / r["n"]
                             for k in ("hill_climb", "moving")}
                      for size, r in by_size.items()}
    # CPU per generation (this process; all workers) against N, to bound what a machine
    # with few cores gives many workers: wall >= CPU / cores
    cpu = None
    if len(fit_rows) >= 2 and all("workers_cpu_s" in r for r in fit_rows):
        cpu = {k: [float(v) for v in np.polyfit([r["n"] for r in fit_rows],
                                                 [r[k] for r in fit_rows], 1)]
               for k in ("client_cpu_s", "workers_cpu_s")}
        cpu["cores"] = fit_rows[0]["cores"]
    return {"a0_s": a0, "a1_s": a1, "h_s": h, "b_s_per_byte": b,
            "bytes_per_worker": per_worker, "fit_up_to": FIT_UP_TO, "cpu": cpu}


def predict_time(model: dict, n: int, pop: int, task_s: float, bytes_per_worker: float = 0.0
                 ) -> float | None:
    if model["a0_s"] is None:
        return None
    k = math.ceil(pop / max(1, min(pop, n)))
    per_byte = model["b_s_per_byte"] or 0.0
    return (model["a0_s"] + model["a1_s"] * min(n, pop) + k * (task_s + model["h_s"])
            + per_byte * bytes_per_worker * min(n, pop))


def cpu_floor(model: dict, n: int) -> float | None:
    """This machine's bound: the CPU seconds a generation needs (client and workers,
    lines fitted on the small sizes) over its cores."""
    cpu = model.get("cpu")
    if not cpu:
        return None
    need = sum(max(0.0, cpu[key][0] * n + cpu[key][1])
               for key in ("client_cpu_s", "workers_cpu_s"))
    return need / cpu["cores"]


def check(result: dict, model: dict) -> list[dict]:
    """The model against the simulated sizes it was not fitted on: as is (a cluster
    whose workers have their own cores) and bounded by this machine's CPU floor."""
    out = []
    for r in result.get("simulated") or []:
        predicted = predict_time(model, r["n"], r["pop"], r["score_s"])
        floor = cpu_floor(model, r["n"])
        machine = None if predicted is None else max(predicted, floor or 0.0)
        out.append({"n": r["n"], "pop": r["pop"], "measured_s": r["generation_s"],
                    "predicted_s": predicted, "fitted": r["n"] <= model["fit_up_to"],
                    "error": None if predicted is None else
                    predicted / r["generation_s"] - 1,
                    "machine_s": machine if floor is not None else None,
                    "machine_error": None if floor is None or machine is None else
                    machine / r["generation_s"] - 1,
                    "cpu_s": r.get("client_cpu_s", 0) + r.get("workers_cpu_s", 0)
                    if "workers_cpu_s" in r else None})
    return out


def predictions(model: dict) -> list[dict]:
    rows = []
    per_worker = model["bytes_per_worker"] or {}
    big = per_worker.get(max(per_worker)) if per_worker else None
    for label, pop, task_s, centre in (
            ("10 ms scores, 10 params, pop 1024", 1024, 0.01, 0.0),
            ("1 ms scores, 10 params, pop 1024", 1024, 0.001, 0.0),
            ("10 ms, 1e6 params, hill-climb, pop 1024", 1024, 0.01,
             big["hill_climb"] if big else 0.0),
            ("10 ms, 1e6 params, moving centre, pop 1024", 1024, 0.01,
             big["moving"] if big else 0.0)):
        row: dict[str, Any] = {"case": label}
        for n in PREDICT:
            t = predict_time(model, n, pop, task_s, centre)
            row[f"t_{n}"] = t
            row[f"speedup_{n}"] = None if t is None else pop * task_s / t
        rows.append(row)
    return rows


def analyse(result: dict) -> dict:
    result["model"] = fit(result)
    result["check"] = check(result, result["model"])
    result["predictions"] = predictions(result["model"])
    return result


def _ms(x: Any, digits: int = 1) -> str:
    return "n/a" if x is None else f"{x * 1e3:.{digits}f}"


def _pct(x: Any) -> str:
    return "n/a" if x is None else f"{x * 100:+.0f}%"


def _ns(x: Any) -> str:
    return "n/a" if x is None else f"{x * 1e9:.2f}"


def markdown(result: dict) -> str:
    """The report: generation times and overheads; on Dask also bytes, the cost model
    and its check on the simulated cluster (a run on Ray measures neither)."""
    n, m, name = result["n"], result["model"], result.get("backend", "Dask")
    lines = [
        f"# {name} against loky, {n} workers each",
        "",
        f"Measured at commit {result['machine'].get('commit', '(not recorded)')}. "
        f"Medians of {result['reps']} interleaved generations (fallback off); load "
        f"{result['machine']['load_start']} at the start, {result['machine'].get('load_end')} "
        f"at the end, on {result['machine']['cpus']} cores. Bytes: "
        f"{result['bytes_source']}.",
        "",
        f"| score | pop | loky ms/gen | {name} ms/gen | {name} / loky |",
        "|---|---|---|---|---|"]
    for r in result["generations"]:
        lines.append(f"| {r['cost']} | {r['pop']} | {_ms(r['loky_s'])} | "
                     f"{_ms(r['cluster_s'])} | {r['ratio']:.2f} |")
    o = result["overheads"]
    lines += ["", f"| overhead | loky | {name} |", "|---|---|---|",
              f"| per generation (ms) | {_ms(o['loky']['per_generation_s'], 2)} | "
              f"{_ms(o['cluster']['per_generation_s'], 2)} |",
              f"| per task (us) | {o['loky']['per_task_s'] * 1e6:.0f} | "
              f"{o['cluster']['per_task_s'] * 1e6:.0f} |"]
    if "run_bytes" in result:
        lines += _bytes_and_model(result, m)
    return "\n".join(lines) + "\n"


def _bytes_and_model(result: dict, m: dict) -> list[str]:
    lines = ["", "Bytes per generation (population "
             f"{result['bytes'][0]['pop'] if result['bytes'] else '-'}):", "",
             "| params | loky, hill-climb | Dask, hill-climb | loky, moving centre | "
             "Dask, moving centre |", "|---|---|---|---|---|"]
    for r in result["bytes"]:
        lines.append(f"| {r['size']:g} | {r['loky_hill_climb_bytes']:,.0f} | "
                     f"{r['cluster_hill_climb_bytes']:,.0f} | {r['loky_moving_bytes']:,.0f} | "
                     f"{r['cluster_moving_bytes']:,.0f} |")
    rb = result["run_bytes"]
    with_selection = (f"; with the end's selection test (select_tasks="
                      f"{rb['select_tasks']}, which sends the weights it compares), "
                      f"{rb['bytes_with_selection'] / 1e6:.2f} MB"
                      if "bytes_with_selection" in rb else "")
    lines += ["", f"A whole run on Dask (hill-climb, {rb['size']:g} parameters, population "
              f"{rb['pop']}, {rb['generations']} generations, start-up included, "
              f"select_tasks=0): {rb['bytes'] / 1e6:.2f} MB written by all "
              f"processes{with_selection}.", "",
              f"Cost model: T(N) = a0 + a1 N + ceil(P/N) (t + h) + b B(N), with a0 = "
              f"{_ms(m['a0_s'], 2)} ms, a1 = {_ms(m['a1_s'], 3)} ms per worker, h = "
              f"{m['h_s'] * 1e6:.0f} us per task, b = {_ns(m['b_s_per_byte'])} "
              f"ns per byte. Checked against the simulated cluster (sleep-based scores; "
              f"a0, a1 fitted on N <= {m['fit_up_to']}):", "",
              "| workers | pop | measured ms/gen | model ms/gen (error) | CPU ms/gen "
              "measured | model with this machine's CPU floor (error) | used to fit |",
              "|---|---|---|---|---|---|---|"]
    for c in result["check"]:
        lines.append(f"| {c['n']} | {c['pop']} | {_ms(c['measured_s'])} | "
                     f"{_ms(c['predicted_s'])} ({_pct(c['error'])}) | "
                     f"{_ms(c.get('cpu_s'))} | {_ms(c.get('machine_s'))} "
                     f"({_pct(c.get('machine_error'))}) | "
                     f"{'yes' if c['fitted'] else 'no'} |")
    lines += ["", "The floor: the CPU seconds a generation needs (this process and all "
              "workers, lines fitted on the same small sizes) over this machine's cores; "
              "a real cluster's workers have cores of their own, so the predictions below "
              "use the model without it."]
    lines += ["", "Predicted generation time (speedup over one process) at "
              + " / ".join(str(n) for n in PREDICT) + " workers:", "",
              "| case | " + " | ".join(f"{n} workers" for n in PREDICT) + " |",
              "|---|" + "---|" * len(PREDICT)]
    for p in result["predictions"]:
        cells = [f"{_ms(p[f't_{n}'])} ms ({p[f'speedup_{n}']:.0f}x)"
                 if p[f"t_{n}"] is not None else "n/a" for n in PREDICT]
        lines.append(f"| {p['case']} | " + " | ".join(cells) + " |")
    return lines
