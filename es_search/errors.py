"""The errors a run raises when scoring fails, what a tolerated failure leaves, and
warnings pointed at the user's own code."""
from __future__ import annotations

import contextlib
import multiprocessing
import os
import sys
import warnings
from concurrent.futures import BrokenExecutor
from typing import Any, Callable, Iterator, NamedTuple, Sequence

from .pickling import cloudpickle


def failed_method(traceback_text: str) -> str:
    """The method a task's traceback failed in, as its user wrote it: ``score()``, or
    ``score_batch()`` for an agent that defines only that (``Agent.score()`` then
    scores the candidate as a group of one, ``batched.score_one``)."""
    if ", in score_one\n" in traceback_text:
        return "score_batch() (scoring the candidate alone, a group of one)"
    if traceback_text.startswith("score_batch() raised"):  # the group as a whole
        return "score_batch()"
    return "score()"


class ScoreError(RuntimeError):
    """``score()`` (or ``jitter_weights()``) raised inside a scoring task.

    ``generation``, ``index`` and ``seed`` identify the task; ``remote_traceback`` is the
    traceback as printed where it ran; ``__cause__`` is the original exception (when it
    could be pickled back from the worker). :func:`es_search.replay_task` reruns the
    task in this process, e.g. under a debugger; ``out`` is the run folder, when known.
    ``evaluate_seed`` is set when the task scored ``weights[index]`` of an
    :func:`es_search.evaluate` or :meth:`es_search.Evaluator.evaluate` call (the
    ``seed`` it was given; ``evaluate_kwargs``: it was given ``score_kwargs``): there is
    no run folder, and the message replays the weights dict instead.
    """

    def __init__(self, agent_class: str, generation: int, index: int, seed: int,
                 remote_traceback: str, cause: BaseException | None = None,
                 out: str | None = None, group_end: int | None = None,
                 evaluate_seed: int | None = None, evaluate_kwargs: bool = False):
        super().__init__(agent_class, generation, index, seed)
        self.agent_class, self.generation, self.index, self.seed = (
            agent_class, generation, index, seed)
        self.remote_traceback = remote_traceback
        self.cause = self.__cause__ = cause  # __cause__ is not pickled: cause is
        self.out = out
        #: set when ``score_batch()`` raised on candidates ``index`` to ``group_end - 1``
        #: that each score alone: then the group is the task, not one candidate
        self.group_end = group_end
        self.evaluate_seed, self.evaluate_kwargs = evaluate_seed, evaluate_kwargs

    def __str__(self) -> str:
        return score_message(self)

    def __reduce__(self):
        return (ScoreError, (self.agent_class, self.generation, self.index, self.seed,
                             self.remote_traceback, _picklable(self.cause), self.out,
                             self.group_end, self.evaluate_seed, self.evaluate_kwargs))


def score_message(error: ScoreError) -> str:
    """What a :class:`ScoreError` says: the task that failed, how to replay it in this
    process (a run's, or an ``evaluate()`` call's weights dict), its traceback."""
    e, g, i = error, error.generation, error.index
    traceback = f"Original traceback:\n{e.remote_traceback}"
    if '"<dynamic-code>"' in e.remote_traceback:
        traceback += ("(File \"<dynamic-code>\": code sent to the workers by value, such as a "
                      "class of your script or notebook; its line numbers are the source's"
                      + (".)\n" if e.group_end is not None
                         else ", and replay_task shows the file.)\n"))
    if e.group_end is not None:
        return (f"{e.agent_class}.score_batch() failed on candidates {i}-{e.group_end - 1} "
                f"of generation {g} (the first's task seed {e.seed}), though each of them "
                f"scores alone through score(). Check score_batch() with "
                f"es_search.check_score_batch(agent) (es-search check PROBLEM), or score one "
                f"candidate per call (score_batch_size=0).\n{traceback}")
    if e.evaluate_seed is not None:  # evaluate(): no run folder; the weights dict
        s = e.evaluate_seed
        kwargs = ", score_kwargs=<the call's>" if e.evaluate_kwargs else ""
        where = (f"weights[{i}] of evaluate(..., seed={s}, generation={g}) (task seed "
                 f"{e.seed}, es_search.task_seed({s}, {g}, {i}))")
        replay = (f"seed={s}, generation={g}, index={i}, weights=weights[{i}]{kwargs})\n"
                  f"(agent and weights: those given to evaluate() or the Evaluator; it "
                  f"scores a copy of the agent with weights[{i}] loaded, agent.task_seed "
                  f"set and random, NumPy and torch seeded with the task seed, as the "
                  f"task did).\n")
    else:
        where = "the starting agent" if g < 0 else f"generation {g}, candidate {i}"
        where += f" (task seed {e.seed})"
        source = repr(e.out) if e.out is not None else "<the run's out folder>"
        replay = f"out={source}, generation={g}, index={i})\n" + (
            "" if e.out is not None else f"or, without an out folder, replay_task("
            f"agent, seed=<run seed>, generation={g}, index={i}, center=..., "
            f"candidate=...).\n")
    return (f"{e.agent_class}.{failed_method(e.remote_traceback)} failed on {where}.\n"
            f"Reproduce it in this process (e.g. under a debugger) with\n"
            f"    es_search.replay_task(agent, {replay}{traceback}")


