"""Replacing the text between a README's ``<!-- scaling-table:... -->`` markers."""
from __future__ import annotations

BEGIN, END = "<!-- scaling-table:begin -->", "<!-- scaling-table:end -->"


def table_in(text: str) -> str:
    """The text between the markers of ``text``."""
    if BEGIN not in text or END not in text:
        raise ValueError(f"no {BEGIN} ... {END} markers")
    return text.split(BEGIN, 1)[1].split(END, 1)[0].removeprefix("\n")


def update_readme(path: str, table: str) -> None:
    """Replace the text between the README's scaling-table markers with ``table``."""
    with open(path) as f:
        text = f.read()
    if BEGIN not in text or END not in text:
        raise ValueError(f"{path} has no {BEGIN} ... {END} markers")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    with open(path, "w") as f:
        f.write(head + BEGIN + "\n" + table + END + tail)
