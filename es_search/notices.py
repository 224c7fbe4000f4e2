"""What a run tells its user: warnings (a callback) and the messages of errors and
interruptions."""
from __future__ import annotations

import sys
from typing import Any

from .errors import ScoreError, failed_method, warn_user


class Warnings:
    """A callback that warns, once per run each, about non-finite scores and tolerated
    failures (``on_error="worst"``)."""

    def __init__(self, agent_name: str, out: Any):
        self.agent_name, self.out = agent_name, out
        self.warned: set[str] = set()

    def on_generation(self, record: Any) -> None:
        if record.failures and "failures" not in self.warned:
            self.warned.add("failures")
            warn_user(failure_message(self.agent_name, record.failures.detail, self.out))
        if record["nonfinite"] and "nonfinite" not in self.warned:
            self.warned.add("nonfinite")
            warn_user(
                f"{self.agent_name} scored {record['nonfinite']} candidate(s) of generation "
                f"{record['generation']} non-finite (NaN or inf); such candidates are never "
                f"kept. The history's 'nonfinite' counts them per generation (this warning "
                f"is given once per run).")


def failure_message(agent_name: str, failures: list, out: Any) -> str:
    first = failures[0]
    replay = (f"Replay one with es_search.replay_task(agent, out={str(out)!r}, "
              f"generation={first.generation}, index={first.index})" if out is not None
              else "To replay one in this process, run with out=DIR (the folder keeps what "
                   "es_search.replay_task(agent, out=DIR, generation=G, index=I) needs)")
    return (f"{agent_name}.{failed_method(first.traceback)} raised on {len(failures)} "
            f"candidate(s) of generation "
            f"{first.generation} (the first: candidate {first.index}, task seed "
            f"{first.seed}); on_error='worst' scored them -inf and the run goes on. "
            f"The history's 'failures' counts them per generation (this warning is given "
            f"once per run). {replay}. First traceback:\n{first.traceback}")


def explain(exc: Exception, out: Any) -> None:
    """Tell ``exc`` (a ScoreError or WorkerError) its run's folder, for its message."""
    exc.out = str(out) if out is not None else (None if isinstance(exc, ScoreError) else "")


def interrupted(exc: BaseException, out: Any, completed: int) -> None:
    """Add to ``exc`` (Ctrl-C, SIGTERM) a note: what was saved and how to continue."""
    if out is None:
        note = (f"es_search: interrupted after {completed} completed generation(s); "
                f"nothing was saved (pass out=DIR to checkpoint a run).")
    else:
        note = (f"es_search: interrupted after {completed} completed generation(s), all "
                f"saved in {out}; continue with run(..., out={str(out)!r}, resume=True) "
                f"and the same settings.")
    if hasattr(exc, "add_note"):  # Python 3.11+
        exc.add_note(note)
    else:  # pragma: no cover - Python 3.10: printed, as a note would be
        print(note, file=sys.stderr)