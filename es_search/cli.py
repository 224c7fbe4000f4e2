"""The ``es-search`` command line: ``run``, ``test``, ``check``, ``list``, ``bench`` and
``export``."""
from __future__ import annotations

import argparse
import faulthandler
import inspect
import math
import os
import re
import shlex
import shutil
import sys
import time
from pathlib import Path
from typing import Any, Sequence

from . import bench
from .agent import has_score_batch, overrides
from .cli_parser import RESUMED, UsageError, build_parser, callbacks_from_args, flag_term
from .errors import (ScoreError, SettingError, WorkerError, one_line_warnings, python_term,
                     render, score_message, setting_message, worker_message)
from .folder import CHOSEN_WEIGHTS, TEST, RunDir
from .interrupt import (Terminated, end_command_start, release_workers, sigterm_as_interrupt,
                        silence_stdout)
from .checks import check_int, did_you_mean, keyword_parameters
from .lock import acquire
from .pickling import check_agent
from .problems import BUILTINS, load_problem, problem_defaults
from .score_checks import ScoreBatchMismatch, check_score_batch, repeat_and_score
from .selection import describe, label
from .settings import DOCUMENTED, Settings
from .loop import run
from .held_out import TestScoresError, held_out_figures, held_out_test
from .spec import RunSpec, load_run
from .strategies import DEFAULT, STRATEGIES

__all__ = ["main", "build_parser", "flag_term", "resume_command", "UsageError"]


def _cmd_list(args: argparse.Namespace) -> int:
    if args.problem in STRATEGIES and args.problem not in BUILTINS:
        print(_strategy_text(args.problem))
    elif args.problem and re.fullmatch(r"[\w-]+", args.problem) and args.problem not in \
            BUILTINS and did_you_mean(args.problem, STRATEGIES):  # a strategy misspelt
        raise UsageError(f"unknown problem or strategy {args.problem!r}"
                         f"{did_you_mean(args.problem, [*BUILTINS, *STRATEGIES])}; es-search "
                         f"list names them all")
    elif args.problem:
        print(_problem_text(args.problem))
    else:
        wide, widest = max(map(len, BUILTINS)), max(map(len, STRATEGIES))
        print("\n".join([
            "problems:", *(f"  {name:<{wide}}  {_about(load_problem(name), True)}"
                           for name in BUILTINS),
            "strategies (--strategy NAME, options -o NAME=VALUE):", *(
                f"  {name:<{widest}}  {_about(cls, True)}"
                f"{' (default)' if name == DEFAULT else ''}\n"
                f"  {'':<{widest}}  options: {_options(cls)}"
                for name, cls in STRATEGIES.items())]))
    return 0


def _about(cls: type, first: bool = False) -> str:
    """The first paragraph (``first``: sentence) of ``cls``'s own docstring, plain text."""
    doc = _plain(" ".join(inspect.cleandoc(vars(cls).get("__doc__") or "").split(
        "\n\n")[0].split()))
    return doc.split(". ")[0].rstrip(".") if first else doc


def _plain(doc: str) -> str:
    """A docstring without ````code```` marks and Sphinx roles."""
    return re.sub(r":\w+:`~?([^`]+)`", r"\1", doc.replace("``", ""))


def _parameters(parameters: Any, skip: Any = ()) -> str:
    """``name=default, ...`` of ``parameters`` (``name`` alone when it has no default)."""
    return ", ".join(p.name if p.default is p.empty else f"{p.name}={p.default!r}"
                     for p in parameters if p.name not in skip) or "none"


def _options(cls: type) -> str:
    """A strategy's options: its constructor's parameters with defaults, but its size."""
    return _parameters([p for p in inspect.signature(cls.__init__).parameters.values()
                        if p.default is not p.empty], ("population", "sigma"))


