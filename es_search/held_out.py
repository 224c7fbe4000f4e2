"""The held-out test of a run's answer: ``test_scores()`` of its best weights, final
centre and what it handed back (``es-search test``, the end of ``es-search run``),
written to the run folder's ``test.json``."""
from __future__ import annotations

from typing import Any, Mapping

import torch

from .files import dump_json
from .folder import BEST_WEIGHTS, TEST, OutFolderError, RunDir
from .lock import acquire
from .selection import first_same
from .spec import RunSpec


class TestScoresError(RuntimeError):
    """The agent's ``test_scores()`` raised or returned something that is not a dict."""


def held_out_figures(agent: Any, weights: dict[str, dict | None], out: Any = None) -> dict:
    """``{name: figures}``: the ``test_scores()`` of ``agent`` with each of ``weights``
    (``{"best": ..., "center": ...}``; None skipped; weights equal to an earlier one's
    tested once, sharing its figures), also written to ``out/test.json``; {} if it has
    none."""
    def scores(weights: dict) -> dict:
        tested = agent.clone()
        tested.set_weights(weights)
        name = f"{type(agent).__name__}.test_scores()"
        try:
            with torch.no_grad():  # as score(): no gradients are used
                figures = tested.test_scores()
        except Exception as exc:  # noqa: BLE001 - the user's code: named, in one line
            raise TestScoresError(f"{name} raised {type(exc).__name__}: {exc}") from exc
        if not isinstance(figures, Mapping):
            raise TestScoresError(f"{name} returned {type(figures).__name__} "
                                  f"{figures!r:.60}; it must return a dict of name -> number "
                                  f"(or {{}} for none)")
        return dict(figures)

    figures: dict[str, dict] = {}
    for name, first in first_same(weights).items():
        figures[name] = figures[first] if first != name else scores(weights[name])
        if not figures[name]:
            return {}
    if out:  # before anything is printed: a reader that leaves early loses nothing
        dump_json(RunDir(out).path / TEST, figures, sort_keys=False)  # as test_scores() gave
    return figures


def held_out_test(folder: Any) -> tuple[Any, dict, str | None]:
    """``es-search test``: the run's agent, rebuilt from its spec; the
    :func:`held_out_figures` of its best weights, final centre and what it handed back;
    the name of the latter (None: the run has not ended, its best so far is tested).
    Refused while a run writes the folder."""
    run = RunDir(folder)
    agent = RunSpec.load(run.path).build_agent()
    if not (run.path / BEST_WEIGHTS).is_file():
        raise OutFolderError(f"{run.path} has no {BEST_WEIGHTS}: its run stopped before "
                             f"its first generation")
    with acquire(run.path, "test it"):  # a run going on changes its weights; test.json stays
        end = run.end()
        chosen = end.get("chosen", "best") if end else None
        weights = {"best": run.weights("best"), "center": run.weights("center")}
        if chosen:
            weights.setdefault(chosen, run.weights("chosen"))
        return agent, held_out_figures(agent, weights, folder), chosen
