"""Tracking callbacks, the run's history logged as it goes: :class:`CSV`, :class:`TensorBoard`
(no TensorFlow needed; extra ``tensorboard``) and :class:`MLflow` (extra ``mlflow``)."""
from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import os
import re
import socket
import tempfile
import urllib.parse
import time
from importlib import import_module
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from ..checks import check, check_bool, check_path
from ..errors import warn_user
from ..extras import require
from ..files import atomic_write, check_writable, from_json, to_json
from .base import FileCallback, RunInfo, scalars


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, (list, tuple, dict)):
        return json.dumps(to_json(value))
    return str(value)  # a float's round-trips exactly; nan, inf, -inf as such


def _parse(cell: str) -> Any:
    if cell == "":
        return None
    try:
        return from_json(json.loads(cell))  # a number, a list or a dict
    except ValueError:
        return from_json(cell)  # nan, inf, -inf, or text


class CSV(FileCallback):
    """Write each generation's record to ``path`` as one CSV row, flushed at once.

    The columns are the record's fields (lists as JSON). A new run replaces the file; a
    resume rewrites the generations already done and appends. :meth:`load` reads it back."""

    _OPEN = ("_file", "_writer")

    def __init__(self, path: Any):
        self.path = check_path("CSV path", path, "a file path")
        if self.path.is_dir():
            raise ValueError(f"CSV path {str(self.path)!r} is a folder; give a file path "
                             f"such as {str(self.path / 'history.csv')!r}")
        check_writable(f"CSV path {str(self.path)!r}", self.path.parent)
        self._file: Any = None
        self._writer: Any = None
        self._columns: list[str] | None = None
        self._warned = False

    def on_start(self, info: RunInfo) -> None:
        self.close()
        self._columns = list(info.history[0]) if info.history else None
        self.path.parent.mkdir(parents=True, exist_ok=True)
        text = io.StringIO()
        if info.history:
            self._write(csv.writer(text), info.history, header=True)
        atomic_write(self.path, lambda f: f.write(text.getvalue()), mode="w")
        self._open("a")

    def on_generation(self, record: dict) -> None:
        if self._file is None:  # on_start was not called, or this copy was unpickled
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._open("w" if self._columns is None else "a")
        header = self._columns is None
        if header:
            self._columns = list(record)
        extra = [k for k in record if k not in self._columns]
        if extra and not self._warned:
            self._warned = True
            warn_user(f"CSV({str(self.path)!r}): the record has fields {extra} that the "
                      f"file's header (from the first record) lacks; they are not written")
        self._write(self._writer, [record], header)
        self._file.flush()

    def load(self) -> list[dict]:
        """The records in the file (numbers, lists and non-finite floats restored)."""
        with open(self.path, newline="") as f:
            header, *body = list(csv.reader(f)) or [[]]  # an empty file: no records
        return [{k: _parse(v) for k, v in zip(header, row)} for row in body]

    def _open(self, mode: str) -> None:
        self._file = open(self.path, mode, newline="")
        self._writer = csv.writer(self._file)

    def _write(self, writer: Any, records: Iterable[dict], header: bool) -> None:
        if header:
            writer.writerow(self._columns)
        writer.writerows([_cell(record.get(c)) for c in self._columns] for record in records)

    def __repr__(self) -> str:
        return f"CSV({str(self.path)!r})"


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
    number in the record, a histogram of the finite ``scores``, the config as text. Each
    ``run()`` writes a new event file that begins with a restart marker, so TensorBoard
    drops what an earlier run logged from that step on: a new run replaces the old one,
    and a resume, which logs the run's history again, continues it (whether or not the
    run was logged before)."""

    _OPEN = ("_writer",)

    def __init__(self, log_dir: Any):
        self.log_dir = check_path("TensorBoard log_dir", log_dir)
        check_writable(f"TensorBoard log_dir {str(self.log_dir)!r}", self.log_dir)
        _proto("event_pb2")  # fail now, naming the extra, if tensorboard is missing
        self.path: Path | None = None  # the event file being written
        self._writer: Any = None

    def on_start(self, info: RunInfo) -> None:
        self.close()
        self._open()
        event_pb2 = _proto("event_pb2")  # at step 0: the history is logged from its start
        self._write(0, session_log=event_pb2.SessionLog(status=event_pb2.SessionLog.START))
        self._write_config(info.config)
        for record in info.history:
            self._log(record)
        self._writer.flush()

    def on_generation(self, record: dict) -> None:
        if self._writer is None:  # on_start was not called, or this copy was unpickled
            self._open()
        self._log(record)
        self._writer.flush()

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
        finite = np.array([s for s in record.get("scores") or () if math.isfinite(s)], float)
        if finite.size:  # a histogram of the finite scores
            counts, edges = np.histogram(finite, bins=min(BINS, finite.size))
            histogram = summary_pb2.HistogramProto(
                min=finite.min(), max=finite.max(), num=finite.size, sum=finite.sum(),
                sum_squares=(finite ** 2).sum(), bucket_limit=edges[1:].tolist(),
                bucket=counts.tolist())
            values.append(summary_pb2.Summary.Value(tag="scores", histo=histogram))
        self._write(record["generation"], summary=summary_pb2.Summary(value=values))

    def _write_config(self, config: dict) -> None:
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
        self._write(0, summary=summary_pb2.Summary(value=[value]))

    def __repr__(self) -> str:
        return f"TensorBoard({str(self.log_dir)!r})"


#: tags holding the run folder (out=DIR) and its hash, which a resume searches for
OUT_TAG, OUT_KEY_TAG = "es_search.out", "es_search.out_sha256"
MAX_PARAM = 500  # longer params are cut: MLflow servers refuse them
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]+:")
_BAD_KEY = re.compile(r"[^\w\-. /]")


def _out_key(out: Any) -> str:
    return hashlib.sha256(str(Path(out).resolve()).encode()).hexdigest()


def _flatten(config: dict, prefix: str = "") -> dict[str, str]:
    """``{"strategy": {"sigma": 0.1}}`` -> ``{"strategy.sigma": "0.1"}`` (strings)."""
    flat: dict[str, str] = {}
    for key, value in config.items():
        if isinstance(value, dict) and value:
            flat.update(_flatten(value, f"{prefix}{key}."))
        else:
            flat[prefix + key] = value if isinstance(value, str) else json.dumps(to_json(value))
    return flat


def _check_reachable(uri: str) -> None:
    """An http(s) tracking server that refuses connections, now (MLflow itself retries
    for minutes, then fails inside the run)."""
    parts = urllib.parse.urlsplit(uri)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        socket.create_connection((parts.hostname, port), timeout=10).close()
    except OSError as exc:
        raise ValueError(f"MLflow tracking_uri {uri}: no server answers there "
                         f"({type(exc).__name__}: {exc}); start it, or pass another "
                         f"tracking_uri (or $MLFLOW_TRACKING_URI)") from None


class MLflow(FileCallback):
    """Track the run in MLflow through ``MlflowClient`` (no global active run is touched):
    the config as params, each generation's numbers as metrics at step = generation, and
    at the end the weights (``log_weights``) as artifacts, in ``experiment`` (created if
    missing). ``tracking_uri``: a URI or a local folder (default ``$MLFLOW_TRACKING_URI``,
    else ``./mlruns``; for a folder, ``MLFLOW_ALLOW_FILE_STORE`` defaults to true). A
    resume continues the MLflow run tagged with the same ``out`` folder."""

    _OPEN = ("_client",)  # rebuilt from tracking_uri when needed

    def __init__(self, experiment: str = "es_search", run_name: str | None = None,
                 tracking_uri: Any = None, tags: dict | None = None,
                 log_weights: bool = True):
        check("MLflow experiment", experiment, isinstance(experiment, str) and experiment,
              "a non-empty name (str)")
        check("MLflow run_name", run_name, run_name is None or isinstance(run_name, str),
              "a str or None")
        check("MLflow tracking_uri", tracking_uri, tracking_uri is None or isinstance(
            tracking_uri, (str, os.PathLike)), "a URI or a folder (str or pathlib.Path)")
        check("MLflow tags", tags, tags is None or isinstance(tags, dict) and all(
            isinstance(k, str) and isinstance(v, str) for k, v in tags.items()),
            "a dict of str to str")
        check_bool("MLflow log_weights", log_weights)
        require("mlflow", "mlflow")  # fail now, naming the extra, if mlflow is missing
        self.experiment, self.run_name, self.log_weights = experiment, run_name, log_weights
        uri = (os.environ.get("MLFLOW_TRACKING_URI") or "mlruns") if tracking_uri is None \
            else tracking_uri
        self.tracking_uri = uri if isinstance(uri, str) and _SCHEME.match(uri) else \
            Path(uri).resolve().as_uri()
        _check_reachable(self.tracking_uri)
        self.tags = dict(tags or {})
        self.run_id: str | None = None  # the MLflow run being logged
        self._client: Any = None
        self._done = -1  # generations logged before this run's start

    @property
    def client(self) -> Any:
        if self._client is None:
            if self.tracking_uri.startswith("file:"):
                os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
            tracking = require("mlflow.tracking", "mlflow")
            self._client = tracking.MlflowClient(tracking_uri=self.tracking_uri)
        return self._client

    def on_start(self, info: RunInfo) -> None:
        self.run_id, done = None, -1  # done: the last generation logged before
        if info.history and info.out is not None:  # a resume: the run of the same out folder
            runs = self.client.search_runs(
                [self._experiment_id()], filter_string=f"tags.`{OUT_KEY_TAG}` = "
                f"'{_out_key(info.out)}'", order_by=["attributes.start_time DESC"],
                max_results=1)
            self.run_id = runs[0].info.run_id if runs else None
        if self.run_id is None:
            self._create(info)
        else:
            self.client.update_run(self.run_id, status="RUNNING")
            logged = self.client.get_metric_history(self.run_id, "best_score")
            done = max((m.step for m in logged), default=-1)
        self._log([r for r in info.history if r["generation"] > done])
        self._done = done  # generations after the last checkpoint, logged before a kill

    def on_generation(self, record: dict) -> None:
        if self.run_id is None:  # on_start was not called
            self._create(None)
        if record["generation"] > self._done:  # scored again after a kill: logged already
            self._log([record])

    def on_end(self, result: Any) -> None:
        if self.run_id is None:
            return
        if self.log_weights:
            import torch
            with tempfile.TemporaryDirectory() as folder:
                for name in ("chosen_weights", "best_weights", "center_weights"):
                    weights, path = getattr(result, name, None), Path(folder) / f"{name}.pt"
                    if weights is not None:
                        torch.save(weights, path)
                        self.client.log_artifact(self.run_id, str(path))
        reason = getattr(result, "stopped_by", None)
        if reason:
            self.client.set_tag(self.run_id, "es_search.stopped_by", str(reason)[:5000])
        tags = self.client.get_run(self.run_id).data.tags
        for stale in ("es_search.error",) + (() if reason else ("es_search.stopped_by",)):
            if stale in tags:  # an earlier stop's
                self.client.delete_tag(self.run_id, stale)
        self.client.set_terminated(self.run_id, status="FINISHED")

    def on_error(self, error: BaseException) -> None:
        """Mark the run KILLED (Ctrl-C) or FAILED, with the error as a tag."""
        if self.run_id is None:
            return
        self.client.set_tag(self.run_id, "es_search.error", repr(error)[:5000])
        self.client.set_terminated(self.run_id, status="KILLED" if isinstance(
            error, KeyboardInterrupt) else "FAILED")

    def _experiment_id(self) -> str:
        found = self.client.get_experiment_by_name(self.experiment)
        try:
            return found.experiment_id if found else self.client.create_experiment(
                self.experiment)
        except Exception:  # created meanwhile by another process?
            found = self.client.get_experiment_by_name(self.experiment)
            if found is None:
                raise
            return found.experiment_id

    def _create(self, info: RunInfo | None) -> None:
        entities = require("mlflow.entities", "mlflow")
        tags = dict(self.tags)
        if info is not None and info.out is not None:
            tags[OUT_TAG] = str(Path(info.out).resolve())[:5000]
            tags[OUT_KEY_TAG] = _out_key(info.out)
        run = self.client.create_run(self._experiment_id(), run_name=self.run_name,
                                     tags=tags)
        self.run_id = run.info.run_id
        if info is not None:
            params = [entities.Param(_BAD_KEY.sub("_", k)[:250], v[:MAX_PARAM])
                      for k, v in _flatten(info.config).items()]
            self.client.log_batch(self.run_id, params=params)

    def _log(self, records: list[dict]) -> None:
        if not records:
            return
        entities = require("mlflow.entities", "mlflow")
        now = int(time.time() * 1000)
        metrics = [entities.Metric(_BAD_KEY.sub("_", name), value, now, r["generation"])
                   for r in records for name, value in scalars(r)]
        self.client.log_batch(self.run_id, metrics=metrics)

    def __repr__(self) -> str:
        return f"MLflow(experiment={self.experiment!r}, tracking_uri={self.tracking_uri!r})"
