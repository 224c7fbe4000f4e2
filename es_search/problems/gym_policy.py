"""``GymPolicy``, a small policy network for any gymnasium environment, and what it shares
with the batched control problems: the tanh MLP and its actions in NumPy (torch's overhead
per call on tiny layers costs more than an environment step)."""
from __future__ import annotations

import math
import numbers
from typing import Any, Iterable, Mapping

import numpy as np
import torch

from ..agent import Agent
from ..checks import check, check_bool, check_choice, check_dict, check_int, check_number
from ..moments import Moments
from .gym_env import make_env

#: ``normalize`` values; True and False mean "fixed" and "off"
NORMALIZE_MODES = ("running", "fixed", "off")
_SEED_SPAN = 2 ** 31 - 1000
_RUNNING_BUFFERS = ("obs_count", "obs_mean", "obs_m2", "obs_std")
#: the first episode seed of ``test_scores()``: far from the seeds a search draws
TEST_SEED = 1_000_000


def mlp_output(layers, obs: np.ndarray) -> np.ndarray:
    """A tanh MLP's output: ``layers`` of ``(weight, bias)`` arrays and one observation
    ``(in,)``, or layers stacked per row (``(n, out, in)``, ``(n, out)``) and ``(n, in)``
    (elementwise and per-row operations only: a row's result does not depend on ``n``)."""
    h = obs
    for k, (w, b) in enumerate(layers):
        h = (w @ h if w.ndim == 2 else np.matmul(w, h[:, :, None])[:, :, 0]) + b
        if k < len(layers) - 1:
            h = np.tanh(h)
    return h


def mlp_actions(h: np.ndarray, discrete: bool, uniforms: Any = None, start: int = 0,
                squash: Any = None) -> np.ndarray:
    """Actions from outputs ``h`` (last axis: one per action). Discrete: ``start`` + the
    argmax (``uniforms`` None) or a draw from the softmax with one uniform per row; Box:
    ``tanh(h) * scale + offset`` for ``squash=(offset, scale)`` (None: ``h``)."""
    if not discrete:
        return h if squash is None else np.tanh(h) * squash[1] + squash[0]
    if uniforms is None:
        return start + np.argmax(h, axis=-1)
    if h.shape[-1] == 2:  # 1 when u > P(0) = 1 / (1 + e^(h1 - h0)), no overflow
        p0 = 0.5 - 0.5 * np.tanh(0.5 * (h[..., 1] - h[..., 0]))
        return start + (uniforms > p0).astype(np.intp)
    cum = np.cumsum(np.exp(h - h.max(axis=-1, keepdims=True)), axis=-1)
    return start + (cum < (uniforms * cum[..., -1])[..., None]).sum(axis=-1)


class ControlPolicy(Agent):
    """A policy scored by episode returns; ``returns(episodes, seed)`` gives true
    returns, ``test_scores()`` those of ``test_episodes`` episodes from ``TEST_SEED``."""

    env_id = ""
    discrete = True
    normalize = "off"
    _action_start = 0  # the first discrete action (gymnasium's Discrete.start)
    _squash = None  # (offset, scale) of bounded Box actions: tanh(h) * scale + offset
    _action_shape: tuple = ()
    obs_dtype = "float64"  # the environment's observations: what an exported policy takes
    test_episodes = 20
    default_config = {"generations": 40, "population": 16, "sigma": 0.5,
                      "strategy_options": {"reevaluate": True}}

    def _settings(self, hidden: Any, episodes: Any, max_steps: Any, greedy: Any) -> None:
        """Check the settings every control policy has (before any environment is made)."""
        if isinstance(hidden, numbers.Integral) and not isinstance(hidden, bool):
            hidden = check_int("hidden", hidden, 0, " (units of one tanh hidden layer; 0: "
                               "a linear policy)")
            hidden = (hidden,) if hidden else ()
        check("hidden", hidden, not isinstance(hidden, str) and isinstance(hidden, Iterable),
              "an int (units of one tanh hidden layer, 0: a linear policy) or a tuple of ints "
              "(one per layer)")
        self.hidden = tuple(check_int("hidden", h, 1, " units per layer (0: a linear policy)")
                            for h in hidden)
        self.episodes = check_int("episodes", episodes, 1)
        self.max_steps = check_int("max_steps", max_steps, 1, none_ok=True)
        self.greedy = check_bool("greedy", greedy)

    def _build(self) -> None:
        """Make the layers ``obs_dim -> hidden... -> act_dim``, the output layer zero."""
        if self.greedy and not self.discrete:
            raise ValueError(f"greedy=True takes the argmax of discrete actions; {self.env_id}'s "
                             f"actions are continuous (already deterministic): leave greedy out")
        sizes = [self.obs_dim, *self.hidden, self.act_dim]
        self.layers = torch.nn.ModuleList(torch.nn.Linear(a, b)
                                          for a, b in zip(sizes[:-1], sizes[1:]))
        with torch.no_grad():
            self.layers[-1].weight.zero_()
            self.layers[-1].bias.zero_()

    def test_scores(self) -> dict[str, float]:
        """The test episodes' mean and std return."""
        returns = np.asarray(self.returns(self.test_episodes, TEST_SEED), dtype=np.float64)
        return {"test_return_mean": float(returns.mean()),
                "test_return_std": float(returns.std()), "test_episodes": len(returns)}

    def policy_module(self) -> torch.nn.Module:
        """This policy as one torch module, for :func:`es_search.export.export`."""
        from ..export import mlp_policy
        normalized = self.normalize != "off"
        return mlp_policy(self.layers, self.discrete, self.greedy,
                          self.obs_mean if normalized else None,
                          self.obs_std if normalized else None, self._action_start,
                          self._squash, () if self.discrete else tuple(self._action_shape),
                          self.obs_dtype)


