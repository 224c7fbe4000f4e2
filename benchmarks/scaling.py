"""Core-scaling benchmark of es_search's evaluation engine, with this repository's
targets and README table.

    python benchmarks/scaling.py [--quick] [--out DIR] [--n-jobs 1,2,4] [--readme README.md]
    python benchmarks/scaling.py --render benchmarks/results/scaling.json --out DIR

It measures with ``benchmarks/harness/``, then
judges the targets (``benchmarks/scaling_targets.py``), appends them to
``scaling.md``, stores them in ``scaling.json`` and, with ``--readme FILE``, replaces a
summary between FILE's ``<!-- scaling-table:... -->`` markers
(``benchmarks/readme_table.py``; the project's README has none). ``--render`` measures nothing: it re-renders and
re-judges a saved run.
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import Sequence

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [p for p in (os.path.dirname(HERE), HERE) if p not in sys.path]

from benchmarks.harness.command import add_arguments, report, result_from_args  # noqa: E402
from benchmarks.harness.report import summary  # noqa: E402
from readme_table import table_in, update_readme  # noqa: E402
from scaling_targets import judge, targets_markdown, targets_summary  # noqa: E402


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scaling", description=" ".join(__doc__.split("\n\n")[0].split()))
    add_arguments(parser)
    parser.add_argument("--readme", default=None, metavar="PATH",
                        help="also replace the summary (machine, model, targets) between the "
                             "README's markers")
    args = parser.parse_args(argv)
    if args.readme:  # before minutes of measuring: the README must have the markers
        with open(args.readme) as f:
            try:
                table_in(f.read())
            except ValueError as exc:
                parser.error(f"--readme {args.readme}: {exc}")
    result = result_from_args(args)
    verdicts = judge(result)
    section = targets_markdown(verdicts)
    code = report(result, args.out, [section])
    if args.readme:
        update_readme(args.readme, summary(result) + targets_summary(verdicts))
        print(f"updated the summary in {args.readme} (full tables: {args.out}/scaling.md)")
    return code


if __name__ == "__main__":
    sys.exit(main())
