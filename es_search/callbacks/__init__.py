"""Callbacks (protocol: :mod:`es_search.callbacks.base`): tracking (:class:`TensorBoard`,
:class:`MLflow`, :class:`CSV`; each imports its extra when built) and stopping rules
(:class:`StopAtScore`, :class:`EarlyStopping`, :class:`MaxTime`), and the command line's
flags that build them (:func:`add_arguments`, :func:`from_args`).
"""
from __future__ import annotations

from typing import Any

from .base import Callback, Failures, FunctionCallback, Generation, RunInfo, as_callbacks
from .stopping import EarlyStopping, MaxTime, StopAtScore
from .tracking import CSV, MLflow, TensorBoard

__all__ = ["CSV", "Callback", "EarlyStopping", "Failures", "FunctionCallback", "Generation",
           "MLflow", "MaxTime", "RunInfo", "StopAtScore", "TensorBoard", "as_callbacks"]


def add_arguments(parser: Any) -> None:
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


def from_args(args: Any) -> list[Callback]:
    """The callbacks the flags of ``args`` ask for, trackers first, checked before any
    work (a bad value or a missing extra: one line on stderr, exit status 2)."""
    if args.min_delta is not None and args.patience is None:
        raise ValueError("--min-delta goes with --patience N (generations without an "
                         "improvement of more than DELTA); add --patience")
    callbacks: list[Callback] = []
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
    return callbacks
