"""The ceiling of ``benchmarks/control.py``: the same policies stepped with no framework.

Two ceilings, both one bare process per core (a gymnasium environment, a NumPy forward
pass, resets included, nothing else):

- :func:`final_ceiling`: the run's final policy (the centre at the end), episode after
  episode. Late policies play long episodes, so this overstates what a training run
  can reach: early in a run most candidates fall or crash within tens of steps, and a
  reset costs far more than a step.
- :func:`run_ceiling`: the policies the run actually scored. :class:`Snapshots` (a
  callback) keeps the search's state every twentieth of the wall-time budget (5%,
  10%, ..., 95%); for each, the next generation's candidates are built exactly as the
  workers build them (``strategy.ask``, then :func:`es_search.candidates.build`) and
  stepped bare, one candidate per episode in turn, for the same time each. The run
  spent equal wall time in each twentieth of its budget, so its ceiling is the mean of
  those rates (the first twentieth, before any snapshot, is not sampled).
"""
from __future__ import annotations

import time

import numpy as np


def _bare_loop(env_id, policies, squash, discrete, greedy, seconds, seed):
    """Step ``env_id`` for ``seconds``, episode k with ``policies[k % len]`` (each
    ``(layers, mean, std)``): no framework, resets included."""
    from es_search.problems.gym_env import make_env  # MuJoCo's warnings as Python's
    env = make_env(env_id)
    rng = np.random.default_rng(seed)
    steps, episode, began = 0, 0, time.perf_counter()
    while time.perf_counter() - began < seconds:
        layers, mean, std = policies[episode % len(policies)]
        last = len(layers) - 1
        obs, _ = env.reset(seed=seed + episode)
        episode += 1
        done = False
        while not done:
            h = (np.asarray(obs, dtype=np.float64).reshape(-1) - mean) / std
            for k, (w, b) in enumerate(layers):
                h = w @ h + b
                if k < last:
                    h = np.tanh(h)
            if not discrete:  # squash None: raw actions (the environment clamps them)
                action = h if squash is None else np.tanh(h) * squash[1] + squash[0]
            elif greedy:
                action = int(np.argmax(h))
            else:
                p = np.exp(h - h.max())
                action = int(np.searchsorted(np.cumsum(p / p.sum()), rng.random()))
            obs, _, terminated, truncated, _ = env.step(action)
            steps += 1
            done = terminated or truncated
    return steps, time.perf_counter() - began


def _policy(agent) -> tuple:
    return (agent._numpy_layers(), agent.obs_mean.numpy().copy(),
            agent.obs_std.numpy().copy())


def _rate(agent, policies: list, n: int, seconds: float) -> float:
    """Environment steps per second of ``policies``, one bare process per core."""
    from joblib import Parallel, delayed
    work = (agent.env_id, policies, None if agent.discrete else agent._squash,
            agent.discrete, bool(getattr(agent, "greedy", False)), seconds)
    parts = Parallel(n_jobs=n)(delayed(_bare_loop)(*work, 7_000 * (k + 1)) for k in range(n))
    return sum(steps / wall for steps, wall in parts)


def final_ceiling(agent, n: int, seconds: float) -> float:
    """Steps per second of ``agent``'s own policy, one bare process per core."""
    return _rate(agent, [_policy(agent)], n, seconds)


class Snapshots:
    """A callback keeping the run's checkpoint (``record.checkpoint``, its shared state
    copied) at fractions of ``budget`` seconds (``saved``, with ``seconds`` from the run's
    start: the ceiling's policies) and after every ``every``-th generation (``grid``,
    ``(seconds, checkpoint)`` pairs: the centres the time to the target is tested on)."""

    def __init__(self, budget: float, every: int = 5,
                 fractions=tuple(k / 20 for k in range(1, 20))):
        self.budget, self.every = budget, every
        self.fractions = list(fractions)
        self.started = time.perf_counter()
        self.saved: list[dict] = []
        self.seconds: list[float] = []  # when each was saved, from the run's start
        self.grid: list[tuple[float, dict]] = []

    def on_generation(self, record: dict) -> None:
        import copy
        elapsed = time.perf_counter() - self.started
        saved = {**record.checkpoint, "shared": copy.deepcopy(record.checkpoint["shared"])}
        if (record["generation"] + 1) % self.every == 0:
            self.grid.append((elapsed, saved))
        if self.fractions and elapsed >= self.fractions[0] * self.budget:
            while self.fractions and elapsed >= self.fractions[0] * self.budget:
                self.fractions.pop(0)
            self.saved.append(saved)
            self.seconds.append(elapsed)


def candidate_policies(agent, saved: dict, seed: int) -> list:
    """The policies of the generation after checkpoint ``saved``, as the workers build
    them (observation statistics of that checkpoint)."""
    import torch
    from es_search.candidates import build

    strategy, state, generation = saved["strategy"], saved["state"], saved["generation"]
    center = strategy.center(state)
    policy = agent.clone()
    if saved.get("shared"):
        policy.load_shared_state(saved["shared"])
    out = []
    for index, candidate in enumerate(strategy.ask(state, generation)):
        torch.manual_seed(index)  # only "jitter" candidates draw from it
        build(policy, center, candidate, seed, generation)
        out.append(_policy(policy))
    return out


def run_ceiling(agent, snapshots: list[dict], seed: int, n: int, seconds: float) -> float:
    """The mean, over ``snapshots``, of the bare steps per second of each one's next
    generation of candidates (``seconds`` in all, shared equally)."""
    each = seconds / len(snapshots)
    return float(np.mean([_rate(agent, candidate_policies(agent, s, seed), n, each)
                          for s in snapshots]))
