"""The progress bar: a callback showing a tqdm bar over generations (imported only when
shown)."""
from __future__ import annotations

from typing import Any


class ProgressBar:
    """One tick per generation, with the best and mean score; ``enabled=False`` shows
    nothing. A callback (:mod:`es_search.callbacks.base`)."""

    def __init__(self, enabled: bool = True, desc: str = "es_search"):
        self.enabled, self.desc = enabled, desc
        self._bar: Any = None

    def on_start(self, info: Any) -> None:
        if self.enabled:
            from tqdm.auto import tqdm
            self._bar = tqdm(total=info.generations, initial=info.first_generation,
                             desc=self.desc, unit="gen", dynamic_ncols=True)

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