def _picklable(exc: BaseException | None) -> BaseException | None:
    """``exc`` if it survives pickling, else a RuntimeError carrying its repr."""
    if exc is None:
        return None
    try:
        cloudpickle.loads(cloudpickle.dumps(exc))
        return exc
    except Exception:
        return RuntimeError(f"{type(exc).__name__}: {exc}")


class TaskFailure(NamedTuple):
    """A task whose ``score()`` raised, under ``on_error="worst"`` (scored -inf)."""

    generation: int
    index: int
    seed: int
    traceback: str


class WorkerError(RuntimeError):
    """Worker processes died (or a task exceeded its timeout) more often than
    ``max_retries`` allows while scoring ``indices`` of ``generation``. In a run,
    ``out`` is set to its folder, whose checkpoint is intact ("": a run without one)."""

    def __init__(self, message: str, generation: int, indices: Sequence[int],
                 out: str | None = None):
        super().__init__(message, generation, list(indices), out)  # pickled as its args
        self.generation, self.indices, self.out = generation, list(indices), out

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


def ranges(indices: Sequence[int]) -> str:
    """``[0, 1, 2, 5]`` as ``"0-2, 5"``."""
    out, run = [], []
    for i in list(indices) + [None]:
        if run and (i is None or i != run[-1] + 1):
            out.append(str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}")
            run = []
        if i is not None:
            run.append(i)
    return ", ".join(out)


#: what a call to the workers raises when a worker was lost (loky's
#: TerminatedWorkerError, the cluster pools' WorkerLost: BrokenExecutors) or a chunk ran
#: over its time: the call is made again (``retrying``)
LOST = (BrokenExecutor, TimeoutError, multiprocessing.TimeoutError)


def retrying(call: Callable[[], Any], max_retries: int, task_timeout: float | None,
             generation: int | None, lost: Callable[[], list[int]]) -> Any:
    """``call()``, the one way every call to the workers is made: when a worker is
    lost (killed, crashed) or a chunk runs over its time, ``call()`` is made again
    (on fresh workers, with the same task seeds), ``max_retries`` times at most;
    then a :class:`WorkerError` is raised. ``lost()``: the candidates not scored
    (``generation`` None: the workers' start-up)."""
    for attempt in range(max_retries + 1):
        try:
            return call()
        except LOST as exc:
            error = exc
        timed_out = not isinstance(error, BrokenExecutor)
        what = (f"a task ran over task_timeout={task_timeout} s per score()"
                if timed_out else f"a worker process died ({type(error).__name__}: "
                f"{str(error).splitlines()[0] if str(error) else ''})")
        start = generation is None  # the workers' start-up: no candidate was given yet
        where = ("starting the workers" if start else
                 f"generation {generation}: candidates {ranges(lost())}")
        if attempt < max_retries:
            again = "starting them" if start else f"scoring candidates {ranges(lost())}"
            warn_user(f"{where}: {what}; {again} again on fresh workers with the same "
                      f"seeds (retry {attempt + 1} of {max_retries})")
            continue
        why = ("A score() that takes longer needs a larger task_timeout (or none); one "
               "that hangs can be stopped under a debugger" if timed_out else
               "A worker that dies is often killed for memory (the kernel's OOM killer) "
               "or crashed in native code")
        replay = "" if start else ("; replay one of these tasks in this process with "
                                   "es_search.replay_task to see it")
        raise WorkerError(
            f"{where} {'failed' if start else 'could not be scored'}: {what}, "
            f"{attempt + 1} time(s) (max_retries={max_retries}). {why}{replay}.",
            -1 if start else generation, lost()) from error


