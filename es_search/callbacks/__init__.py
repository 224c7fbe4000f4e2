"""Callbacks (protocol: :mod:`es_search.callbacks.base`): tracking (:class:`TensorBoard`,
:class:`MLflow`, :class:`CSV`; each imports its extra when built) and stopping rules
(:class:`StopAtScore`, :class:`EarlyStopping`, :class:`MaxTime`); ``es-search run``'s
flags that build them are in :mod:`es_search.cli_parser`.
"""
from __future__ import annotations

from .base import Callback, Failures, FunctionCallback, Generation, RunInfo, as_callbacks
from .stopping import EarlyStopping, MaxTime, StopAtScore
from .tracking import CSV, MLflow, TensorBoard

__all__ = ["CSV", "Callback", "EarlyStopping", "Failures", "FunctionCallback", "Generation",
           "MLflow", "MaxTime", "RunInfo", "StopAtScore", "TensorBoard", "as_callbacks"]
