"""Callbacks: experiment tracking, stopping rules and the user's own hooks.

See :mod:`es_search.callbacks.base` for the protocol. Plain callables work too.
"""
from .base import Callback, FunctionCallback, RunInfo, as_callbacks

__all__ = ["Callback", "FunctionCallback", "RunInfo", "as_callbacks"]
