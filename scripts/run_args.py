"""What every script's run takes, as a dataclass of arguments; each script extends it and
reads its command line with :func:`parse` (``tyro.cli``, extra ``scripts``: each field's
docstring is its ``--help``).

    @dataclass
    class Args(RunArgs):          # --seed, --n-jobs, --out, --resume, --overwrite, --no-progress
        generations: int = 40     # --generations N; the string under a field is its help

    args = parse(Args, "what the script does", argv)
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

from es_search.extras import require


@dataclass
class RunArgs:
    """What every script's run takes."""

    seed: int = 0
    """the run's seed: the same seed gives the same run on any number of cores"""
    n_jobs: int = -1
    """workers (-1: all cores)"""
    out: str | None = None
    """folder for the run (config.json, history.jsonl, best and centre weights, ...)"""
    resume: bool = False
    """continue the run saved in --out"""
    overwrite: bool = False
    """replace the run saved in --out"""
    progress: bool = True
    """show a progress bar"""


def parse(args_class: type, description: str, argv: Any = None) -> Any:
    """``args_class`` read from the command line (``argv``: these arguments instead); without
    the ``scripts`` extra, one line naming it."""
    try:
        tyro = require("tyro", "scripts")
    except ImportError as exc:
        sys.exit(f"{sys.argv[0]}: {exc}")
    return tyro.cli(args_class, description=description, args=argv)
