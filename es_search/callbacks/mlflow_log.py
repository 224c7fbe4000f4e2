"""``MLflow(...)``: the run as an MLflow run: config as params, metrics per generation,
the best weights as an artifact. Needs ``mlflow-skinny`` (``es_search[mlflow]``)."""
from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
import time
from pathlib import Path
from typing import Any

from ..checks import check, check_bool
from ..extras import require
from ..files import to_json
from .base import Callback, RunInfo, scalars

#: tags holding the run folder (out=DIR) and its hash, which a resume searches for
OUT_TAG, OUT_KEY_TAG = "es_search.out", "es_search.out_sha256"
MAX_PARAM = 500  # longer params are cut: MLflow servers refuse them
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]+:")
_BAD_KEY = re.compile(r"[^\w\-. /]")


def _resolve_uri(tracking_uri: Any) -> str:
    if tracking_uri is None:
        tracking_uri = os.environ.get("MLFLOW_TRACKING_URI") or "mlruns"
    if isinstance(tracking_uri, str) and _SCHEME.match(tracking_uri):
        return tracking_uri
    return Path(tracking_uri).resolve().as_uri()


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


class MLflow(Callback):
    """Track the run in MLflow through ``MlflowClient`` (no global active run is touched):
    the config as params, each generation's numbers as metrics at step = generation, and
    at the end the weights (``log_weights``) as artifacts.

    - ``experiment``: created if missing; ``run_name``: default MLflow's; ``tags``:
      ``{str: str}``;
    - ``tracking_uri``: a URI or a local folder (default ``$MLFLOW_TRACKING_URI``, else
      ``./mlruns``); for a folder, ``MLFLOW_ALLOW_FILE_STORE`` defaults to true.

    A resume continues the MLflow run tagged with the same ``out`` folder.
    """

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
        self.tracking_uri, self.tags = _resolve_uri(tracking_uri), dict(tags or {})
        self.run_id: str | None = None  # the MLflow run being logged
        self._client: Any = None

    @property
    def client(self) -> Any:
        if self._client is None:
            if self.tracking_uri.startswith("file:"):
                os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
            tracking = require("mlflow.tracking", "mlflow")
            self._client = tracking.MlflowClient(tracking_uri=self.tracking_uri)
        return self._client

    def on_start(self, info: RunInfo) -> None:
        self.run_id = self._find(info.out) if info.history and info.out is not None else None
        done = -1
        if self.run_id is None:
            self._create(info)
        else:
            self.client.update_run(self.run_id, status="RUNNING")
            logged = self.client.get_metric_history(self.run_id, "best_score")
            done = max((m.step for m in logged), default=-1)
        self._log([r for r in info.history if r["generation"] > done])

    def on_generation(self, record: dict) -> bool:
        if self.run_id is None:  # on_start was not called
            self._create(None)
        self._log([record])
        return False

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

    def _find(self, out: Any) -> str | None:
        runs = self.client.search_runs(
            [self._experiment_id()], filter_string=f"tags.`{OUT_KEY_TAG}` = "
            f"'{_out_key(out)}'", order_by=["attributes.start_time DESC"], max_results=1)
        return runs[0].info.run_id if runs else None

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

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state["_client"] = None  # rebuilt from tracking_uri when needed
        return state

    def __repr__(self) -> str:
        return f"MLflow(experiment={self.experiment!r}, tracking_uri={self.tracking_uri!r})"
