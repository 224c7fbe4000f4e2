"""Replacing the text between a README's ``<!-- NAME:begin -->`` and ``<!-- NAME:end -->``
markers (``scaling-table`` for ``scaling.py``, ``control-table`` for ``control.py``)."""
from __future__ import annotations


def markers(name: str = "scaling-table") -> tuple[str, str]:
    return f"<!-- {name}:begin -->", f"<!-- {name}:end -->"


def table_in(text: str, name: str = "scaling-table") -> str:
    """The text between the markers of ``text``."""
    begin, end = markers(name)
    if begin not in text or end not in text:
        raise ValueError(f"no {begin} ... {end} markers")
    return text.split(begin, 1)[1].split(end, 1)[0].removeprefix("\n")


def update_readme(path: str, table: str, name: str = "scaling-table") -> None:
    """Replace the text between the README's ``name`` markers with ``table``."""
    begin, end = markers(name)
    with open(path) as f:
        text = f.read()
    if begin not in text or end not in text:
        raise ValueError(f"{path} has no {begin} ... {end} markers")
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    with open(path, "w") as f:
        f.write(head + begin + "\n" + table + end + tail)
