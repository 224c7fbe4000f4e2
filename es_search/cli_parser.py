"""The ``es-search`` command line's parser: its verbs and their flags, a run's settings'
flags made from the fields of :class:`~es_search.settings.Settings` (where their help is
declared), the tracking and stopping flags and the callbacks they build, and
:func:`flag_term`, how it writes a setting in the library's messages."""
from __future__ import annotations

import argparse
import ast
import json
from typing import Any, Callable

from . import __version__
from .errors import python_term, render
from .settings import DOCUMENTED
from .strategies import DEFAULT, STRATEGIES


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
    the flag whose dest (or ``setting`` attribute) it is (``--n-jobs 2``; a switch alone,
    ``--no-progress`` for ``progress=False``), else as Python writes it."""
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


#: settings that config.json records and a resume keeps unless given again (None when not
#: given: ``cli`` fills them in)
RESUMED = ("checkpoint_every", "select_tasks")


def _add_settings(parser: argparse.ArgumentParser) -> None:
    """A flag per documented setting, its help's settings written as this parser's flags."""
    actions = []
    for setting in DOCUMENTED:
        options = {key: value for key, value in setting.metadata.items()
                   if key not in ("help", "check")}
        if isinstance(setting.default, bool):  # --resume; --progress/--no-progress
            options["action"] = argparse.BooleanOptionalAction if setting.default \
                else "store_true"
        elif setting.default is not None:
            options.setdefault("type", type(setting.default))
        default = None if setting.name in RESUMED else setting.default
        actions.append(parser.add_argument("--" + setting.name.replace("_", "-"),
                                           default=default, **options))
    term = flag_term(parser)
    for action, setting in zip(actions, DOCUMENTED):
        own = "; with --resume, the run's own" if setting.name in RESUMED else ""
        action.help = render(setting.metadata["help"] + own, term).replace("%", "%%")


def _add_problem(parser: argparse.ArgumentParser, resume: str = "") -> None:
    """PROBLEM (with ``resume``: optional, the run's own) and its constructor arguments,
    ``-p NAME=VALUE``."""
    parser.add_argument("problem", nargs="?" if resume else None,
                        help="a built-in name (es-search list), gym:ENV_ID (any gymnasium "
                             "environment), module:Class or path/to/file.py:Class" +
                             ("; with --resume, the run's own if left out" if resume else ""))
    parser.add_argument("-p", "--param", dest="params", action=_Params, default={},
                        const="work=100", metavar="NAME=VALUE",
                        help="constructor argument of the agent (repeatable)" + resume)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2, no traceback
        raise UsageError(f"{self.prog}: {message}")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="es-search",
                     description="Evolution-strategies search of PyTorch agents on all cores.")
    parser.add_argument("--version", action="version", version=f"es_search {__version__}")
    verbs = parser.add_subparsers(dest="verb", required=True, parser_class=_Parser)
    parser.verbs = verbs.choices  # the verbs' own parsers, by name

    own = "; with --resume, the run's own"
    run = verbs.add_parser("run", help="optimise a problem", description="Optimise PROBLEM.")
    _add_problem(run, own + " where not given again")
    for name, kind, default in (("generations", int, "the problem's"),
                                ("population", int, "the problem's, else the strategy's"),
                                ("sigma", float, "the problem's, else the strategy's"),
                                ("seed", int, "0")):
        run.add_argument("--" + name, type=kind, help=f"default: {default}{own}")
    run.add_argument("--strategy", choices=sorted(STRATEGIES),
                     help=f"default: the problem's ({DEFAULT} for most){own}")
    run.add_argument("-o", "--strategy-option", dest="strategy_options", action=_Params,
                     default={}, const="reevaluate=True", metavar="NAME=VALUE",
                     help="option of the strategy (repeatable), e.g. -o learning_rate=0.1; "
                          f"see es-search list STRATEGY{own} where not given again")
    run.add_argument("--scheduler", metavar="ADDRESS",
                     help="dask scheduler to run on (e.g. tcp://host:8786); implies "
                          "--backend dask")
    _add_settings(run)
    run.add_argument("--no-test", action="store_true",
                     help="skip testing the best agent and the final centre at the end "
                          "(their test_scores(): held-out accuracy, returns of fresh "
                          "episodes)")
    add_callback_arguments(run)  # --tensorboard, --mlflow, --csv, --stop-at, ...

    test = verbs.add_parser(
        "test", help="test the best agent and the final centre of a run folder",
        description="Print the test_scores() of the best weights and the final centre of "
                    "a run written by `es-search run PROBLEM --out DIR` (also written to "
                    "DIR/test.json).")
    test.add_argument("out", metavar="DIR")

    check = verbs.add_parser(
        "check", help="check that a problem's scores are repeatable and, with score_batch, "
                      "that it scores each candidate on its own",
        description="Score PROBLEM twice under one task seed (es_search.check_repeatable) "
                    "and, with score_batch, a few candidates in groups, one by one and "
                    "through score() (es_search.check_score_batch). Exit status 0 when the "
                    "scores agree, 1 when some do not, 2 on bad input.")
    _add_problem(check)
    check.add_argument("--population", type=int, default=8,
                       help="candidates to score (default 8)")
    check.add_argument("--sigma", type=float, help="their jitter (default: the problem's)")
    check.add_argument("--seed", type=int, default=0)
    check.add_argument("--exact", action="store_true",
                       help="require bit-identical scores (default: within a relative "
                            "1e-6, the last bits of a batched product may differ)")

    listing = verbs.add_parser(
        "list", help="list the built-in problems and strategies, or one problem's "
                     "parameters and defaults, or one strategy's options",
        description="The built-in problems and strategies; a problem's parameters (-p "
                    "NAME=VALUE) and settings; a strategy's options (-o NAME=VALUE).")
    listing.add_argument("problem", nargs="?", metavar="PROBLEM_OR_STRATEGY")

    export = verbs.add_parser(
        "export", help="write a run's policy as one file that runs without es_search",
        description="Write a run's policy (observation normalisation, network, action "
                    "mapping) as TorchScript or ONNX (extra export).")
    export.add_argument("out", metavar="RUN_DIR")
    export.add_argument("--to", choices=("torchscript", "onnx"),
                        help="default: as --out ends (.onnx), else torchscript")
    export.add_argument("--out", dest="file", metavar="FILE",
                        help="default: RUN_DIR/policy.pt (.onnx)")
    export.add_argument("--which", choices=("chosen", "best", "center"), default="chosen",
                        help="the weights to export (default: what the run handed back)")

    from .bench import add_arguments
    bench = verbs.add_parser("bench", help="how a generation's scoring scales with n_jobs here",
                             description="Time a generation of 0, 1 and 10 ms scores "
                                         "(population 64) for n_jobs from 1 to all cores.")
    add_arguments(bench)
    return parser


def add_callback_arguments(parser: Any) -> None:
    """``es-search run``'s tracking and stopping flags; a stopping rule's flag names
    (``setting``) what its callback's :class:`~es_search.errors.SettingError` calls it."""
    track = parser.add_argument_group("tracking")
    track.add_argument("--tensorboard", metavar="DIR", default=None,
                       help="log each generation for TensorBoard into DIR "
                            "(needs es_search[tensorboard])")
    track.add_argument("--mlflow", action="store_true",
                       help="track the run in MLflow (experiment es_search) at "
                            "$MLFLOW_TRACKING_URI, else ./mlruns (needs es_search[mlflow])")
    track.add_argument("--csv", metavar="FILE", default=None,
                       help="write the history to FILE, one CSV row per generation")
    stop = parser.add_argument_group("stopping rules (continue a stopped run with "
                                     "--out DIR --resume, without the rule)")
    for flag, kind, metavar, setting, text in (
            ("--stop-at", float, "SCORE", "StopAtScore target",
             "stop once the best score reaches SCORE"),
            ("--patience", int, "N", "EarlyStopping patience",
             "stop after N generations without improvement of the best score"),
            ("--min-delta", float, "DELTA", "EarlyStopping min_delta",
             "with --patience: the least gain that counts as an improvement (default 0)"),
            ("--max-time", float, "SECONDS", "MaxTime seconds",
             "stop after the first generation that ends SECONDS after the start (or the "
             "resume)")):
        stop.add_argument(flag, type=kind, metavar=metavar, help=text).setting = setting


def callbacks_from_args(args: Any) -> list:
    """The callbacks the flags of ``args`` ask for, trackers first, checked before any
    work (a bad value or a missing extra: one line on stderr, exit status 2)."""
    if args.min_delta is not None and args.patience is None:
        raise ValueError("--min-delta goes with --patience N (generations without an "
                         "improvement of more than DELTA); add --patience")
    from .callbacks import (CSV, EarlyStopping, MaxTime, MLflow, StopAtScore, TensorBoard,
                            as_callbacks)
    callbacks: list = []
    if args.tensorboard is not None:
        callbacks.append(TensorBoard(args.tensorboard))
    if args.mlflow:
        callbacks.append(MLflow(tags={"es_search.problem": args.problem}))
    if args.csv is not None:
        callbacks.append(CSV(args.csv))
    if args.stop_at is not None:
        callbacks.append(StopAtScore(args.stop_at))
    if args.patience is not None:
        callbacks.append(EarlyStopping(args.patience, args.min_delta or 0.0))
    if args.max_time is not None:
        callbacks.append(MaxTime(args.max_time))
    return as_callbacks(callbacks, args.out)