def _strategy_text(name: str) -> str:
    """Strategy ``name`` as ``es-search list NAME`` shows it (its docstring to its example)."""
    cls = STRATEGIES[name]
    doc = _plain(inspect.cleandoc(cls.__doc__ or "")).split("Example::")[0]
    own = inspect.signature(cls.__init__).parameters
    size = ", ".join(f"{key} {own[key].default}" for key in ("population", "sigma"))
    return "\n".join([f"{name}: {cls.__module__}.{cls.__qualname__}"
                      + (" (the default strategy)" if name == DEFAULT else ""),
                      *(("  " + line).rstrip() for line in doc.splitlines()),
                      f"  defaults (--population, --sigma): {size}"
                      + (" (None: as described above)" if "None" in size else ""),
                      f"  options (-o NAME=VALUE): {_options(cls)}"])


def _problem_text(spec: str) -> str:
    """Problem ``spec`` as ``es-search list PROBLEM`` shows it."""
    cls = load_problem(spec)
    fixed = {"env_id"} if getattr(cls, "env_id", "") else set()  # not a parameter
    if getattr(cls, "discrete", None) is False:
        fixed.add("greedy")  # continuous actions
    parameters = keyword_parameters(cls)
    shown = "any keyword (**kwargs)" if parameters is None else _parameters(parameters, fixed)
    defaults = problem_defaults(cls)
    strategy = defaults.get("strategy", DEFAULT)
    own = inspect.signature(STRATEGIES[strategy].__init__).parameters
    size = [f"{key} {defaults[key]}" if defaults[key] is not None else
            f"{key} {own[key].default} (the strategy's default)"
            for key in ("population", "sigma")]
    options = [f"-o {k}={v!r}" for k, v in (defaults.get("strategy_options") or {}).items()]
    return "\n".join([f"{spec}: {cls.__module__}.{cls.__qualname__}",
                      *(["  " + _about(cls)] if _about(cls) else []),
                      f"  parameters (-p NAME=VALUE): {shown}",
                      f"  es-search run {spec} uses: " + ", ".join(
                          [f"strategy {strategy}", *size,
                           f"generations {defaults['generations']}", *options])])


def _cmd_run(args: argparse.Namespace) -> int:
    from .pools.dask_pool import scheduler_client

    own = RunDir(args.out).config if args.resume and args.out else {}  # the run's
    if args.problem is None:  # es-search run --resume --out DIR: the run's own
        if not own.get("spec"):
            raise UsageError(
                "es-search run: error: the following arguments are required: problem" + (
                    f" ({args.out} holds a run started in Python whose agent its config "
                    f"cannot rebuild: name its class, FILE.py:CLASS)" if own else
                    " (left out only with --resume --out DIR of a run)"))
        args.problem, args.cwd = own["spec"]["problem"], own["spec"]["cwd"]
    for name in RESUMED:  # not given again: the run's own, else the default
        if getattr(args, name) is None:
            setattr(args, name, own.get(name, getattr(Settings, name)))
    settings = {setting.name: getattr(args, setting.name) for setting in DOCUMENTED}
    if own.get("score_kwargs"):  # a run started in Python: no flag gives them again
        settings["score_kwargs"] = RunDir(args.out).score_kwargs(own["score_kwargs"])
    if args.scheduler is not None:
        if args.backend not in (None, "dask"):
            raise UsageError(f"--scheduler is a dask scheduler; it cannot be used with "
                             f"--backend {args.backend}")
        settings["backend"] = "dask"
    Settings(**settings)  # run()'s checks, before any work (the spec's: when it is made)
    spec = RunSpec.of(vars(args))
    spec.problem_class()  # a problem that cannot be loaded: said before anything else
    callbacks = callbacks_from_args(args)
    if args.resume:  # what is not given again is the run's own
        if RunDir(args.out).generations() is None:  # a typo in --out?
            print(f"{args.out} holds no run yet: --resume starts a new one there")
        spec = RunSpec.resume(args.out, spec)
    ended = RunDir(args.out).end() if args.resume else {}  # a finished run's end
    scored: list = []  # the generations this command scores
    with scheduler_client(args.scheduler):
        started = time.perf_counter()
        result = run(spec, callbacks=[*callbacks, scored.append], **settings)
    retested = ended.get("select_tasks", args.select_tasks) != args.select_tasks
    return _print_run(args, result, time.perf_counter() - started,
                      done_before=args.resume and not scored, retested=retested)


