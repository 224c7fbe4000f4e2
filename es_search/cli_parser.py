"""The ``es-search`` command line's parser: its verbs and their flags, a run's settings'
flags made from the fields of :class:`~es_search.settings.Settings` (where their help is
declared), and :func:`flag_term`, how it writes a setting in the library's messages."""
from __future__ import annotations

import argparse
import ast
import json
from dataclasses import fields
from typing import Any, Callable

from . import __version__
from .errors import python_term, render
from .settings import Settings
from .strategies import DEFAULT, STRATEGIES

#: the settings ``es-search run`` takes as flags: those that declare a help
SETTINGS = [setting for setting in fields(Settings) if "help" in setting.metadata]


class UsageError(ValueError):
    """Bad input from the command line: one line on stderr, exit status 2."""


def _parse_param(text: str, flag: str = "-p", example: str = "work=100") -> tuple[str, Any]:
    """``NAME=VALUE`` as ``(NAME, VALUE)``: a Python literal, JSON, true/false, or text."""
    key, sep, raw = text.partition("=")
    if not sep or not key.isidentifier():
        raise UsageError(f"{flag} expects NAME=VALUE (e.g. {flag} {example}), got {text!r}")
    if raw.lower() in ("true", "false"):  # as a shell user writes them, not only True
        return key, raw.lower() == "true"
    for parse in (ast.literal_eval, json.loads):  # {1: 2}, 'a'; {"is_slippery": false}
        try:
            return key, parse(raw)
        except (ValueError, SyntaxError):
            pass
    return key, raw


class _Params(argparse.Action):
    """``-p NAME=VALUE`` (repeatable) as a dict; a NAME given twice is refused (which one
    was meant?). ``const``: an example."""

    def __call__(self, parser: Any, namespace: Any, text: Any, flag: Any = None) -> None:
        key, value = _parse_param(text, self.option_strings[0], self.const)
        params = dict(getattr(namespace, self.dest))
        if key in params:
            raise UsageError(f"{self.option_strings[0]} {key} is given twice ({key}="
                             f"{params[key]!r} and {key}={value!r}); give it once")
        setattr(namespace, self.dest, {**params, key: value})


def flag_term(parser: argparse.ArgumentParser) -> Callable[..., str]:
    """How ``parser`` writes a setting (for :func:`~es_search.errors.setting_message`):
    the flag of its option whose dest (or ``setting`` attribute) is the setting
    (``--n-jobs 2``; a switch alone, ``--resume``, ``--no-progress`` for
    ``progress=False``), else as Python writes it."""
    actions = {getattr(action, "setting", action.dest): action
               for action in parser._actions if action.option_strings}

    def term(setting: str, value: str | None = None) -> str:
        action = actions.get(setting)
        if action is None:
            return python_term(setting, value)
        if action.nargs == 0:  # a switch: --resume; --progress or --no-progress
            return action.option_strings[-1 if value == "False" else 0]
        flag = action.option_strings[-1]
        return flag if value is None else f"{flag} {value}"
    return term


def _add_settings(parser: argparse.ArgumentParser) -> None:
    """A flag per setting that declares one (:class:`~es_search.settings.Settings`), its
    help's settings written as this parser's flags."""
    helps = {}
    for setting in SETTINGS:
        options = {key: value for key, value in setting.metadata.items() if key != "help"}
        if isinstance(setting.default, bool):  # --resume; --progress/--no-progress
            options["action"] = argparse.BooleanOptionalAction if setting.default \
                else "store_true"
        elif setting.default is not None:
            options.setdefault("type", type(setting.default))
        action = parser.add_argument("--" + setting.name.replace("_", "-"),
                                     default=setting.default, **options)
        helps[action] = setting.metadata["help"]
    term = flag_term(parser)
    for action, text in helps.items():
        action.help = render(text, term)


