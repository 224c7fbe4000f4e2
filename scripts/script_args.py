"""The scripts' command lines: a dataclass of arguments, one ``--flag`` per field.

    @dataclass
    class Args(RunArgs):          # --seed, --n-jobs, --out, --resume, --overwrite, --no-progress
        generations: int = 40     # --generations N

    args = parse(Args, "what the script does", argv)
"""
from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass
from typing import Any


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


def field_docs(cls: type) -> dict[str, str]:
    """The string under each field of ``cls`` and of the dataclasses it extends (the
    attribute docstrings above), by field name."""
    import ast
    import inspect
    import textwrap
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if not dataclasses.is_dataclass(klass):
            continue
        try:
            body = ast.parse(textwrap.dedent(inspect.getsource(klass))).body[0].body
        except (OSError, TypeError, IndexError):
            continue
        for node, after in zip(body, body[1:]):
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and \
                    isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant) \
                    and isinstance(after.value.value, str):
                docs[node.target.id] = " ".join(after.value.value.split())
    return docs


def parse(cls: type, description: str, argv: Any = None) -> Any:
    """``cls`` (a dataclass with defaults) from the command line ``argv``: a boolean
    field ``name`` becomes ``--no-name`` when it defaults to True, ``--name`` when it
    defaults to False; any other field ``--name VALUE`` (``int``, ``float`` or text).
    Each flag's help is the field's docstring."""
    parser = argparse.ArgumentParser(description=description)
    docs = field_docs(cls)
    for field in dataclasses.fields(cls):
        flag = field.name.replace("_", "-")
        doc = docs.get(field.name, "")
        if field.type in ("bool", bool) and field.default:
            parser.add_argument(f"--no-{flag}", dest=field.name, action="store_false",
                                help=f"turn off: {doc} (on by default)" if doc else None)
        elif field.type in ("bool", bool):
            parser.add_argument(f"--{flag}", dest=field.name, action="store_true",
                                help=doc or None)
        else:
            kind = {"int": int, "float": float, int: int, float: float}.get(field.type, str)
            parser.add_argument(f"--{flag}", dest=field.name, type=kind,
                                default=field.default,
                                help=f"{doc + '; ' if doc else ''}default: {field.default}")
    return cls(**vars(parser.parse_args(argv)))
