"""A tqdm bar over generations, imported only when shown."""
from __future__ import annotations

from typing import Any


class ProgressBar:
    def __init__(self, total: int, enabled: bool, initial: int = 0, desc: str = "es_search"):
        self._bar: Any = None
        if enabled:
            from tqdm.auto import tqdm
            self._bar = tqdm(total=total, initial=initial, desc=desc, unit="gen",
                             dynamic_ncols=True)

    def update(self, record: dict) -> None:
        if self._bar is not None:
            self._bar.set_postfix(best=f"{record['best_score']:.4g}",
                                  mean=f"{record['mean_score']:.4g}", refresh=False)
            self._bar.update(1)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def __getstate__(self) -> dict:  # never pickle a live bar
        return {"_bar": None}
