"""What a run returns."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from .agent import Agent


@dataclass
class Result:
    """The outcome of :func:`es_search.run`.

    - ``best_score``: the best finite score seen (NaN if no score was finite);
    - ``best_weights``: the weights that scored it, as ``{name: tensor}``;
    - ``evaluations``: ``score()`` calls made, the starting agent's included;
    - ``history``: one dict per generation with ``generation``, ``best_score`` (best so
      far), ``mean_score`` (mean of this generation's finite scores), ``scores`` (every
      candidate's, in candidate order), ``sigma``, ``nonfinite`` (non-finite scores
      returned), ``failures`` (``score()`` calls that raised, under
      ``on_error="worst"``, scored -inf), ``evaluations`` (so far) and ``seconds``
      (wall-clock time the run has spent, summed over resumes: the one field that
      differs between two runs with the same seed);
    - ``seed`` and ``config``: what defines the run.
    """

    best_score: float
    best_weights: dict[str, torch.Tensor]
    evaluations: int
    history: list[dict]
    seed: int
    config: dict = field(default_factory=dict)
    agent: Agent | None = field(default=None, repr=False)

    @property
    def generations(self) -> int:
        return len(self.history)

    def best_agent(self) -> Agent:
        """A copy of the starting agent with ``best_weights`` loaded."""
        if self.agent is None:
            raise ValueError("this Result holds no agent; load best_weights into yours "
                             "with agent.set_weights(result.best_weights)")
        agent = self.agent.clone()
        agent.set_weights(self.best_weights)
        return agent

    def plot(self, path: Any = None) -> Any:
        """Best and mean score per generation (needs matplotlib: ``es_search[plot]``)."""
        from .plotting import plot_history
        return plot_history(self.history, path)
