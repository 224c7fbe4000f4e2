"""What a run returns."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from .agent import Agent, weights_of
from .checks import check_choice
from .extras import require


@dataclass
class Result:
    """The outcome of :func:`es_search.run`.

    - ``best_score``: the best finite score seen (NaN if none was finite);
    - ``best_weights``: the weights that scored it, ``{name: tensor}``, with the shared
      state they were scored with;
    - ``evaluations``: ``score()`` calls made, the starting agent's included;
    - ``history``: one record per generation (:mod:`es_search.record`);
    - ``seed`` and ``config``: what defines the run;
    - ``stopped_by``: why a callback stopped the run early (its ``reason``), or None;
      loaded (:meth:`load`) from a run that did not end (interrupted, killed), says so;
    - ``center_weights``: the strategy's final centre (a hill climber's parent);
    - ``chosen``: ``"best"``, ``"center"`` or ``"center@G"`` (the centre after G
      generations), whichever tested best on fresh tasks (:mod:`es_search.selection`);
      ``chosen_weights`` and :meth:`chosen_agent` give it: the run's answer;
    - ``selection``: the test's figures (``{"best": {"mean", "std", "n"}, "center":
      ..., "center@G": ...}``), or None when nothing was tested.
    """

    best_score: float
    best_weights: dict[str, torch.Tensor]
    evaluations: int
    history: list[dict]
    seed: int
    config: dict = field(default_factory=dict)
    agent: Agent | None = field(default=None, repr=False)
    stopped_by: str | None = None
    center_weights: dict[str, torch.Tensor] | None = None
    chosen: str = "best"
    chosen_weights: dict[str, torch.Tensor] | None = None
    selection: dict | None = None

    @property
    def generations(self) -> int:
        return len(self.history)

    def __repr__(self) -> str:  # a summary: the history and weights can be huge
        name = self.config.get("strategy", {}).get("name")
        return (f"Result(best_score={self.best_score!r}, generations={self.generations}, "
                f"evaluations={self.evaluations}, strategy={name!r}, seed={self.seed}, "
                f"num_evolved={self.config.get('num_evolved')!r}, "
                f"stopped_by={self.stopped_by!r}, chosen={self.chosen!r})")

    def best_agent(self) -> Agent:
        """A copy of the starting agent with ``best_weights`` loaded."""
        return self._agent_with("best_weights")

    def center_agent(self) -> Agent:
        """A copy of the starting agent with ``center_weights`` loaded."""
        return self._agent_with("center_weights")

    def chosen_agent(self) -> Agent:
        """A copy of the starting agent with ``chosen_weights`` loaded: the run's answer."""
        return self._agent_with("chosen_weights")

    def _agent_with(self, name: str) -> Agent:
        weights = getattr(self, name)
        if self.agent is None:
            hint = (f", or load them into yours with agent.set_weights(result.{name})"
                    if weights is not None else "")
            raise ValueError(f"this Result holds no agent: pass one built as the run's "
                             f"was, es_search.Result.load(out, agent){hint}")
        if weights is None:
            raise ValueError(f"this Result holds no {name}")
        agent = self.agent.clone()
        agent.set_weights(weights)
        return agent

    def export(self, path: Any, to: str | None = None, which: str = "chosen",
               example: Any = None) -> str:
        """Write the policy of ``which`` weights (``"chosen"``, ``"best"``, ``"center"``)
        as one self-contained file, ``to="torchscript"`` or ``"onnx"`` (None: as ``path``
        ends); returns the path (:func:`es_search.export.export`)."""
        from .export import export
        check_choice("which", which, ("chosen", "best", "center"))
        return export(self._agent_with(f"{which}_weights"), path, to, example)

    @classmethod
    def load(cls, out: Any, agent: Agent | None = None) -> Result:
        """The Result of the run saved in ``out``, as of its last checkpoint (finished,
        stopped or interrupted). ``agent``, built as the run's was, makes the
        ``*_agent()`` methods work, and gives an unfinished run's ``center_weights``
        (the checkpoint's centre)."""
        from .folder import RunDir
        run = RunDir(out)
        saved = run.checkpoint()
        config = saved["config"]
        if agent is not None:
            run.check_agent(agent, config["agent"], config["num_evolved"])
        end, best, center = run.end(), run.weights("best"), run.weights("center")
        if center is None and agent is not None:  # not ended: as of the checkpoint
            center = weights_of(agent, saved["strategy"].center(saved["state"]),
                                saved["shared"])
        unfinished = (f"unfinished: interrupted after {len(saved['history'])} of "
                      f"{config['generations']} generations, before the end's test of "
                      f"what to hand back (the best evaluation stands in); resume it to "
                      f"finish")
        return cls(best_score=saved["best_score"], best_weights=best,
                   evaluations=saved["evaluations"], history=saved["history"],
                   seed=config["seed"], config=config,
                   agent=agent.clone() if agent is not None else None,
                   stopped_by=end.get("stopped_by") if end else unfinished,
                   center_weights=center,
                   chosen=end.get("chosen", "best"), selection=end.get("selection"),
                   chosen_weights=run.weights("chosen") if end else best)

    def plot(self, path: Any = None) -> Any:
        """Best and mean score per generation (needs matplotlib: ``es_search[plot]``), saved
        to ``path`` when given; returns the matplotlib figure."""
        require("matplotlib", "plot")
        if path is None:  # pyplot's: a notebook shows it
            import matplotlib.pyplot as plt
            fig = plt.figure(figsize=(6, 3.5), dpi=100)
        else:  # pyplot does not hold it: no figure left open, no backend chosen
            from matplotlib.figure import Figure
            fig = Figure(figsize=(6, 3.5), dpi=100)
        ax = fig.subplots()
        generations = [h["generation"] for h in self.history]
        ax.plot(generations, [h["best_score"] for h in self.history], label="best so far")
        ax.plot(generations, [h["mean_score"] for h in self.history], label="generation mean",
                alpha=0.7)
        ax.set(xlabel="generation", ylabel="score")
        ax.xaxis.get_major_locator().set_params(integer=True)  # no generation 2.5
        ax.legend(loc="lower right")
        ax.grid(alpha=0.3)
        fig.tight_layout()
        if path is not None:
            fig.savefig(path)
        return fig
