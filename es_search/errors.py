"""The errors a run raises when scoring fails and when a setting is refused, their
messages, and warnings pointed at the user's code."""
from __future__ import annotations

import contextlib
import itertools
import os
import sys
import warnings
from typing import Any, Callable, Iterator, NamedTuple, Sequence

from .pickling import cloudpickle
from .seed_sequences import SELECTION_GENERATION


def generation_name(generation: int) -> str:
    """A generation as a message names it: ``"generation 3"``, or the selection test's."""
    return "the end's selection test" if generation == SELECTION_GENERATION else \
        f"generation {generation}"


def candidates_named(indices: Sequence[int]) -> str:
    """``[0, 1, 2, 5]`` as ``"candidates 0-2, 5"``, ``[3]`` as ``"candidate 3"``.

    >>> candidates_named([0, 1, 2, 5]), candidates_named(range(3, 4))
    ('candidates 0-2, 5', 'candidate 3')
    """
    runs = [[i for _, i in run] for _, run in
            itertools.groupby(enumerate(indices), lambda pair: pair[1] - pair[0])]
    return "candidate" + "s" * (len(indices) != 1) + " " + ", ".join(
        str(r[0]) if len(r) == 1 else f"{r[0]}-{r[-1]}" for r in runs)


class ScoreError(RuntimeError):
    """``method`` (``"Walker.score()"``; raised in it or in ``jitter_weights()``) raised
    in the task ``generation``, ``index``, ``seed``: ``remote_traceback`` where it ran,
    ``cause`` (and ``__cause__``) what it raised (pickled, its repr if it cannot be).
    ``group_end``: ``score_batch()`` failed on candidates ``index`` to ``group_end - 1``,
    which each score alone. Set where caught:
    ``out``, the run folder; ``evaluate_seed``, the seed of the ``evaluate()`` call whose
    ``weights[index]`` failed (``evaluate_kwargs``: with ``score_kwargs``)."""

    out: str | None = None
    evaluate_seed: int | None = None
    evaluate_kwargs: bool = False

    def __init__(self, method: str, generation: int, index: int, seed: int,
                 remote_traceback: str, cause: BaseException | None = None,
                 group_end: int | None = None):
        super().__init__(method, generation, index, seed, remote_traceback, cause,
                         group_end)
        self.method, self.generation, self.index, self.seed = (
            method, generation, index, seed)
        self.remote_traceback, self.group_end = remote_traceback, group_end
        self.cause = self.__cause__ = cause

    def __str__(self) -> str:
        return score_message(self)

    def __reduce__(self) -> tuple:
        """Pickled with its cause (``__cause__`` is not), or the cause's repr."""
        cause = self.cause
        try:
            cloudpickle.loads(cloudpickle.dumps(cause))
        except Exception:  # noqa: BLE001 - whatever unpickling the user's class raises
            cause = RuntimeError(f"{type(cause).__name__}: {cause}")
        args = self.args[:5] + (cause,) + self.args[6:]
        return type(self), args, {**self.__dict__, "cause": cause}


def python_term(setting: str, value: Any = None) -> str:
    """A setting as ``run()`` takes it: ``n_jobs``, or ``n_jobs=-1`` with a value."""
    return setting if value is None else f"{setting}={value}"


