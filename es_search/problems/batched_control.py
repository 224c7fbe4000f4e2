"""CartPole and Pendulum scored a group of candidates at a time (extra ``gym``): one
vectorised NumPy environment, a column per (candidate, episode), transcribing gymnasium's
operation for operation (:func:`cartpole_step`, :class:`PendulumBatch`). A candidate's
stream (``candidate_rngs([s], 1)``) draws its start states and one uniform per step for
sampled actions; all else is per row: a row of a group is the candidate scored alone."""
from __future__ import annotations

import math
from typing import Callable

import numpy as np

from ..batched import candidate_rngs, numpy_params, own_params
from ..checks import check_int
from ..extras import require
from .gym_policy import ControlPolicy, mlp_actions, mlp_output


class PendulumBatch:
    """gymnasium's Pendulum-v1 dynamics, operation for operation, for ``n`` pendulums at
    once (float64) from ``state``: ``(2, n)`` angles and angular velocities."""

    max_speed, max_torque, dt, g, m, l = 8.0, 2.0, 0.05, 10.0, 1.0, 1.0
    max_episode_steps = 200
    high = np.array([np.pi, 1.0])  # gymnasium's reset: uniform in [-high, high]

    def __init__(self, state: np.ndarray):
        state = np.asarray(state, dtype=np.float64)
        self.th, self.thdot = state[0].copy(), state[1].copy()

    def run(self, policy: Callable[[np.ndarray], np.ndarray], steps: int) -> np.ndarray:
        """The returns of ``steps`` steps of ``policy`` (observations ``(n, 3)`` float64,
        gymnasium's float32 ``_get_obs`` -> torques ``(n,)``), the rewards computed at the
        end at once."""
        th, thdot, n = self.th, self.thdot, len(self.th)
        obs = np.empty((n, 3), dtype=np.float32)
        trajectory = np.empty((3, steps, n))  # th, thdot, u at every step
        for t in range(steps):
            sin_th = np.sin(th)
            obs[:, 0], obs[:, 1], obs[:, 2] = np.cos(th), sin_th, thdot
            u = np.asarray(policy(obs.astype(np.float64)), dtype=np.float64)
            u = np.minimum(np.maximum(u, -self.max_torque), self.max_torque)  # np.clip, faster
            trajectory[0, t], trajectory[1, t], trajectory[2, t] = th, thdot, u
            thdot = thdot + (3 * self.g / (2 * self.l) * sin_th
                             + 3.0 / (self.m * self.l ** 2) * u) * self.dt
            thdot = np.minimum(np.maximum(thdot, -self.max_speed), self.max_speed)
            th = th + thdot * self.dt
        th, thdot, u = trajectory
        rewards = -((((th + np.pi) % (2 * np.pi)) - np.pi) ** 2 + 0.1 * thdot ** 2
                    + 0.001 * (u ** 2))
        return np.cumsum(rewards, axis=0)[-1]  # sequential in time, for any n