class _Parser(argparse.ArgumentParser):
    verbs: dict = {}  # the verbs' own parsers, by name

    def error(self, message: str) -> None:  # one line, exit 2, no traceback
        raise UsageError(f"{self.prog}: {message}")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="es-search",
                     description="Evolution-strategies search of PyTorch agents on all cores.")
    parser.add_argument("--version", action="version", version=f"es_search {__version__}")
    verbs = parser.add_subparsers(dest="verb", required=True, parser_class=_Parser)
    parser.verbs = verbs.choices

    run = verbs.add_parser("run", help="optimise a problem",
                           description="Optimise PROBLEM: a built-in name (es-search list), "
                                       "gym:ENV_ID (any gymnasium environment), "
                                       "package.module:AgentClass or path/to/file.py:AgentClass.")
    run.add_argument("problem", help="a built-in name, gym:ENV_ID, module:Class or "
                                     "path/to/file.py:Class")
    for name, kind, default in (("generations", int, "the problem's"),
                                ("population", int, "the problem's, else the strategy's"),
                                ("sigma", float, "the problem's, else the strategy's"),
                                ("seed", int, "0")):
        run.add_argument("--" + name, type=kind,
                         help=f"default: {default}; with --resume, the run's own")
    run.add_argument("--strategy", choices=sorted(STRATEGIES),
                     help=f"default: the problem's ({DEFAULT} for most); with --resume, the "
                          f"run's own")
    run.add_argument("--scheduler", metavar="ADDRESS",
                     help="dask scheduler to run on (e.g. tcp://host:8786); implies "
                          "--backend dask")
    _add_settings(run)
    run.add_argument("--no-test", action="store_true",
                     help="skip testing the best agent and the final centre at the end "
                          "(their test_scores(): held-out accuracy, returns of fresh "
                          "episodes)")
    run.add_argument("-p", "--param", dest="params", action=_Params, default={}, const="work=100",
                     metavar="NAME=VALUE",
                     help="constructor argument of the agent (repeatable); with --resume, "
                          "the run's own where not given again")
    run.add_argument("-o", "--strategy-option", dest="strategy_options", action=_Params,
                     default={},
                     const="reevaluate=True", metavar="NAME=VALUE",
                     help="option of the strategy (repeatable), e.g. -o reevaluate=True, "
                          "-o learning_rate=0.1; see es-search list STRATEGY; with "
                          "--resume, the run's own where not given again")
    from .callbacks import add_arguments as add_callback_arguments
    add_callback_arguments(run)  # --tensorboard, --mlflow, --csv, --stop-at, ...

    test = verbs.add_parser(
        "test", help="test the best agent and the final centre of a run folder",
        description="Rebuild the problem of a run written by `es-search run PROBLEM --out "
                    "DIR`, load its best weights and its final centre and print their "
                    "test_scores() (held-out accuracy, returns of fresh episodes); also "
                    "written to DIR/test.json.")
    test.add_argument("out", metavar="DIR")

    check = verbs.add_parser(
        "check", help="check that a problem's scores are repeatable and, with score_batch, "
                      "that it scores each candidate on its own",
        description="Build PROBLEM as `es-search run PROBLEM` builds it, score it twice "
                    "under one task seed (es_search.check_repeatable: a score that "
                    "depends on what the agent scored before makes runs depend on "
                    "--n-jobs) and, when it defines score_batch, score a few "
                    "jittered candidates as one group, as two groups, one by one and "
                    "through score() (es_search.check_score_batch). Exit status 0 when "
                    "the scores agree, 1 when some do not (named on stderr), 2 on bad "
                    "input.")
    check.add_argument("problem")
    check.add_argument("--population", type=int, default=8,
                       help="candidates to score (default 8)")
    check.add_argument("--sigma", type=float,
                       help="their jitter (default: the problem's)")
    check.add_argument("--seed", type=int, default=0)
    check.add_argument("--exact", action="store_true",
                       help="require bit-identical scores (default: within a relative "
                            "1e-6, the last bits of a batched product may differ)")
    check.add_argument("-p", "--param", dest="params", action=_Params, default={}, const="work=100",
                       metavar="NAME=VALUE",
                       help="constructor argument of the agent (repeatable)")

    listing = verbs.add_parser(
        "list", help="list the built-in problems and strategies, or one problem's "
                     "parameters and defaults, or one strategy's options",
        description="Without PROBLEM: the built-in problems and the strategies with their "
                    "options. With PROBLEM (a name, gym:ID, file.py:Class or "
                    "module:Class): what it is, its parameters (-p NAME=VALUE) with their "
                    "defaults, and the settings `es-search run PROBLEM` uses. With a "
                    "strategy's name: what it does and its options (-o NAME=VALUE).")
    listing.add_argument("problem", nargs="?", metavar="PROBLEM_OR_STRATEGY")

    export = verbs.add_parser(
        "export", help="write a run's policy as one file that runs without es_search",
        description="Write the policy of a run written by `es-search run PROBLEM --out "
                    "DIR` (observation normalisation, network, action mapping) as "
                    "TorchScript (torch.jit.load) or ONNX (onnxruntime; extra export).")
    export.add_argument("out", metavar="RUN_DIR")
    export.add_argument("--to", choices=("torchscript", "onnx"), default="torchscript")
    export.add_argument("--out", dest="file", metavar="FILE",
                        help="default: RUN_DIR/policy.pt (.onnx)")
    export.add_argument("--which", choices=("center", "best"), default=None,
                        help="the weights to export (default: what the run handed back)")

    from .bench import add_arguments
    bench = verbs.add_parser("bench", help="how a generation's scoring scales with n_jobs here",
                             description="Time one generation of scoring (0, 1 and 10 ms "
                                         "scores, population 64) for n_jobs from 1 to all "
                                         "cores; prints the table and writes bench.json.")
    add_arguments(bench)
    return parser
