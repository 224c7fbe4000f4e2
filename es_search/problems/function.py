"""Any function of a vector as an agent: black-box optimisation without a class."""
from __future__ import annotations

import math
from typing import Any, Callable, Mapping

import numpy as np
import torch

from ..agent import Agent
from ..checks import check, check_bool
from ..scores import as_real


class Function(Agent):
    """The vector ``x`` (float64, from ``x0``) searched for the lowest ``fn(x)`` (or the
    highest: ``minimize=False``). ``fn`` takes a NumPy array, returns a number and may be
    a lambda (it is cloudpickled). The score is ``-fn(x)`` when minimising.

    >>> import numpy as np, es_search
    >>> from es_search.problems import Function
    >>> agent = Function(lambda x: float(((x - 3) ** 2).sum()), x0=np.zeros(4))
    >>> result = es_search.run(agent, generations=150, strategy="adaptive-hill-climb",
    ...                        n_jobs=1, progress=False)
    >>> bool(-result.best_score < 1e-6)             # min f
    True
    >>> np.round(Function.x_of(result.best_weights), 3).tolist()
    [3.0, 3.0, 3.0, 3.0]
    """

    def __init__(self, fn: Callable[[np.ndarray], Any], x0: Any, minimize: bool = True):
        super().__init__()
        check("fn", fn, callable(fn), "a callable taking a NumPy vector and returning a "
              "number")
        x0 = np.array(x0, dtype=np.float64)
        if x0.ndim != 1 or x0.size == 0:
            raise ValueError(f"x0 must be a non-empty vector (1-d), got shape {x0.shape}")
        check("x0", x0, np.all(np.isfinite(x0)), "finite")
        check_bool("minimize", minimize)
        self.fn, self.minimize = fn, minimize
        self.x = torch.nn.Parameter(torch.from_numpy(x0), requires_grad=False)

    def get_flat(self) -> np.ndarray:
        """``Agent.get_flat`` for the one evolved vector ``x``: a float64 copy."""
        return self.x.detach().numpy().astype(np.float64)

    def set_flat(self, vector: Any) -> None:
        """``Agent.set_flat`` for the one evolved vector ``x``: a copy into its memory."""
        vector = np.asarray(vector)
        x = self.x.detach().numpy()
        if vector.shape != x.shape:
            raise ValueError(f"{type(self).__name__} evolves {x.size} values; got a vector "
                             f"of shape {vector.shape}")
        x[...] = vector

    def score(self, **kwargs: Any) -> float:
        value = as_real(self.fn(self.x.detach().numpy().copy(), **kwargs), "fn")
        return -value if self.minimize and not math.isnan(value) else value

    @staticmethod
    def x_of(weights: Mapping[str, Any]) -> np.ndarray:
        """The vector in a weights dict (``result.best_weights``, ``center_weights``)."""
        if not isinstance(weights, Mapping) or not torch.is_tensor(weights.get("x")):
            got = "{" + ", ".join(f"{k!r}: {type(v).__name__}" for k, v in weights.items()) \
                + "}" if isinstance(weights, Mapping) else type(weights).__name__
            raise TypeError(f"x_of takes a weights dict (result.best_weights or "
                            f"result.center_weights) of a Function run, {{'x': tensor}}, "
                            f"got {got}")
        return weights["x"].detach().numpy().copy()
