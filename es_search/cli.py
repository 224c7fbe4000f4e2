"""The ``es-search`` command line: ``run``, ``test``, ``check``, ``list``, ``bench`` and
``export``."""
from __future__ import annotations

import argparse
import ast
import faulthandler
import json
import math
import os
import shlex
import sys
import time
from dataclasses import fields
from pathlib import Path
from typing import Any, Callable, Sequence

from . import __version__
from .errors import (ScoreError, SettingError, WorkerError, one_line_warnings, python_term,
                     render, setting_message, worker_message)
from .interrupt import (Terminated, end_command_start, release_workers, sigterm_as_interrupt,
                        silence_stdout)
from .problems import BUILTINS
from .selection import describe, same_weights
from .settings import Settings
from .spec import TestScoresError
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
    try:
        value = ast.literal_eval(raw)
    except (ValueError, SyntaxError):
        try:  # JSON: {"is_slippery": false}, [1, null]
            value = json.loads(raw) if raw[:1] in "[{" and raw else raw
        except ValueError:
            value = raw
    return key, value


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
    run.add_argument("-p", "--param", action=_Params, default={}, const="work=100",
                     metavar="NAME=VALUE",
                     help="constructor argument of the agent (repeatable); with --resume, "
                          "the run's own where not given again")
    run.add_argument("-o", "--strategy-option", dest="strategy_options", action=_Params,
                     default={},
                     const="reevaluate=True", metavar="NAME=VALUE",
                     help="option of the strategy (repeatable), e.g. -o reevaluate=True, "
                          "-o learning_rate=0.1; see es-search list STRATEGY; with "
                          "--resume, the run's own where not given again")
    from .callbacks.options import add_arguments as add_callback_arguments
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
    check.add_argument("-p", "--param", action=_Params, default={}, const="work=100",
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


def _cmd_list(args: argparse.Namespace) -> int:
    from . import problems, strategies
    if args.problem in STRATEGIES and args.problem not in BUILTINS:
        print(strategies.describe(args.problem))
    elif args.problem:
        print(problems.describe(args.problem))
    else:
        print(problems.summary() + "\n" + strategies.summary())
    return 0


def _cmd_run(args: argparse.Namespace) -> int:
    from .callbacks.options import from_args
    from .folder import RunDir
    from .spec import RunSpec

    settings = {setting.name: getattr(args, setting.name) for setting in SETTINGS}
    if args.scheduler is not None:
        if args.backend not in (None, "dask"):
            raise UsageError(f"--scheduler is a dask scheduler; it cannot be used with "
                             f"--backend {args.backend}")
        settings["backend"] = "dask"
    Settings(**settings)  # run()'s checks, before any work (the spec's: when it is made)
    spec = RunSpec(args.problem, args.param, strategy=args.strategy,
                   strategy_options=args.strategy_options,
                   population=args.population, sigma=args.sigma,
                   generations=args.generations, seed=args.seed)
    spec.problem_class()  # a problem that cannot be loaded: said before anything else
    callbacks = from_args(args, args.problem)
    if args.resume:  # what is not given again is the run's own
        if RunDir(args.out).generations() is None:  # a typo in --out?
            print(f"{args.out} holds no run yet: --resume starts a new one there")
        spec = RunSpec.resume(args.out, spec)
    scored: list = []  # the generations this command scores
    from .pools.dask_pool import scheduler_client
    with scheduler_client(args.scheduler):
        started = time.perf_counter()
        result = spec.run(callbacks=[*callbacks, scored.append], **settings)
        elapsed = time.perf_counter() - started
    return _print_run(args, result, elapsed, done_before=args.resume and not scored)


def _print_run(args: argparse.Namespace, result: Any, elapsed: float,
               done_before: bool) -> int:
    """What ``es-search run`` prints of its ``result`` (``done_before``: a resumed run
    that had no generation left, whose end and test are the earlier ones), and the test
    of its best weights and final centre."""
    from .folder import CHOSEN_WEIGHTS, TEST, RunDir
    from .spec import held_out_figures
    searched = result.history[-1]["seconds"] if result.history else 0.0
    print(f"{args.problem}: best score {result.best_score + 0.0:.6g} after "  # -0.0 reads 0
          f"{result.generations} generation{'s' if result.generations != 1 else ''}, "
          f"{result.evaluations} evaluations in {searched:.1f} s of search "
          f"({elapsed:.1f} s in all)")
    if not math.isfinite(result.best_score):  # nothing to keep: say so, and fail
        print(f"es-search: error: no finite score in {result.evaluations} evaluations "
              f"(every score() was NaN or infinite, or failed under --on-error worst)",
              file=sys.stderr)
        return 1
    print(describe(result.chosen, result.selection) + (
        f" ({Path(args.out) / CHOSEN_WEIGHTS})" if args.out else ""))
    if result.stopped_by:
        print(f"stopped early: {result.stopped_by}" + (
            " (continue the run with --resume, without this rule)" if args.out else ""))
    test_command = shlex.join([*program(), 'test', str(args.out)])
    if done_before:
        print(f"the run in {args.out}/ had already completed its {result.generations} "
              f"generations: nothing left to do (a larger --generations continues it)")
    same = same_weights(result.best_weights, result.center_weights)
    earlier = RunDir(args.out).test(result.center_weights is not None) if done_before \
        else None  # a resumed run removes test.json with its first generation
    if earlier is not None and not args.no_test:
        print(f"the figures of its earlier test ({Path(args.out) / TEST}; {test_command} "
              f"tests it again):")
        _print_test(earlier, same, result.chosen)
    elif not args.no_test:
        try:
            figures = held_out_figures(result.agent, result.best_weights,
                                       result.center_weights, args.out)
            if figures:
                _print_test(figures, same, result.chosen)
        except KeyboardInterrupt:  # the run is whole: say so, not "resume"
            args.testing = True
            raise
        except TestScoresError as exc:
            where = (f"; the run itself is complete in {args.out}/: once test_scores() is "
                     f"fixed, test it with: {test_command}" if args.out
                     else " (the run's result was not saved: pass --out DIR)")
            raise TestScoresError(f"{exc}{where}") from exc.__cause__
    if args.out:
        files = sorted(p.name for p in Path(args.out).iterdir() if p.is_file()
                       and not p.name.startswith("."))
        if earlier is not None:  # not this command's: say whose
            files = [f"{name} from its earlier test" if name == TEST else name
                     for name in files]
        print(f"results {'in' if done_before else 'written to'} {args.out}/ "
              f"({', '.join(files)})")
    return 0


def _cmd_check(args: argparse.Namespace) -> int:
    from .batch_check import ScoreBatchMismatch, check_score_batch, has_own_score
    from .batched import has_score_batch
    from .repeat_check import repeat_and_score
    from .problems import problem_defaults
    from .spec import RunSpec

    spec = RunSpec(args.problem, args.param, population=args.population,
                   sigma=args.sigma, seed=args.seed)
    agent = spec.build_agent()
    # two scores of the starting agent (task (seed, -1, 0)), as a run's repeat check
    problem, start = repeat_and_score(agent, seed=args.seed)
    if problem:
        print(f"es-search check: {problem}", file=sys.stderr)
        return 1
    if not math.isfinite(start):
        print(f"es-search check: {type(agent).__name__}'s score is {start} for the "
              f"starting agent: not a finite number, so it can never be kept as the best "
              f"(a score must be a finite float, higher is better)", file=sys.stderr)
        return 1
    print(f"{args.problem}: scored twice under one task seed, the same score, {start:.6g} "
          f"(repeatable)")
    if not has_score_batch(agent):
        return 0
    tolerance = {"rtol": 0.0, "atol": 0.0} if args.exact else {}
    sigma = spec.sigma or problem_defaults(type(agent))["sigma"] or 0.1
    try:
        scores = check_score_batch(agent, population=args.population, sigma=sigma,
                                   seed=args.seed, **tolerance)
    except ScoreBatchMismatch as exc:
        print(f"es-search check: {exc}", file=sys.stderr)
        return 1
    ways = "in one group, in two groups, one by one" + (
        " and through score()" if has_own_score(agent) else "")
    print(f"{args.problem}: {len(scores)} candidates get the same scores {ways} "
          f"({'bit for bit' if args.exact else 'within a relative 1e-6'}): "
          + ", ".join(f"{s:.6g}" for s in scores))
    return 0


def _print_test(figures: dict, same: bool, chosen: str) -> None:
    """One line per tested agent: the best, and the final centre (unless ``same``);
    the ``chosen`` one is called handed back."""
    shown = [("the best agent (also the final centre)" if same else "the best agent",
              figures["best"], "best")]
    if "center" in figures and not same:
        shown.append(("the final centre", figures["center"], "center"))
    for label, values, name in shown:
        label += " (handed back)" if name == chosen or same else ""
        text = ", ".join(f"{name} {value:.6g}" if isinstance(value, float)
                         else f"{name} {value}" for name, value in values.items())
        print(f"test of {label}, outside the search: {text}")


def _cmd_test(args: argparse.Namespace) -> int:
    from .spec import held_out_test
    agent, figures, same, chosen = held_out_test(args.out)
    if figures:
        _print_test(figures, same, chosen)
    else:
        print(f"{args.out}: {type(agent).__name__} defines no test figures "
              f"(override Agent.test_scores() to have some)")
    return 0


def _cmd_export(args: argparse.Namespace) -> int:
    from .export import FORMATS
    from .spec import load_run
    path = args.file or os.path.join(args.out, "policy" + FORMATS[args.to])
    print(load_run(args.out).export(path, args.to, args.which))
    return 0


def program() -> list[str]:
    """How this command was started, to print commands that can be pasted:
    ``es-search``, or ``python -m es_search`` (the interpreter's full path unless it is
    the ``python`` found on PATH)."""
    main_module = sys.modules.get("__main__")
    spec = getattr(main_module, "__spec__", None)
    if getattr(spec, "name", None) != "es_search.__main__":
        return ["es-search"]
    import shutil
    found = shutil.which("python")
    same = found is not None and os.path.abspath(found) == os.path.abspath(sys.executable)
    return ["python" if same else sys.executable, "-m", "es_search"]


def resume_command(argv: Sequence[str]) -> str:
    """The command line that continues an interrupted ``es-search run`` (with --out):
    ``--resume`` added, ``--overwrite`` dropped (it would replace what was kept)."""
    argv = [a for a in argv if a != "--overwrite"]
    return shlex.join([*program(), *argv, *([] if "--resume" in argv else ["--resume"])])


def _cmd_bench(args: argparse.Namespace) -> int:
    from .bench import main
    return main(args)


_VERBS = {"run": _cmd_run, "test": _cmd_test, "check": _cmd_check, "list": _cmd_list,
          "bench": _cmd_bench, "export": _cmd_export}


def main(argv: Sequence[str] | None = None) -> int:
    if argv is None and not faulthandler.is_enabled():  # the command: a crash in this
        faulthandler.enable()  # process (a score() scored here) shows where it was
    command = argv is None
    parser = build_parser()  # its last imports: a Ctrl-C until here is one line too
    end_command_start()  # from here, Ctrl-C is a KeyboardInterrupt, handled below
    argv = list(sys.argv[1:] if argv is None else argv)
    args, term = None, python_term
    if not argv:  # a bare `es-search`: what it can do, not one line about a missing verb
        parser.print_help(sys.stderr)
        return 2
    try:
        args = parser.parse_args(argv)
        term = flag_term(parser.verbs[args.verb])  # a setting as this command names it
        with sigterm_as_interrupt(), one_line_warnings("es-search", term):  # a scheduler's
            status = _VERBS[args.verb](args)                  # stop: the Ctrl-C way
        sys.stdout.flush()  # a closed pipe fails here, not at exit
        return status
    except BrokenPipeError:  # `es-search ... | head`: the reader left; no traceback
        silence_stdout()
        return 141  # as a shell reports a command killed by SIGPIPE
    except KeyboardInterrupt as exc:  # Ctrl-C (130), or SIGTERM (143)
        print(interrupted_message(args, argv), file=sys.stderr)
        return 143 if isinstance(exc, Terminated) else 130
    except (ValueError, TypeError, ImportError, ScoreError, WorkerError, TestScoresError,
            OSError) as exc:  # one line, no frames of es_search's
        bad_input = isinstance(exc, (ValueError, TypeError, ImportError))  # UsageError, ...
        if not bad_input and isinstance(exc, OSError):  # a full disk (> /dev/full too)
            silence_stdout()
        text = (setting_message(exc, term) if isinstance(exc, SettingError)  # --n-jobs
                else worker_message(exc, f":\n  {resume_command(argv)}")
                if isinstance(exc, WorkerError) else str(exc))
        print(text if text.startswith("es-search") else f"es-search: error: {text}",
              file=sys.stderr)  # argparse's own: "es-search run: error: ..."
        return 2 if bad_input else 1
    finally:
        if command:
            release_workers()


def interrupted_message(args: argparse.Namespace | None, argv: Sequence[str]) -> str:
    """What the command line says when Ctrl-C or SIGTERM stops it: for a run, how to
    continue it, or, stopped while testing a run that had ended, how to test it."""
    if args is None or args.verb != "run":
        return "es-search: interrupted"
    if getattr(args, "testing", False):  # set by _print_run
        if not args.out:
            return "es-search: interrupted while testing the run's result (not saved)"
        return (f"es-search: interrupted while testing; the run itself is complete in "
                f"{args.out}/; test it with:\n  {shlex.join([*program(), 'test', args.out])}")
    if args.out:
        return f"es-search: interrupted; resume with:\n  {resume_command(argv)}"
    return "es-search: interrupted (nothing saved: pass --out DIR to checkpoint a run)"


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
