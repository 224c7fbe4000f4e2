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
        top = module.split(".")[0]
        package = _PACKAGES.get(top, top)
        if isinstance(exc, ModuleNotFoundError) and exc.name == top:
            raise ImportError(f"{package} is not installed; install it with "
                              f"pip install 'es_search[{extra}]'") from exc
        raise ImportError(f"{package} is installed but {module} cannot be imported "
                          f"({type(exc).__name__}: {exc}); reinstall it with pip install "
                          f"--force-reinstall 'es_search[{extra}]'") from exc


#: import name -> the package pip installs it from, where they differ
_PACKAGES = {"sklearn": "scikit-learn"}
