"""The progress bar: a callback showing a tqdm bar over generations."""
from __future__ import annotations

from typing import Any


#: seconds between redraws when stderr is a file (a job scheduler's log), not a terminal
LOG_INTERVAL = 30.0


class ProgressBar:
    """One tick per generation, with the best and mean score; ``enabled=False`` shows
    nothing. Redrawn every ``LOG_INTERVAL`` seconds into a file, 10 times a second
    in a terminal."""

    def __init__(self, enabled: bool = True, desc: str = "es_search"):
        self.enabled, self.desc = enabled, desc
        self._bar: Any = None

    def on_start(self, info: Any) -> None:
        if self.enabled:
            import sys

            from tqdm.auto import tqdm
            isatty = getattr(sys.stderr, "isatty", None)
            to_file = not tqdm.__module__.startswith("tqdm.notebook") and not (
                isatty and isatty())
            self._bar = tqdm(total=info.generations, initial=info.first_generation,
                             desc=self.desc, unit="gen", dynamic_ncols=True,
                             mininterval=LOG_INTERVAL if to_file else 0.1)

    def on_generation(self, record: dict) -> None:
        if self._bar is not None:
            self._bar.set_postfix(best=f"{record['best_score']:.4g}",
                                  mean=f"{record['mean_score']:.4g}", refresh=False)
            self._bar.update(1)

    def on_end(self, result: Any) -> None:
        self.close()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def __getstate__(self) -> dict:  # never pickle a live bar
        return {"enabled": self.enabled, "desc": self.desc, "_bar": None}
