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
                              f"{install_command(extra)}") from exc
        raise ImportError(f"{package} is installed but {module} cannot be imported "
                          f"({type(exc).__name__}: {exc}); reinstall it with "
                          f"{install_command(extra, '--force-reinstall ')}") from exc


def install_command(extra: str, options: str = "") -> str:
    """The pip command that installs ``extra`` (into this checkout, if es_search runs
    from one)."""
    import os
    import shlex
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if os.path.isfile(os.path.join(root, "setup.cfg")) and \
            os.path.isdir(os.path.join(root, "es_search")):
        constraints = os.path.join(root, "constraints.txt")
        pin = f"-c {shlex.quote(constraints)} " if os.path.isfile(constraints) else ""
        return f"pip install {options}{pin}-e {shlex.quote(f'{root}[{extra}]')}"
    return f"pip install {options}'es_search[{extra}]'"


#: import name -> the package pip installs it from, where they differ
_PACKAGES = {"sklearn": "scikit-learn"}
