"""An MLP classifier evolved on scikit-learn's 8x8 digits (extra ``digits``): 1,797 images
split once (stratified, seeded) into training (75%) and held-out test (25%) parts."""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ..agent import Agent
from ..batched import as_scores, vmap_call
from ..checks import check_choice, check_int
from ..extras import require

SPLITS = ("train", "test")
METRICS = ("log_likelihood", "accuracy")
_DATA: dict[tuple[str, int], tuple[torch.Tensor, torch.Tensor]] = {}


def load_split(split: str, split_seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """``(x, y)`` of one part: pixels in [0, 1] (float32 ``(n, 64)``), labels (int64)."""
    key = (split, split_seed)
    if key not in _DATA:
        datasets = require("sklearn.datasets", "digits")
        model_selection = require("sklearn.model_selection", "digits")
        digits = datasets.load_digits()
        x = digits.data.astype(np.float32) / 16.0
        y = digits.target.astype(np.int64)
        x_train, x_test, y_train, y_test = model_selection.train_test_split(
            x, y, test_size=0.25, stratify=y, random_state=split_seed)
        _DATA[("train", split_seed)] = (torch.from_numpy(x_train), torch.from_numpy(y_train))
        _DATA[("test", split_seed)] = (torch.from_numpy(x_test), torch.from_numpy(y_test))
    return _DATA[key]


class Digits(Agent):
    """A 64-``hidden``-10 tanh MLP on scikit-learn's 8x8 digits, batched; split=test scores
    held-out accuracy (extra: digits).

    - ``split``: ``"train"`` (what a search scores) or ``"test"`` (held out).
    - ``metric``: ``"log_likelihood"`` (smooth; the default on train) or ``"accuracy"``
      (the default on test).
    - ``hidden``: hidden units (0: linear). ``init_seed``: the starting weights'.
    """

    default_config = {"generations": 300, "population": 64, "sigma": 0.05,
                      "strategy": "openai-es",
                      "strategy_options": {"learning_rate": 0.03}}

    def __init__(self, split: str = "train", metric: str | None = None, hidden: int = 32,
                 init_seed: int = 0, split_seed: int = 0, score_batch_size: int = 32):
        super().__init__()
        check_choice("split", split, SPLITS)
        metric = check_choice("metric", metric or (
            "log_likelihood" if split == "train" else "accuracy"), METRICS)
        hidden = check_int("hidden", hidden, 0, " (0: linear)")
        load_split(split, int(split_seed))  # fail now if scikit-learn is missing
        self.split, self.metric, self.split_seed = split, metric, int(split_seed)
        self.score_batch_size = check_int("score_batch_size", score_batch_size, 0,
                                          " (0: score one candidate per call)")
        generator = torch.Generator().manual_seed(int(init_seed))
        sizes = [64] + ([int(hidden)] if hidden else []) + [10]
        modules: list[torch.nn.Module] = []
        for a, b in zip(sizes[:-1], sizes[1:]):
            layer = torch.nn.Linear(a, b).requires_grad_(False)
            for p in (layer.weight, layer.bias):  # torch's bounds, from init_seed
                p.uniform_(-1.0 / a ** 0.5, 1.0 / a ** 0.5, generator=generator)
            modules += [layer, torch.nn.Tanh()]
        self.net = torch.nn.Sequential(*modules[:-1])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def score_batch(self, params, seeds, **kwargs: Any) -> list[float]:
        """The metric of each candidate on this split; one forward pass for the group."""
        x, y = load_split(self.split, self.split_seed)
        logits = vmap_call(self, params, x)  # (group, n, 10)
        if self.metric == "accuracy":
            values = (logits.argmax(dim=-1) == y).to(torch.float64).mean(dim=-1)
        else:
            log_p = torch.log_softmax(logits.to(torch.float64), dim=-1)
            values = log_p.gather(-1, y.expand(len(seeds), -1).unsqueeze(-1)).mean(dim=(1, 2))
        return as_scores(values, len(seeds), self)

    def test_scores(self) -> dict[str, float]:
        """The accuracy on the held-out test part and on the training part."""
        return {"test_accuracy": self.accuracy("test"), "train_accuracy": self.accuracy("train")}

    def accuracy(self, split: str = "test") -> float:
        """This agent's accuracy on ``split``."""
        check_choice("split", split, SPLITS)
        x, y = load_split(split, self.split_seed)
        with torch.no_grad():
            return float((self(x).argmax(dim=-1) == y).to(torch.float64).mean())
