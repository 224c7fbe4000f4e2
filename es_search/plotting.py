"""A PNG of best and mean score per generation. matplotlib is an optional extra."""
from __future__ import annotations

import math
from typing import Any, Sequence

from .extras import require


def plot_history(history: Sequence[dict], path: Any = None) -> Any:
    """Plot ``history``; save to ``path`` when given. Returns the matplotlib figure."""
    matplotlib = require("matplotlib", "plot")
    if path is not None:
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    generations = [h["generation"] for h in history]
    fig, ax = plt.subplots(figsize=(6, 3.5), dpi=100)
    ax.plot(generations, [h["best_score"] for h in history], label="best so far")
    ax.plot(generations, [h["mean_score"] if math.isfinite(h["mean_score"]) else math.nan
                          for h in history], label="generation mean", alpha=0.7)
    ax.set_xlabel("generation")
    ax.set_ylabel("score")
    ax.legend(loc="lower right")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    if path is not None:
        fig.savefig(path)
        plt.close(fig)
    return fig