class BatchedPolicy(ControlPolicy):
    """A tanh MLP policy scored by its mean return over ``episodes`` episodes, a group of
    candidates per ``score_batch()`` call; ``hidden``, ``max_steps``, ``greedy`` as
    :class:`GymPolicy`'s. ``score_batch_size``: candidates per call (0: one by one through
    ``score()``, the same scores, slower). Subclasses set the environment (and
    ``obs_dtype``, its observations' dtype, what an exported policy takes) and write
    ``run_columns(layers, starts, uniforms, limit)``: the returns of the columns starting
    at ``starts`` (state, column), the steps of the whole vectorised environment and
    those of alive episodes."""

    obs_dim = act_dim = 0
    obs_dtype = "float32"  # gymnasium's CartPole-v1 and Pendulum-v1
    test_episodes = 100

    def __init__(self, hidden: int = 0, episodes: int = 3, max_steps: int | None = None,
                 greedy: bool = False, score_batch_size: int = 32):
        super().__init__()
        require("gymnasium", "gym")
        self._settings(hidden, episodes, max_steps, greedy)
        self._build()
        self.score_batch_size = check_int("score_batch_size", score_batch_size, 0,
                                            " (0: score one candidate per call)")
        self.steps = 0  # environment steps of alive episodes in the last score_batch()
        self.iterations = 0  # steps of the whole vectorised environment in the last one

    def stacked_layers(self, params, columns: int = 1) -> list[tuple[np.ndarray, np.ndarray]]:
        """``(weight, bias)`` per layer, float64, stacked: ``(n, out, in)``, ``(n, out)``;
        each row repeated ``columns`` times in a row (one per episode)."""
        arrays = numpy_params(params)
        if columns > 1:
            arrays = {name: np.repeat(a, columns, axis=0) for name, a in arrays.items()}
        return [(arrays[f"layers.{k}.weight"], arrays[f"layers.{k}.bias"])
                for k in range(len(self.layers))]

    #: each column's policy on its observation (``(n, obs_dim)``, layers stacked)
    forward_numpy = staticmethod(mlp_output)

    def actions(self, logits: np.ndarray, uniforms: np.ndarray | None) -> np.ndarray:
        """The actions for rows of ``logits``: ``n`` ints, or ``n`` torques."""
        actions = mlp_actions(logits, self.discrete, uniforms, squash=self._squash)
        return actions if self.discrete else actions[:, 0]

    def score_batch(self, params, seeds, **kwargs) -> np.ndarray:
        return self.episode_returns(params, seeds).mean(axis=1)

    def episode_returns(self, params, seeds) -> np.ndarray:
        """Each candidate's returns, ``(n, episodes)``: ``score_batch`` is their mean."""
        n, episodes = len(seeds), self.episodes
        layers = self.stacked_layers(params, episodes)  # column = (candidate, episode)
        limit = min(self.max_steps or self.episode_limit, self.episode_limit)
        streams = candidate_rngs(seeds, 1)
        # what rng.uniform(-high, high, (episodes, d)) draws: low + (high - low) * u
        dims = len(self.start_high)
        u = np.concatenate([rng.random((episodes, dims)) for rng in streams])
        starts = (-self.start_high + (self.start_high - -self.start_high) * u).T
        uniforms = None if not self.discrete or self.greedy else np.concatenate(
            [rng.random((episodes, limit)) for rng in streams])
        returns, self.iterations, self.steps = self.run_columns(layers, starts, uniforms, limit)
        return returns.reshape(n, episodes)

    def returns(self, episodes: int = 100, seed: int = 0) -> np.ndarray:
        """The returns of whole episodes ``seed``, ``seed + 1``, ...: episode ``s`` starts
        where gymnasium's ``reset(seed=s)`` does and samples its actions (unless ``greedy``)
        from ``default_rng(SeedSequence(s, spawn_key=(1,)))``, one uniform per step."""
        episodes, limit = check_int("episodes", episodes, 1), self.episode_limit
        layers = self.stacked_layers(own_params(self), episodes)
        seeds = range(int(seed), int(seed) + episodes)
        starts = np.stack([np.random.default_rng(s).uniform(-self.start_high, self.start_high)
                           for s in seeds], axis=1)
        uniforms = None if not self.discrete or self.greedy else np.stack(
            [np.random.default_rng(np.random.SeedSequence(s, spawn_key=(1,))).random(limit)
             for s in seeds])
        return self.run_columns(layers, starts, uniforms, limit)[0]


