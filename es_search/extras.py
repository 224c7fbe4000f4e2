"""Optional dependencies: imported when used, and named with their extra when missing."""
from __future__ import annotations

from typing import Any


def require(module: str, extra: str) -> Any:
    """Import an optional dependency or say which extra installs it.

    >>> require("math", "none").sqrt(4.0)
    2.0
    """
    import importlib
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(f"{module} is not installed; install it with "
                          f"pip install 'es_search[{extra}]'") from exc
