"""Callbacks: experiment tracking, stopping rules and the user's own hooks.

See :mod:`es_search.callbacks.base` for the protocol. Plain callables work too.

- tracking: :class:`TensorBoard` (``es_search[tensorboard]``), :class:`MLflow`
  (``es_search[mlflow]``), :class:`CSV`;
- stopping rules: :class:`StopAtScore`, :class:`EarlyStopping`, :class:`MaxTime`.
"""
from .base import Callback, FunctionCallback, RunInfo, as_callbacks
from .csv_log import CSV
from .mlflow_log import MLflow
from .stopping import EarlyStopping, MaxTime, StopAtScore
from .tensorboard_log import TensorBoard

__all__ = ["CSV", "Callback", "EarlyStopping", "FunctionCallback", "MLflow", "MaxTime",
           "RunInfo", "StopAtScore", "TensorBoard", "as_callbacks"]