def score_message(error: ScoreError, term: Callable[..., str] = python_term) -> str:
    """What a :class:`ScoreError` says: the task that failed, how to replay it in this
    process (from the run folder, or an ``evaluate()`` call's weights), its traceback;
    settings written by ``term``."""
    e, g, i = error, error.generation, error.index
    traceback = f"Original traceback:\n{e.remote_traceback}"
    if '"<dynamic-code>"' in e.remote_traceback:
        traceback += ("(File \"<dynamic-code>\": code sent to the workers by value, such as a "
                      "class of your script or notebook; its line numbers are the source's"
                      + (".)\n" if e.group_end is not None
                         else ", and replay_task shows the file.)\n"))
    if g == SELECTION_GENERATION:  # run()'s end: the search is complete
        return f"{render(selection_failure(e.method, i, e.seed, e.out), term)}\n{traceback}"
    if e.group_end is not None:
        return (f"{e.method} failed on {candidates_named(range(i, e.group_end))} "
                f"of {generation_name(g)} (the first's task seed {e.seed}), though each of them "
                f"scores alone through score(). Check score_batch() with "
                f"es_search.check_score_batch(agent), or score one candidate per call "
                f"(score_batch_size=0).\n{traceback}")
    if e.evaluate_seed is not None:  # evaluate(): no run folder; the weights dict
        s = e.evaluate_seed
        kwargs = ", score_kwargs=<the call's>" if e.evaluate_kwargs else ""
        where = (f"weights[{i}] of evaluate(..., seed={s}, generation={g}) (task seed "
                 f"{e.seed}, es_search.task_seed({s}, {g}, {i}))")
        replay = (f"seed={s}, generation={g}, index={i}, weights=weights[{i}]{kwargs})\n"
                  f"(agent and weights: those given to evaluate() or the Evaluator).\n")
    else:
        where = ("the starting agent" if g < 0 else f"generation {g}, candidate {i}"
                 ) + f" (task seed {e.seed})"
        replay = (f"out={e.out!r}, generation={g}, index={i})\n" if e.out else
                  f"out=<the run's out folder>, generation={g}, index={i})\nor, without an "
                  f"out folder, replay_task(agent, seed=<run seed>, generation={g}, "
                  f"index={i}, center=error.failures.center,\n"
                  f"    candidate=error.failures.candidates[{i}]) (error: this ScoreError).\n")
    return (f"{e.method} failed on {where}.\n"
            f"Reproduce it in this process (e.g. under a debugger) with\n"
            f"    es_search.replay_task(agent, {replay}{traceback}")


def selection_failure(method: str, index: int, seed: int, out: Any,
                      failed: int | None = None) -> str:
    """What a ``score()`` that raised on task ``index`` of the end's selection test says (of
    a run saved in ``out``), a :func:`render` template; ``failed``: the policy's tasks that
    raised under ``on_error="worst"``, which scored them -inf and lets the run end (None:
    it stopped)."""
    tolerated, again = (f"; {{on_error='worst'}} scored the {failed} failed task(s) of this "
                        f"policy -inf (said once per run)", " with another {select_tasks} "
                        "to test again") if failed else ("", "")
    saved = (f"resume the run{again}, or resume it" if out else
             "run it again ({out=DIR} keeps the search), or run it")
    return (f"{literal(method)} failed on task {index} of the end's selection test, which "
            f"scores the kept policies on fresh tasks (task seed {seed}){tolerated}. The "
            f"search is complete{'' if out else ' but not saved'}: fix score() and {saved} "
            f"with {{select_tasks=0}} to hand back the best evaluation untested.")


class TaskFailure(NamedTuple):
    """A task whose ``method`` (``"Walker.score()"``) raised, under ``on_error="worst"``
    (scored -inf)."""

    generation: int
    index: int
    seed: int
    traceback: str
    method: str


class WorkerError(RuntimeError):
    """Worker processes died (or a task exceeded its timeout) more often than
    ``max_retries`` allows while scoring ``indices`` of ``generation``. A run sets ``out``
    to its folder, whose checkpoint is intact ("": a run without one)."""

    out: str | None = None

    def __init__(self, message: str, generation: int, indices: Sequence[int]):
        super().__init__(message, generation, list(indices))  # pickled as its args
        self.generation, self.indices = generation, list(indices)

    def __str__(self) -> str:
        return worker_message(self)


