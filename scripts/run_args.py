"""What every script's run takes, as a dataclass of arguments; each script extends it and
reads its command line with ``tyro.cli`` (extra ``scripts``: each field's docstring is its
``--help``).

    @dataclass
    class Args(RunArgs):          # --seed, --n-jobs, --out, --resume, --overwrite, --no-progress
        generations: int = 40     # --generations N; the string under a field is its help

    args = tyro.cli(Args, description="what the script does", args=argv)
"""
from __future__ import annotations

from dataclasses import dataclass


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

