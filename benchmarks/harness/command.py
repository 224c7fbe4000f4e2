"""The core-scaling benchmark's arguments: measure (or load a saved run), analyse, write."""
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
        raise argparse.ArgumentTypeError(f"cannot read {path}: {exc.strerror or exc}") from None
    except ValueError:
        raise argparse.ArgumentTypeError(f"{path} is not JSON; pass the scaling.json of a "
                                         f"benchmark run") from None
    if not isinstance(result, dict):
        result = {}
    for key in ("rows", "ceiling", "model", "n_values", "payload"):
        if key not in result:
            raise argparse.ArgumentTypeError(
                f"{path} is not a scaling.json written by benchmarks/scaling.py (no {key!r}); "
                f"pass the scaling.json of a benchmark run")
    result["ceiling"] = {int(k): v for k, v in result["ceiling"].items()}
    result["predictions"] = predict(result["rows"], result["model"])
    return result


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true", help="about a minute")
    parser.add_argument("--tiny", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out", default="bench-results", help="folder for the outputs")
    parser.add_argument("--n-jobs", default=None, metavar="LIST", type=parse_n_values,
                        help="comma-separated worker counts (default: 1 to all cores)")
    parser.add_argument("--render", default=None, metavar="JSON", type=load,
                        help="measure nothing: write the outputs from a saved scaling.json")


def parse_n_values(text: str | None) -> list[int] | None:
    """``--n-jobs 1,2,4`` as a list (``None`` when not given); argparse's ``type``.

    >>> parse_n_values("1,2,4")
    [1, 2, 4]
    """
    if not text:
        return None
    try:
        n_values = [int(x) for x in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"takes integers like 1,2,4; got {text!r}") from None
    if min(n_values) < 1:
        raise argparse.ArgumentTypeError(f"values must be >= 1; got {text!r}")
    return n_values


def result_from_args(args: argparse.Namespace) -> dict:
    """Measure as the arguments say, or ``--render``'s saved run (loaded by the parser)."""
    if getattr(args, "render", None):
        return args.render
    mode = "tiny" if args.tiny else "quick" if args.quick else "full"
    return benchmark(mode, args.n_jobs)


def report(result: dict, out: str, sections: Sequence[str] = ()) -> int:
    """Write the outputs into ``out`` and print the tables and the files written."""
    paths = write(result, out, sections)
    print()
    print(markdown(result) + "".join(sections))
    print("wrote " + ", ".join(paths.values()))
    return 0
