"""gymnasium control tasks with small policies (optional extra ``gym``).

The policy's forward pass runs in NumPy on weights copied out once per ``score()``:
torch's per-call overhead on tiny layers costs more than an environment step.
"""
from __future__ import annotations

import numpy as np
import torch

from ..agent import Agent
from ..plotting import require


class GymPolicy(Agent):
    """A linear or one-hidden-layer tanh policy scored by mean episode return.

    Subclasses set ``env_id`` and ``discrete``. Episodes are seeded from the task seed
    (``self.task_seed``) and a discrete policy *samples* its action from the softmax of
    its logits with NumPy's global RNG, which es_search seeds per task: the random-action
    case that breaks the blog post's ``Pool.map`` scheme is reproducible here.
    """

    env_id = ""
    discrete = True
    default_config = {"generations": 40, "population": 16, "sigma": 0.5,
                      "strategy_options": {"reevaluate": True}}

    def __init__(self, hidden: int = 0, episodes: int = 3, max_steps: int | None = None,
                 greedy: bool = False):
        super().__init__()
        gym = require("gymnasium", "gym")
        env = gym.make(self.env_id)
        self.obs_dim = int(np.prod(env.observation_space.shape))
        space = env.action_space
        self.act_dim = int(space.n) if self.discrete else int(np.prod(space.shape))
        self.action_high = None if self.discrete else np.asarray(space.high, dtype=np.float64)
        env.close()
        if int(episodes) < 1:
            raise ValueError(f"episodes must be >= 1, got {episodes}")
        self.episodes, self.max_steps, self.greedy = int(episodes), max_steps, bool(greedy)
        sizes = [self.obs_dim] + ([int(hidden)] if hidden else []) + [self.act_dim]
        self.layers = torch.nn.ModuleList(
            torch.nn.Linear(a, b) for a, b in zip(sizes[:-1], sizes[1:]))
        with torch.no_grad():  # start from a zero policy: the search does the rest
            for layer in self.layers[-1:]:
                layer.weight.zero_()
                layer.bias.zero_()
        self._env = None

    def __getstate__(self):  # the environment is rebuilt where the agent lands
        state = self.__dict__.copy()
        state["_env"] = None
        return state

    def _numpy_layers(self):
        return [(l.weight.detach().numpy().astype(np.float64),
                 l.bias.detach().numpy().astype(np.float64)) for l in self.layers]

    def act(self, layers, obs: np.ndarray):
        h = obs
        for k, (w, b) in enumerate(layers):
            h = w @ h + b
            if k < len(layers) - 1:
                h = np.tanh(h)
        if not self.discrete:
            return np.tanh(h) * self.action_high
        if self.greedy:
            return int(np.argmax(h))
        p = np.exp(h - h.max())
        p /= p.sum()
        return int(np.searchsorted(np.cumsum(p), np.random.random() * p.sum()))

    def episode_return(self, seed: int | None) -> float:
        if self._env is None:
            import gymnasium as gym
            self._env = gym.make(self.env_id)
        layers = self._numpy_layers()
        obs, _ = self._env.reset(seed=seed)
        total, steps = 0.0, 0
        while True:
            obs, reward, terminated, truncated, _ = self._env.step(
                self.act(layers, np.asarray(obs, dtype=np.float64)))
            total += float(reward)
            steps += 1
            if terminated or truncated or (self.max_steps and steps >= self.max_steps):
                return total

    def score(self, **kwargs) -> float:
        base = (self.task_seed if self.task_seed is not None else 0) % (2 ** 31 - 1000)
        return float(np.mean([self.episode_return(base + k) for k in range(self.episodes)]))


class CartPole(GymPolicy):
    """CartPole-v1 (max return 500) with a policy that samples its actions."""

    env_id = "CartPole-v1"
    discrete = True