def _print_run(args: argparse.Namespace, result: Any, elapsed: float,
               done_before: bool, retested: bool = False) -> int:
    """Print ``result`` and test it (``done_before``: a resumed run with no generation
    left, whose end and test are the earlier ones unless ``retested``: its end's
    selection done again with another ``--select-tasks``)."""
    searched = result.history[-1]["seconds"]  # a run has done a generation at least
    print(f"{args.problem}: best score {result.best_score + 0.0:.6g} after "  # -0.0 reads 0
          f"{result.generations} generation{'s' if result.generations != 1 else ''}, "
          f"{result.evaluations} evaluations in {searched:.1f} s of search "
          f"({elapsed:.1f} s this command)")
    if not math.isfinite(result.best_score):  # nothing to keep: say so, and fail
        print(f"es-search: error: no finite score in {result.evaluations} evaluations "
              f"(every score() was NaN or infinite, or failed under --on-error worst)",
              file=sys.stderr)
        return 1
    print(describe(result.chosen, result.selection) + (
        f" ({Path(args.out) / CHOSEN_WEIGHTS})" if args.out else " (not saved: --out DIR "
        "writes the run)"))
    if result.stopped_by:
        print(f"stopped early: {result.stopped_by}" + (
            " (continue the run with --resume, without this rule)" if args.out else ""))
    weights, earlier = {"best": result.best_weights, "center": result.center_weights,
                        result.chosen: result.chosen_weights}, None
    if done_before:  # a resumed run removes test.json with its first generation
        print(f"the run in {args.out}/ had already completed its {result.generations} "
              f"generations: " + (f"what it hands back chosen again on --select-tasks "
                                  f"{args.select_tasks}" if retested else "nothing left to "
                                  "do") + " (a larger --generations continues it)")
    if done_before and not retested:
        earlier = RunDir(args.out).test(n for n, w in weights.items() if w is not None)
    if earlier is not None and not args.no_test:
        print(f"the figures of its earlier test ({Path(args.out) / TEST}; "
              f"{_test_command(args.out)} tests it again):")
        _print_test(earlier, result.chosen)
    elif not args.no_test:
        args.testing = True  # a Ctrl-C now: the run is whole; say so, not "resume"
        try:
            figures = held_out_figures(result.agent, weights, args.out)
        except TestScoresError as exc:
            where = (f"; the run itself is complete in {args.out}/: once test_scores() is "
                     f"fixed, test it with: {_test_command(args.out)}" if args.out
                     else " (the run's result was not saved: pass --out DIR)")
            raise TestScoresError(f"{exc}{where}") from exc.__cause__
        if figures:
            _print_test(figures, result.chosen)
    if args.out:
        files = [f"{p.name} from its earlier test" if p.name == TEST and earlier is not None
                 else p.name for p in sorted(Path(args.out).iterdir())
                 if p.is_file() and not p.name.startswith(".")]
        print(f"results {'in' if done_before else 'written to'} {args.out}/ "
              f"({', '.join(files)})")
    return 0


def _cmd_check(args: argparse.Namespace) -> int:
    check_int("population", args.population, 2, " (candidates scored in groups)")
    spec = RunSpec.of(vars(args))
    agent = spec.build_agent({})
    check_agent(agent, workers=True)  # as a run on workers does
    problem, start = repeat_and_score(agent, seed=args.seed)  # as a run's repeat check
    if not problem and not math.isfinite(start):
        problem = (f"{type(agent).__name__}'s score is {start} for the starting agent: not "
                   f"a finite number, so it can never be kept as the best (a score must be "
                   f"a finite float, higher is better)")
    if problem:
        print(f"es-search check: {render(problem, args.term)}", file=sys.stderr)
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
        " and through score()" if overrides(agent, "score") else "")
    print(f"{args.problem}: {len(scores)} candidates get the same scores {ways} "
          f"({'bit for bit' if args.exact else 'within a relative 1e-6'}): "
          + ", ".join(f"{s:.6g}" for s in scores))
    return 0


