"""Where a benchmark's figures come from: the commit they were measured on."""
from __future__ import annotations

import os
import subprocess


def commit() -> str:
    """This checkout's short commit hash, ``-dirty`` when tracked files differ from it
    ("unknown" outside git)."""
    try:
        return subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True,
                              text=True, cwd=os.path.dirname(os.path.abspath(__file__)),
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
