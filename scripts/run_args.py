"""What every script's run takes, as a dataclass of arguments; each script extends it and
reads its command line with :func:`parse` (``tyro.cli``, extra ``scripts``: each field's
docstring is its ``--help``).

    @dataclass
    class Args(RunArgs):          # --seed, --n-jobs, --out, --resume, --overwrite, --no-progress
        generations: int = 40     # --generations N; the string under a field is its help

    args = parse(Args, "what the script does", argv)

and runs its ``main`` with :func:`script_main`: bad input said in one line, not a traceback.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, fields
from typing import Any, Callable

from es_search.checkpoint import CheckpointError
from es_search.errors import SettingError, setting_message
from es_search.lock import OutFolderError
from es_search.extras import require
from es_search.settings import Settings


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
    """``args_class`` read from the command line (``argv``: these arguments instead), its
    fields named as ``run()``'s settings checked as ``run()`` checks them (a SettingError,
    which :func:`script_main` says in one line); without the ``scripts`` extra, one line."""
    try:
        tyro = require("tyro", "scripts")
    except ImportError as exc:
        sys.exit(f"{sys.argv[0]}: {exc}")
    args = tyro.cli(args_class, description=description, args=argv)
    Settings(**{f.name: getattr(args, f.name) for f in fields(Settings) if hasattr(args, f.name)})
    return args


def script_main(main: Callable[[], Any]) -> None:
    """A script's entry point: ``main()``, with es_search's refusal of bad input (a
    setting or value, an out folder, a checkpoint) said in one line in the flags' terms
    (``--resume``, not ``resume=True``), exit status 2; anything else keeps its traceback."""
    try:
        main()
    except (SettingError, OutFolderError, CheckpointError) as exc:
        text = setting_message(exc, _flag) if isinstance(exc, SettingError) else str(exc)
        print(f"{sys.argv[0]}: error: {text}", file=sys.stderr)
        sys.exit(2)


def _flag(setting: str, value: Any = None) -> str:
    """A setting as a script's flag: ``--n-jobs 2``, a switch alone (``--resume``)."""
    flag = "--" + setting.replace("_", "-")
    return flag if value in (None, "True") else f"{flag} {value}"