def _print_test(figures: dict, chosen: str) -> None:
    """A line per tested agent (``{name: figures}``: the best, the final centre, an
    earlier centre handed back); names with the same figures share a line."""
    lines: dict[str, list[str]] = {}  # the first name with some figures -> all those names
    for name in figures:
        first = next((n for n in lines if figures[n] == figures[name]), name)
        lines.setdefault(first, []).append(name)
    for first, names in lines.items():
        text = ", ".join(f"{key} {value:.6g}" if isinstance(value, float)
                         else f"{key} {value}" for key, value in figures[first].items())
        notes = [f"also {_tested(n)}" for n in names[1:]] + (
            ["handed back"] if chosen in names else [])
        print(f"test of {_tested(first)}" + (f" ({'; '.join(notes)})" if notes else "")
              + f", outside the search: {text}")


def _tested(name: str) -> str:
    return "the best agent" if name == "best" else label(name)


def _cmd_test(args: argparse.Namespace) -> int:
    agent, figures, chosen = held_out_test(args.out)
    if chosen is None:
        print(f"{args.out}: an unfinished run (resume it to finish); its best so far:")
    if figures:
        _print_test(figures, chosen)
    else:
        print(f"{args.out}: {type(agent).__name__} defines no test figures "
              f"(override Agent.test_scores() to have some)")
    return 0


def _cmd_export(args: argparse.Namespace) -> int:
    from .export import FORMATS
    path = args.file or os.path.join(args.out, "policy" + FORMATS[args.to or "torchscript"])
    result = load_run(args.out)
    with acquire(args.out, "export it"):  # of the run's answer, not of a run going on
        print(result.export(path, args.to, args.which))
    return 0


def program() -> list[str]:
    """How this command was started, for commands to paste: ``es-search`` or ``python -m
    es_search`` (the interpreter's full path unless it is the ``python`` on PATH)."""
    main_spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    if getattr(main_spec, "name", None) != "es_search.__main__":
        return ["es-search"]
    found = shutil.which("python")
    same = found is not None and os.path.abspath(found) == os.path.abspath(sys.executable)
    return ["python" if same else sys.executable, "-m", "es_search"]


def resume_command(argv: Sequence[str]) -> str:
    """The command line that continues an interrupted ``es-search run`` (with --out):
    ``--resume`` added, ``--overwrite`` dropped (it would replace what was kept)."""
    argv = [a for a in argv if a != "--overwrite"]
    return shlex.join([*program(), *argv, *([] if "--resume" in argv else ["--resume"])])


def _test_command(out: Any) -> str:
    return shlex.join([*program(), "test", str(out)])


_VERBS = {"run": _cmd_run, "test": _cmd_test, "check": _cmd_check, "list": _cmd_list,
          "bench": bench.main, "export": _cmd_export}


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
        # a setting as this command names it (check's: as the run's flags)
        args.term = term = flag_term(parser.verbs["run" if args.verb == "check" else args.verb])
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
                if isinstance(exc, WorkerError) else score_message(exc, term)
                if isinstance(exc, ScoreError) else str(exc))
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
        return (f"es-search: interrupted while testing; the run itself is complete in "
                f"{args.out}/; test it with:\n  {_test_command(args.out)}" if args.out else
                "es-search: interrupted while testing the run's result (not saved)")
    return (f"es-search: interrupted; resume with:\n  {resume_command(argv)}" if args.out
            else "es-search: interrupted (nothing saved: pass --out DIR to checkpoint a run)")
