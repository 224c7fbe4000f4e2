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
    case that breaks the blog post's ``Pool.map`` scheme is reproducible here. A
    continuous policy outputs ``tanh(logits) * action_high``.

    ``hidden``: units of the tanh hidden layer (0: a linear policy). ``episodes``: the
    score is the mean return of this many episodes. ``max_steps``: cut episodes short.
    ``greedy``: a discrete policy takes the argmax instead of sampling.

    ``normalize=True`` divides observations by fixed statistics: the mean and standard
    deviation of the observations met in ``norm_episodes`` episodes of uniformly random
    actions, run once at construction with fixed seeds (``norm_seed``) and accumulated
    with a running (Welford) update. They are buffers (``obs_mean``, ``obs_std``), not
    evolved weights, and travel to the workers with the agent. They are deliberately
    *not* updated during the search, as Salimans et al. (2017) do: statistics gathered
    by whichever worker ran which candidate would make the scores depend on the worker
    count and the scheduling, and es_search's runs are identical for any ``n_jobs``.
    Load other statistics with ``set_weights({"obs_mean": ..., "obs_std": ...})``.
    """

    env_id = ""
    discrete = True
    default_config = {"generations": 40, "population": 16, "sigma": 0.5,
                      "strategy_options": {"reevaluate": True}}

    def __init__(self, hidden: int = 0, episodes: int = 3, max_steps: int | None = None,
                 greedy: bool = False, normalize: bool = False, norm_episodes: int = 10,
                 norm_seed: int = 12345):
        super().__init__()
        if int(hidden) < 0:
            raise ValueError(f"hidden must be >= 0 (0: a linear policy), got {hidden}")
        if max_steps is not None and int(max_steps) < 1:
            raise ValueError(f"max_steps must be >= 1 or None, got {max_steps}")
        if not isinstance(normalize, bool):
            raise TypeError(f"normalize must be True or False, got {normalize!r}")
        if int(norm_episodes) < 1:
            raise ValueError(f"norm_episodes must be >= 1, got {norm_episodes}")
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
        self.normalize = normalize
        mean, std = np.zeros(self.obs_dim), np.ones(self.obs_dim)
        if normalize:
            mean, std = self._random_action_statistics(int(norm_episodes), int(norm_seed))
        self.register_buffer("obs_mean", torch.as_tensor(mean, dtype=torch.float64))
        self.register_buffer("obs_std", torch.as_tensor(std, dtype=torch.float64))
        self._norm = (mean, std)
        self._env = None

    def _random_action_statistics(self, episodes: int, seed: int):
        """Mean and std of the observations of ``episodes`` random-action episodes."""
        import gymnasium as gym
        env = gym.make(self.env_id)
        count, mean, m2 = 0, np.zeros(self.obs_dim), np.zeros(self.obs_dim)
        for k in range(episodes):
            obs, _ = env.reset(seed=seed + k)
            env.action_space.seed(seed + k)
            steps = 0
            while True:  # Welford's running mean and variance
                x = np.asarray(obs, dtype=np.float64).reshape(-1)
                count += 1
                delta = x - mean
                mean += delta / count
                m2 += delta * (x - mean)
                obs, _, terminated, truncated, _ = env.step(env.action_space.sample())
                steps += 1
                if terminated or truncated or (self.max_steps and steps >= self.max_steps):
                    break
        env.close()
        std = np.sqrt(m2 / max(count - 1, 1))
        return mean, np.maximum(std, 1e-3)

    def __getstate__(self):  # the environment is rebuilt where the agent lands
        state = self.__dict__.copy()
        state["_env"] = None
        return state

    def _numpy_layers(self):
        return [(l.weight.detach().numpy().astype(np.float64),
                 l.bias.detach().numpy().astype(np.float64)) for l in self.layers]

    def act(self, layers, obs: np.ndarray):
        h = obs
        if self.normalize:
            h = (obs - self._norm[0]) / self._norm[1]
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
        self._norm = (self.obs_mean.numpy(), self.obs_std.numpy())
        obs, _ = self._env.reset(seed=seed)
        total, steps = 0.0, 0
        while True:
            obs, reward, terminated, truncated, _ = self._env.step(
                self.act(layers, np.asarray(obs, dtype=np.float64).reshape(-1)))
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


class Pendulum(GymPolicy):
    """Pendulum-v1 (continuous torque; returns about -1500 to -100, higher is better)
    with a 16-unit tanh MLP by default; one episode (200 steps) per score."""

    env_id = "Pendulum-v1"
    discrete = False
    default_config = {"generations": 200, "population": 32, "sigma": 0.2,
                      "strategy_options": {"reevaluate": True}}

    def __init__(self, hidden: int = 16, episodes: int = 1, **kwargs):
        super().__init__(hidden=hidden, episodes=episodes, **kwargs)


class Acrobot(GymPolicy):
    """Acrobot-v1 (3 discrete actions; return -500 (never up) to about -60), a linear
    sampled policy on normalised observations by default."""

    env_id = "Acrobot-v1"
    discrete = True
    default_config = {"generations": 40, "population": 16, "sigma": 0.5,
                      "strategy_options": {"reevaluate": True}}

    def __init__(self, hidden: int = 0, episodes: int = 1, normalize: bool = True, **kwargs):
        super().__init__(hidden=hidden, episodes=episodes, normalize=normalize, **kwargs)