def python_term(setting: str, value: Any = None) -> str:
    """A setting as ``run()`` takes it: ``n_jobs``, or ``n_jobs=-1`` with a value."""
    return setting if value is None else f"{setting}={value}"


class _Terms(dict):
    """``{name}`` and ``{name=value}`` in a template, as ``term(name[, value])`` writes them."""

    def __init__(self, term: Callable[..., str]):
        self.term = term

    def __missing__(self, field: str) -> str:
        return self.term(*field.split("=", 1))


def render(template: str, term: Callable[..., str] = python_term) -> str:
    """``template`` with its settings, ``{name}`` or ``{name=value}``, written by ``term``."""
    return template.format_map(_Terms(term))


class SettingError(ValueError, TypeError):
    """A setting that ``run()`` (or a strategy, an agent) refuses: ``setting`` is its
    name, ``value`` what was given, ``rule`` what it must be, ``fix`` how to mend it
    (or ""). ``rule`` and ``fix`` write settings as ``{name}`` or ``{name=value}``, which
    :func:`setting_message` writes in the caller's terms: ``n_jobs=1`` in Python (``str()``),
    ``--n-jobs 1`` on the command line. With ``got=False`` the value leads, and the rule
    says what it conflicts with. A ValueError and a TypeError, as the checks raised one
    or the other."""

    def __init__(self, setting: str, value: Any, rule: str, fix: str = "",
                 got: bool = True):
        super().__init__(setting, value, rule, fix, got)
        self.setting, self.value, self.rule, self.fix, self.got = (
            setting, value, rule, fix, got)

    def __str__(self) -> str:
        return setting_message(self)


def setting_message(error: SettingError, term: Callable[..., str] = python_term) -> str:
    """A :class:`SettingError`'s message, its settings as ``term(name)`` and
    ``term(name, value_text)`` write them (a command line: as its flags)."""
    rule = render(error.rule, term)
    text = (f"{term(error.setting)} must be {rule}, got {error.value!r}" if error.got
            else f"{term(error.setting, repr(error.value))} {rule}")
    return text + (f"; {render(error.fix, term)}" if error.fix else "")


_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep


def warn_user(message: str, category: type[Warning] = RuntimeWarning,
              template: bool = False) -> None:
    """``warnings.warn`` attributed to the innermost caller outside es_search (the
    user's ``run()`` call, their callback, the ``es-search`` command), so the warning
    shows the user's line, not one of es_search's, and filters on it work. A
    ``template`` message (ours: no user data) names settings as SettingError's rule does;
    the warning keeps it (``template``) for the command line to write in its terms."""
    warning = category(render(message) if template else message)
    warning.template = message if template else None
    frame, level = sys._getframe(1), 1
    while frame.f_back is not None and os.path.abspath(
            frame.f_code.co_filename).startswith(_PACKAGE):
        frame, level = frame.f_back, level + 1
    warnings.warn(warning, stacklevel=level + 1)


@contextlib.contextmanager
def one_line_warnings(prog: str, term: Callable[..., str]) -> Iterator[None]:
    """es_search's warnings as ``PROG: RuntimeWarning: ...`` while the block runs, the
    settings of a :func:`warn_user` template written by ``term`` (a command line's
    flags): they are attributed to the caller's line, which for a command is its
    console script's ``sys.exit(main())``."""
    ours = {os.path.abspath(sys.argv[0]) if sys.argv and sys.argv[0] else "",
            _PACKAGE[:-1]}
    default = warnings.formatwarning

    def formatwarning(message: Any, category: type, filename: str, lineno: int,
                      line: str | None = None) -> str:
        where = os.path.abspath(filename)
        if where in ours or where.startswith(_PACKAGE) or "runpy" in filename:
            template = getattr(message, "template", None)  # settings in its terms
            text = message if template is None else render(template, term)
            return f"{prog}: {category.__name__}: {text}\n"
        return default(message, category, filename, lineno, line)

    warnings.formatwarning = formatwarning
    try:
        yield
    finally:
        warnings.formatwarning = default
