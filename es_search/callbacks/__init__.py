"""Callbacks (protocol: :mod:`es_search.callbacks.base`): tracking (:class:`TensorBoard`,
:class:`MLflow`, :class:`CSV`) and stopping rules (:class:`StopAtScore`,
:class:`EarlyStopping`, :class:`MaxTime`), imported on first use.
"""
from importlib import import_module

from .base import Callback, Failures, FunctionCallback, Generation, RunInfo, as_callbacks

_LAZY = {"CSV": "csv_log", "MLflow": "mlflow_log", "TensorBoard": "tensorboard_log",
         "EarlyStopping": "stopping", "MaxTime": "stopping", "StopAtScore": "stopping"}

__all__ = ["CSV", "Callback", "EarlyStopping", "Failures", "FunctionCallback", "Generation",
           "MLflow", "MaxTime", "RunInfo", "StopAtScore", "TensorBoard", "as_callbacks"]


def __getattr__(name: str):
    if name in _LAZY:
        value = getattr(import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
