"""``CSV(path)``: the history as a CSV file, one row per generation, as the run goes."""
from __future__ import annotations

import csv
import io
import json
import re
from typing import Any, Iterable

from ..checks import check_path
from ..errors import warn_user
from ..files import atomic_write, from_json, to_json, writable_folder_problem
from .base import FileCallback, RunInfo

_INT = re.compile(r"-?\d+")


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, (list, tuple, dict)):
        return json.dumps(to_json(value))
    if isinstance(value, float):
        return repr(value)  # round-trips exactly; nan, inf, -inf as such
    return str(value)


def _parse(cell: str) -> Any:
    if cell == "":
        return None
    if cell[0] in "[{":
        return from_json(json.loads(cell))
    if _INT.fullmatch(cell):
        return int(cell)
    try:
        return float(cell)
    except ValueError:
        return cell


class CSV(FileCallback):
    """Write each generation's record to ``path`` as one CSV row, flushed at once.

    The columns are the record's fields (lists as JSON). A new run replaces the file; a
    resume rewrites the generations already done and appends. :meth:`load` reads it back.

    >>> import tempfile, os
    >>> log = CSV(os.path.join(tempfile.mkdtemp(), "history.csv"))
    >>> log.on_generation({"generation": 0, "best_score": 1.5, "scores": [1.5, -2.0]})
    False
    >>> log.on_end(None)
    >>> log.load()
    [{'generation': 0, 'best_score': 1.5, 'scores': [1.5, -2.0]}]
    """

    _OPEN = ("_file", "_writer")

    def __init__(self, path: Any):
        self.path = check_path("CSV path", path, "a file path")
        if self.path.is_dir():
            raise ValueError(f"CSV path {str(self.path)!r} is a folder; give a file path "
                             f"such as {str(self.path / 'history.csv')!r}")
        problem = writable_folder_problem(self.path.parent)
        if problem:
            raise ValueError(f"CSV path {str(self.path)!r} cannot be written: {problem}")
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

    def on_generation(self, record: dict) -> bool:
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
        return False

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
        self._file = self._writer = None

    def load(self) -> list[dict]:
        """The records in the file (numbers, lists and non-finite floats restored)."""
        with open(self.path, newline="") as f:
            rows = list(csv.reader(f))
        if not rows:
            return []
        header, *body = rows
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