class GymPolicy(ControlPolicy):
    """A tanh MLP (or linear) policy for gymnasium environment ``env_id`` (subclasses may
    fix it), scored by the mean return of ``episodes`` episodes.

    Observations are flattened as ``gymnasium.spaces.flatten`` does; discrete actions are
    sampled from the softmax (``greedy=True``: the argmax), Box actions ``tanh``-squashed
    to their bounds (unbounded, or ``squash=False``: raw, as ARS's linear policy; MuJoCo
    clamps them to its control range and charges control cost on the raw action).

    - ``hidden``: units of a tanh hidden layer, or a tuple of them (0: linear).
    - ``max_steps``: cut episodes short. ``env_kwargs``: ``gymnasium.make``'s keywords.
    - ``reward_offset`` (added to each reward: -1 removes Hopper's alive bonus) and
      ``reward_clip`` (each reward clipped to ``[-c, c]`` first) shape the search's score,
      never :meth:`returns` nor the end's selection test (``selecting``).
    - ``normalize``: ``"off"`` (False); ``"fixed"`` (True): statistics of ``norm_episodes``
      random-action episodes from ``norm_seed``; ``"running"``: of every observation
      scored so far, merged after each generation. They are buffers, saved with the weights.
    - ``crn``: a generation's candidates play the same episodes (from ``generation_seed``)
      and sample from generators seeded by them; otherwise episodes follow ``task_seed``
      and sampling NumPy's global RNG.
    """

    def __init__(self, env_id: str | None = None, hidden: Any = 0, episodes: int = 3,
                 max_steps: int | None = None, greedy: bool = False,
                 normalize: Any = False, reward_offset: float = 0.0, crn: bool = False,
                 norm_episodes: int = 10, norm_seed: int = 12345,
                 reward_clip: float | None = None, squash: bool = True,
                 env_kwargs: Mapping[str, Any] | None = None):
        super().__init__()
        fixed = type(self).env_id
        if fixed and env_id is not None and env_id != fixed:
            raise ValueError(f"{type(self).__name__} is a policy for {fixed}, not {env_id!r}: "
                             f"for another environment use GymPolicy({env_id!r}) "
                             f"(es-search run gym:{env_id})")
        env_id = fixed if env_id is None else env_id
        self.crn, self.squash = check_bool("crn", crn), check_bool("squash", squash)
        self._settings(hidden, episodes, max_steps, greedy)
        check("env_id", env_id, isinstance(env_id, str) and env_id, "a gymnasium "
              "environment id, e.g. GymPolicy('CartPole-v1')")
        self.normalize = ("fixed" if normalize else "off") if isinstance(normalize, bool) \
            else check_choice("normalize", normalize, NORMALIZE_MODES,
                              " (or True = 'fixed', False = 'off')")
        norm_episodes = check_int("norm_episodes", norm_episodes, 1)
        self.reward_offset = check_number("reward_offset", reward_offset)
        self.reward_clip = None if reward_clip is None else check_number(
            "reward_clip", reward_clip, "a finite number > 0 (rewards are clipped to "
            "[-reward_clip, reward_clip]) or None", lambda v: math.isfinite(v) and v > 0)
        self.env_id = env_id
        self.env_kwargs = check_dict("env_kwargs", env_kwargs, "a dict of gymnasium.make() "
                                     "keyword arguments (e.g. {{'is_slippery': False}})")
        # an unknown id, a missing extra or a keyword the environment refuses fails here
        env = make_env(env_id, kwargs=self.env_kwargs)
        self.env_spec = env.spec  # workers lacking its registration make it from this
        self._read_spaces(env)
        env.close()
        self._build()
        buffers = {"obs_count": np.zeros(()), "obs_mean": np.zeros(self.obs_dim),
                   "obs_m2": np.zeros(self.obs_dim), "obs_std": np.ones(self.obs_dim)}
        if self.normalize == "fixed":
            buffers["obs_mean"], buffers["obs_std"] = self._random_action_statistics(
                norm_episodes, int(norm_seed))
        for name in _RUNNING_BUFFERS if self.normalize == "running" else ("obs_mean", "obs_std"):
            self.register_buffer(name, torch.as_tensor(buffers[name], dtype=torch.float64))
        self._env = None
        self._report: dict | None = None

    def _read_spaces(self, env: Any) -> None:
        import gymnasium as gym
        obs_space, space = env.observation_space, env.action_space
        self._obs_space = None if isinstance(obs_space, gym.spaces.Box) else obs_space
        if self._obs_space is None:  # else flattened by the user: float64
            self.obs_dtype = np.dtype(obs_space.dtype).name
        try:
            self.obs_dim = int(gym.spaces.flatdim(obs_space))
        except (ValueError, NotImplementedError, TypeError):
            raise ValueError(f"GymPolicy needs observations that flatten to a vector of "
                             f"fixed size (Box, Discrete, MultiDiscrete, MultiBinary, or a "
                             f"Tuple or Dict of them); {self.env_id} has {obs_space}"
                             ) from None
        if isinstance(space, gym.spaces.Discrete):
            self.discrete, self.act_dim = True, int(space.n)
            self._action_start = int(space.start)  # Discrete(3, start=-1): -1, 0, 1
            return
        if not isinstance(space, gym.spaces.Box):
            raise ValueError(f"GymPolicy handles Discrete and Box action spaces; "
                             f"{self.env_id} has {space}")
        self.discrete, self.act_dim = False, int(np.prod(space.shape))
        self._action_shape = space.shape
        low = np.asarray(space.low, dtype=np.float64).reshape(-1)
        high = np.asarray(space.high, dtype=np.float64).reshape(-1)
        if self.squash and np.all(np.isfinite(low)) and np.all(np.isfinite(high)):
            self._squash = ((high + low) / 2, (high - low) / 2)

    def _random_action_statistics(self, episodes: int, seed: int):
        """Mean and std of the observations of ``episodes`` random-action episodes."""
        env = self.make_env()
        stats = Moments.empty(self.obs_dim)
        for k in range(episodes):
            obs, _ = env.reset(seed=seed + k)
            env.action_space.seed(seed + k)
            seen, done = [], False
            while not done:
                seen.append(self.flat_observation(obs))
                obs, _, terminated, truncated, _ = env.step(env.action_space.sample())
                done = terminated or truncated or len(seen) == self.max_steps
            stats = stats.merge(Moments.of(np.array(seen)))
        env.close()
        std = np.sqrt(stats.m2 / max(stats.count - 1, 1))
        return stats.mean, np.maximum(std, 1e-3)

    def flat_observation(self, obs: Any) -> np.ndarray:
        """An observation as the policy's flat float64 input."""
        if self._obs_space is not None:
            import gymnasium as gym
            obs = gym.spaces.flatten(self._obs_space, obs)
        return np.asarray(obs, dtype=np.float64).reshape(-1)

    def make_env(self) -> Any:
        """A new environment of this policy's id."""
        return make_env(self.env_id, self.env_spec, self.env_kwargs)

    def __getstate__(self):  # the environment is rebuilt where the agent lands
        return {**self.__dict__, "_env": None, "_report": None}

    def _numpy_layers(self):
        return [(l.weight.detach().numpy().astype(np.float64),
                 l.bias.detach().numpy().astype(np.float64)) for l in self.layers]

    def actor(self, layers, rng: np.random.Generator | None = None):
        """The policy with ``layers`` (``_numpy_layers()``): flat observation -> action;
        sampling draws from ``rng`` (default: NumPy's global RNG)."""
        normalized = self.normalize != "off"
        mean, std = self.obs_mean.numpy(), self.obs_std.numpy()
        draw = np.random.random if rng is None else rng.random
        sampled = self.discrete and not self.greedy

        def act(obs):
            h = mlp_output(layers, (obs - mean) / std if normalized else obs)
            action = mlp_actions(h, self.discrete, draw() if sampled else None,
                                 self._action_start, self._squash)
            return action if self.discrete else action.reshape(self._action_shape)
        return act

    def episode_return(self, seed: int | None, record: bool = False,
                       seeded_actions: bool | None = None, whole: bool = False,
                       shaped: bool = False) -> float:
        """One episode's return. ``record``: a ``score()``'s episode, steps and observations
        into its report. ``shaped``: rewards shaped (``reward_clip``, ``reward_offset``).
        ``seeded_actions``: sampled from a generator seeded ``seed`` (default: with ``crn``).
        ``whole``: no ``max_steps`` where the environment has a time limit."""
        if self._env is None:
            self._env = self.make_env()
        env = self._env
        seeded = self.crn if seeded_actions is None else seeded_actions
        act = self.actor(self._numpy_layers(),
                         np.random.default_rng(seed) if seeded and self.discrete else None)
        keep = record and self.normalize == "running"
        clip, offset = (self.reward_clip, self.reward_offset) if shaped else (None, 0.0)
        seen: list = []
        limit = self.max_steps or math.inf
        if whole and getattr(env.spec, "max_episode_steps", None):
            limit = math.inf  # the environment's own limit ends the episode
        obs, _ = env.reset(seed=seed)
        total, steps, done = 0.0, 0, False
        while not done:
            x = self.flat_observation(obs)
            if keep:
                seen.append(x)
            obs, reward, terminated, truncated, _ = env.step(act(x))
            reward = float(reward)
            if clip is not None:
                reward = min(max(reward, -clip), clip)
            total += reward + offset
            steps += 1
            done = terminated or truncated or steps >= limit
        if record and self._report is not None:
            self._report["steps"] += steps
            if keep:
                self._report["obs"] = self._report["obs"].merge(Moments.of(np.array(seen)))
        return total

    def episode_seeds(self) -> list[int]:
        """The seeds of the episodes ``score()`` plays now."""
        base = self.generation_seed if self.crn and self.generation_seed is not None \
            and not self.selecting else self.task_seed  # the selection's tasks: each its own
        return [(base or 0) % _SEED_SPAN + k for k in range(self.episodes)]

    def score(self, **kwargs) -> float:
        self._report = {"steps": 0, "obs": Moments.empty(self.obs_dim)
                        if self.normalize == "running" else None}
        return float(np.mean([self.episode_return(s, record=True, shaped=not self.selecting)
                              for s in self.episode_seeds()]))

    def returns(self, episodes: int = 100, seed: int = 0) -> np.ndarray:
        """The true returns of ``episodes`` whole episodes seeded ``seed``, ``seed + 1``,
        ...; the statistics are not updated."""
        return np.array([self.episode_return(seed + k, seeded_actions=True, whole=True)
                         for k in range(int(episodes))])

    def task_report(self) -> dict | None:
        """The last ``score()``'s steps and, when running, its observations' Moments."""
        return self._report

    def merge_reports(self, reports: list) -> Mapping[str, float]:
        """Fold a generation's reports into the statistics; return its steps."""
        reports = [report for report in reports if report]
        if self.normalize == "running":
            stats = Moments(float(self.obs_count), self.obs_mean.numpy().copy(),
                            self.obs_m2.numpy().copy())
            for report in reports:
                stats = stats.merge(Moments(*report["obs"]))
            self.set_weights({"obs_count": torch.tensor(stats.count, dtype=torch.float64),
                              "obs_mean": stats.mean, "obs_m2": stats.m2,
                              "obs_std": stats.std()})
        return {"steps": sum(int(report["steps"]) for report in reports)}

    def shared_state(self) -> dict[str, torch.Tensor]:
        if self.normalize != "running":
            return {}
        return {name: getattr(self, name).clone() for name in _RUNNING_BUFFERS}