def worker_message(error: WorkerError, resume: str | None = None) -> str:
    """A :class:`WorkerError`'s message and, in a run, what was saved and how to continue:
    ``resume`` follows "continue with" (default: the ``run()`` call that does)."""
    message = str(error.args[0])
    if error.out is None:
        return message
    if not error.out:
        return message + " Nothing was saved (no out folder)."
    before = f" (generations before {error.generation})" if error.generation >= 0 else ""
    return (f"{message} The checkpoint in {error.out}{before} is intact: after fixing the "
            f"cause, continue with" + (resume or f" run(..., out={error.out!r}, resume=True)."))


class _Terms(dict):
    """``{name}`` and ``{name=value}`` in a template, as ``term(name[, value])`` writes them."""

    def __init__(self, term: Callable[..., str]):
        self.term = term

    def __missing__(self, field: str) -> str:
        return self.term(*field.split("=", 1))


def render(template: str, term: Callable[..., str] = python_term) -> str:
    """``template`` with its settings, ``{name}`` or ``{name=value}``, written by ``term``."""
    return template.format_map(_Terms(term))


def literal(text: Any) -> str:
    """``text`` as a :func:`render` template's literal part: its braces doubled."""
    return str(text).replace("{", "{{").replace("}", "}}")


class SettingError(ValueError, TypeError):
    """A setting that ``run()`` (or a strategy, an agent) refuses: its name ``setting``,
    the ``value`` given, the ``rule`` it breaks and the ``fix`` (or ""), both
    :func:`render` templates. With ``got=False`` the value leads and the rule says what
    it conflicts with."""

    def __init__(self, setting: str, value: Any, rule: str, fix: str = "",
                 got: bool = True):
        super().__init__(setting, value, rule, fix, got)
        self.setting, self.value, self.rule, self.fix, self.got = (
            setting, value, rule, fix, got)

    def __str__(self) -> str:
        return setting_message(self)


def setting_message(error: SettingError, term: Callable[..., str] = python_term) -> str:
    """A :class:`SettingError`'s message, its settings written by ``term``."""
    rule = render(error.rule, term)
    text = (f"{term(error.setting)} must be {rule}, got {error.value!r}" if error.got
            else f"{term(error.setting, repr(error.value))} {rule}")
    return text + (f"; {render(error.fix, term)}" if error.fix else "")


_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep


def warn_user(message: str, category: type[Warning] = RuntimeWarning,
              template: bool = False) -> None:
    """``warnings.warn`` attributed to the innermost caller outside es_search, so filters
    on it work. A ``template`` message (:func:`render`'s) is kept on the warning for
    :func:`one_line_warnings` to write in its terms."""
    warning = category(render(message) if template else message)
    warning.template = message if template else None
    frame, level = sys._getframe(1), 1
    while frame.f_back is not None and os.path.abspath(
            frame.f_code.co_filename).startswith(_PACKAGE):
        frame, level = frame.f_back, level + 1
    warnings.warn(warning, stacklevel=level + 1)


@contextlib.contextmanager
def one_line_warnings(prog: str, term: Callable[..., str]) -> Iterator[None]:
    """es_search's warnings as ``PROG: RuntimeWarning: ...`` while the block runs, a
    :func:`warn_user` template's settings written by ``term`` (a command's flags).
    They are attributed to the command's own script, its ``sys.exit(main())``."""
    ours = {os.path.abspath(sys.argv[0]) if sys.argv and sys.argv[0] else "",
            _PACKAGE[:-1]}
    default = warnings.formatwarning

    def formatwarning(message: Any, category: type, filename: str, lineno: int,
                      line: str | None = None) -> str:
        where = os.path.abspath(filename)
        if where in ours or where.startswith(_PACKAGE) or "runpy" in filename:
            template = getattr(message, "template", None)
            text = message if template is None else render(template, term)
            return f"{prog}: {category.__name__}: {text}\n"
        return default(message, category, filename, lineno, line)

    warnings.formatwarning = formatwarning
    try:
        yield
    finally:
        warnings.formatwarning = default