class CartPole(BatchedPolicy):
    """CartPole-v1 (max return 500), batched, a policy that samples its actions (extra: gym).
    It runs on :func:`cartpole_step`, 10 episodes per score by default."""

    discrete, obs_dim, act_dim = True, 4, 2
    env_id = "CartPole-v1"
    episode_limit = 500
    start_high = np.full(4, 0.05)

    # 10 episodes: with 3, a policy that balances only most of the time reaches 500 by
    # luck and stops the climb (test returns, seeds 0-5: 427-493; with 3: 386-495)
    def __init__(self, hidden: int = 0, episodes: int = 10, **kwargs):
        super().__init__(hidden=hidden, episodes=episodes, **kwargs)

    def run_columns(self, layers, starts, uniforms, limit) -> tuple[np.ndarray, int, int]:
        """Step every column until all episodes are over (a return is its episode's
        length); an ended episode's row leaves at once."""
        state, rows = starts, np.arange(starts.shape[1])  # the column each row runs
        lengths = np.full(starts.shape[1], float(limit))  # cut short: ``limit`` steps
        for t in range(limit):
            obs = state.T.astype(np.float32).astype(np.float64)  # gymnasium's float32
            u = None if uniforms is None else uniforms[rows, t]
            state, ended = cartpole_step(state, self.actions(self.forward_numpy(layers, obs), u))
            if ended.any():
                lengths[rows[ended]] = t + 1
                if ended.all():
                    break
                keep = ~ended
                state, rows = state[:, keep], rows[keep]
                layers = [(w[keep], b[keep]) for w, b in layers]
        return lengths, t + 1, int(lengths.sum())


def cartpole_step(state: np.ndarray, action: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One step of CartPole-v1 for every column: ``state`` ``(4, n)`` float64, ``action``
    ``n`` of 0 / 1 -> the next state and which episodes terminated; gymnasium's
    ``CartPoleVectorEnv.step`` without its action check and autoreset."""
    gravity, masspole, total_mass, length, tau = 9.8, 0.1, 0.1 + 1.0, 0.5, 0.02
    polemass_length = masspole * length
    _, x_dot, theta, theta_dot = state
    force = np.where(action == 1, 10.0, -10.0)
    costheta, sintheta = np.cos(theta), np.sin(theta)
    temp = (force + polemass_length * np.square(theta_dot) * sintheta) / total_mass
    thetaacc = (gravity * sintheta - costheta * temp) / (
        length * (4.0 / 3.0 - masspole * np.square(costheta) / total_mass))
    xacc = temp - polemass_length * thetaacc * costheta / total_mass
    state = state + tau * np.array((x_dot, xacc, theta_dot, thetaacc))  # x + tau * x_dot, ...
    return state, (np.abs(state[::2]) > _LIMITS).any(axis=0)  # |x| > 2.4 or |theta| > 12 deg


_LIMITS = np.array([[2.4], [12 * 2 * math.pi / 360]])  # CartPole-v1 ends beyond these


class Pendulum(BatchedPolicy):
    """Pendulum-v1 (continuous torque; returns -1500 to -100), batched, a 16-unit tanh MLP
    (extra: gym). It runs on :class:`PendulumBatch`, one 200-step episode per score."""

    discrete, obs_dim, act_dim = False, 3, 1
    env_id = "Pendulum-v1"
    _squash, _action_shape = (0.0, 2.0), (1,)  # torques in [-2, 2]
    episode_limit = PendulumBatch.max_episode_steps
    start_high = PendulumBatch.high
    # PGPE + ClipUp by the ClipUp rules (step 0.75 * max_speed): the final centre scores
    # -204 to -222 on 100 episodes over seeds 0-4 (hill-climb: -1116 to -1309)
    default_config = {"generations": 800, "population": 64, "sigma": 0.15,
                      "strategy": "pgpe",
                      "strategy_options": {"max_speed": 0.1, "step_size": 0.075}}

    def __init__(self, hidden: int = 16, episodes: int = 1, **kwargs):
        super().__init__(hidden=hidden, episodes=episodes, **kwargs)

    def run_columns(self, layers, starts, uniforms, limit) -> tuple[np.ndarray, int, int]:
        returns = PendulumBatch(starts).run(
            lambda obs: self.actions(self.forward_numpy(layers, obs), None), limit)
        return returns, limit, limit * starts.shape[1]
