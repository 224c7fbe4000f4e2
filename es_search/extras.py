"""Optional dependencies: imported when used, and named with their extra when missing."""
from __future__ import annotations

import importlib
import os
import shlex
from typing import Any

#: import name -> the package pip installs it from, where they differ
_PACKAGES = {"sklearn": "scikit-learn"}


def require(module: str, extra: str) -> Any:
    """Import an optional dependency, or say which extra installs it."""
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
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if not os.path.isfile(os.path.join(root, "setup.cfg")):
        return f"pip install {options}'es_search[{extra}]'"
    constraints = os.path.join(root, "constraints.txt")
    pin = f"-c {shlex.quote(constraints)} " if os.path.isfile(constraints) else ""
    return f"pip install {options}{pin}-e {shlex.quote(f'{root}[{extra}]')}"
