"""``TensorBoard(log_dir)``: scalars and a histogram of scores per generation, written
with TensorBoard's own record format (no TensorFlow, no thread). Extra ``tensorboard``.
"""
from __future__ import annotations

import json
import math
import os
import re
import socket
import time
from importlib import import_module
from pathlib import Path
from typing import Any

from ..checks import check_path
from ..extras import require
from ..files import to_json, writable_folder_problem
from .base import FileCallback, RunInfo, scalars

_PREFIX = "events.out.tfevents."
_STAMP = re.compile(re.escape(_PREFIX) + r"(\d+)")
#: histogram buckets at most (fewer for small populations)
BINS = 30


def _proto(name: str) -> Any:
    """A module of TensorBoard's protocol buffers (the extra ``tensorboard``)."""
    require("tensorboard", "tensorboard")
    return import_module(f"tensorboard.compat.proto.{name}")


class TensorBoard(FileCallback):
    """Log each generation to ``log_dir`` for TensorBoard, at step = generation: every
    number in the record, a histogram of the finite ``scores``, the config as text.

    Each ``run()`` writes a new event file that begins with a restart marker, so
    TensorBoard drops what an earlier run logged from that step on: a new run replaces
    the old one, and a resume (which logs its last done generation again) continues it.
    """

    _OPEN = ("_writer",)

    def __init__(self, log_dir: Any):
        self.log_dir = check_path("TensorBoard log_dir", log_dir)
        if self.log_dir.exists() and not self.log_dir.is_dir():
            raise ValueError(f"TensorBoard log_dir {str(self.log_dir)!r} is a file; give "
                             f"a folder (it is created if missing)")
        problem = writable_folder_problem(self.log_dir)
        if problem:
            raise ValueError(f"TensorBoard log_dir {str(self.log_dir)!r} cannot be "
                             f"written: {problem}")
        _proto("event_pb2")  # fail now, naming the extra, if tensorboard is missing
        self.path: Path | None = None  # the event file being written
        self._writer: Any = None

    def on_start(self, info: RunInfo) -> None:
        self.close()
        self._open()
        event_pb2 = _proto("event_pb2")
        first = info.history[-1]["generation"] if info.history else info.first_generation
        self._write(first, session_log=event_pb2.SessionLog(status=event_pb2.SessionLog.START))
        if not info.history:
            self._write_config(info.config, first)
        for record in info.history[-1:]:
            self._log(record)
        self._writer.flush()

    def on_generation(self, record: dict) -> bool:
        if self._writer is None:  # on_start was not called, or this copy was unpickled
            self._open()
        self._log(record)
        self._writer.flush()
        return False

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        self._writer = None

    def _open(self) -> None:
        """A new event file whose name sorts after every event file in ``log_dir``."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        stamps = [int(m.group(1)) for p in self.log_dir.iterdir()
                  if (m := _STAMP.match(p.name))]
        stamp = max([int(time.time())] + [s + 1 for s in stamps])
        self.path = self.log_dir / (f"{_PREFIX}{stamp:010d}.{socket.gethostname()}."
                                    f"{os.getpid()}.es_search")
        from tensorboard.summary.writer.record_writer import RecordWriter
        self._writer = RecordWriter(open(self.path, "wb"))
        self._write(0, file_version="brain.Event:2")

    def _write(self, step: int, **fields: Any) -> None:
        event = _proto("event_pb2").Event(wall_time=time.time(), step=step, **fields)
        self._writer.write(event.SerializeToString())

    def _log(self, record: dict) -> None:
        summary_pb2 = _proto("summary_pb2")
        values = [summary_pb2.Summary.Value(tag=name, simple_value=value)
                  for name, value in scalars(record)]
        finite = [float(s) for s in record.get("scores") or () if math.isfinite(s)]
        if finite:
            values.append(summary_pb2.Summary.Value(tag="scores", histo=_histogram(finite)))
        self._write(record["generation"], summary=summary_pb2.Summary(value=values))

    def _write_config(self, config: dict, step: int) -> None:
        """The config as indented JSON, for TensorBoard's text plugin."""
        summary_pb2, tensor_pb2 = _proto("summary_pb2"), _proto("tensor_pb2")
        shape = _proto("tensor_shape_pb2").TensorShapeProto
        text = json.dumps(to_json(config), indent=2, sort_keys=True)
        tensor = tensor_pb2.TensorProto(dtype=_proto("types_pb2").DT_STRING,
                                        string_val=[text.encode()],
                                        tensor_shape=shape(dim=[shape.Dim(size=1)]))
        metadata = summary_pb2.SummaryMetadata(
            plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="text"))
        value = summary_pb2.Summary.Value(tag="config", metadata=metadata, tensor=tensor)
        self._write(step, summary=summary_pb2.Summary(value=[value]))

    def __repr__(self) -> str:
        return f"TensorBoard({str(self.log_dir)!r})"


def _histogram(values: list[float]) -> Any:
    import numpy as np
    array = np.asarray(values, dtype=np.float64)
    counts, edges = np.histogram(array, bins=min(BINS, len(values)))
    return _proto("summary_pb2").HistogramProto(
        min=float(array.min()), max=float(array.max()), num=float(array.size),
        sum=float(array.sum()), sum_squares=float((array ** 2).sum()),
        bucket_limit=[float(e) for e in edges[1:]], bucket=[float(c) for c in counts])
