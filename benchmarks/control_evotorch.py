"""EvoTorch side of ``benchmarks/control.py``: GymNE + PGPE with ClipUp, for a wall budget.

Run by ``control.py`` with the interpreter of a venv that has evotorch==0.6.1 (a
benchmark-only dependency, never an es_search extra)::

    python benchmarks/control_evotorch.py '{"env": "Hopper-v5", "seed": 0, ...}'

Prints one JSON line: test returns of the final centre, environment steps, wall time.
Settings are EvoTorch's documented ones (examples/scripts/rl_clipup.py of evotorch:
``lunarlander`` for the Box2D tasks, ``walker`` for the MuJoCo ones, where
``radius_init = 15 * max_speed`` and the centre learning rate is ``0.75 * max_speed``),
with the same policy as es_search's built-ins: ``Linear(obs, act) >> Tanh()``, scaled
to the action bounds as es_search's GymPolicy does (Pendulum's torque: +-2).
"""
from __future__ import annotations

import json
import sys
import time

#: EvoTorch's documented PGPE + ClipUp settings per kind of task
SETTINGS = {
    # rl_clipup.py "lunarlander": popsize 200, max_speed 0.3, no observation normalisation
    "box2d": dict(popsize=200, max_speed=0.3, popsize_max=None, interactions=None,
                  observation_normalization=False),
    # rl_clipup.py "walker": popsize 100 (up to 800 by interactions), max_speed 0.015,
    # observation normalisation
    "mujoco": dict(popsize=100, max_speed=0.015, popsize_max=800,
                   interactions=0.75 * 1000 * 100, observation_normalization=True),
    # the classic tasks: the box2d settings with a population that fits seconds
    "classic": dict(popsize=50, max_speed=0.3, popsize_max=None, interactions=None,
                    observation_normalization=False),
}


def main(spec: dict) -> dict:
    import numpy as np
    import torch
    import gymnasium as gym
    from evotorch.algorithms import PGPE
    from evotorch.neuroevolution import GymNE

    torch.manual_seed(spec["seed"])
    np.random.seed(spec["seed"])
    settings = dict(SETTINGS[spec["kind"]])
    settings.update(spec.get("settings", {}))
    network = "Linear(obs_length, act_length) >> Tanh()"
    if spec.get("hidden"):
        network = (f"Linear(obs_length, {spec['hidden']}) >> Tanh() >> "
                   f"Linear({spec['hidden']}, act_length)")
        if not spec.get("discrete"):
            network += " >> Tanh()"
    if not spec.get("discrete"):
        # es_search's GymPolicy squashes to the action bounds: tanh * (high - low) / 2
        # + (high + low) / 2; the same policy here (Pendulum's bounds are +-2)
        space = gym.make(spec["env"]).action_space
        scale = (np.asarray(space.high) - np.asarray(space.low)) / 2
        offset = (np.asarray(space.high) + np.asarray(space.low)) / 2
        if not (np.all(scale == scale.flat[0]) and np.all(offset == offset.flat[0])):
            raise ValueError(f"{spec['env']}: bounds differ between actions; this "
                             f"script only squashes to equal bounds")
        if scale.flat[0] != 1.0:
            network += f" >> Apply('*', {float(scale.flat[0])!r})"
        if offset.flat[0] != 0.0:
            network += f" >> Apply('+', {float(offset.flat[0])!r})"
    started = time.perf_counter()
    problem = GymNE(env=spec["env"], network=network,
                    observation_normalization=settings["observation_normalization"],
                    decrease_rewards_by=spec.get("decrease_rewards_by") or None,
                    num_actors=spec["num_actors"], episode_length=spec.get("max_steps"))
    max_speed = settings["max_speed"]
    searcher = PGPE(problem, popsize=settings["popsize"],
                    center_learning_rate=0.75 * max_speed, stdev_learning_rate=0.1,
                    stdev_max_change=0.2, optimizer="clipup",
                    optimizer_config={"max_speed": max_speed, "momentum": 0.9},
                    radius_init=15 * max_speed, num_interactions=settings["interactions"],
                    popsize_max=settings["popsize_max"])
    generations = 0
    while time.perf_counter() - started < spec["budget"]:
        searcher.step()
        generations += 1
    wall = time.perf_counter() - started
    steps = int(problem.interaction_count)
    policy = problem.to_policy(searcher.status["center"])
    env = gym.make(spec["env"])
    returns = []
    with torch.no_grad():
        for k in range(spec["test_episodes"]):
            obs, _ = env.reset(seed=spec["test_seed"] + k)
            total, done = 0.0, False
            while not done:
                action = policy(torch.as_tensor(obs, dtype=torch.float32)).numpy()
                if spec.get("discrete"):
                    action = int(np.argmax(action))
                obs, reward, terminated, truncated, _ = env.step(action)
                total += float(reward)
                done = terminated or truncated
            returns.append(total)
    problem.kill_actors()
    return {"framework": "evotorch", "env": spec["env"], "seed": spec["seed"],
            "wall_s": wall, "steps": steps, "generations": generations,
            "test_mean": float(np.mean(returns)), "test_std": float(np.std(returns)),
            "settings": {"network": network, **settings, "radius_init": 15 * max_speed,
                         "center_learning_rate": 0.75 * max_speed,
                         "num_actors": spec["num_actors"]}}


if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__, file=sys.stderr)  # a helper of control.py: one JSON argument
        sys.exit(0 if sys.argv[1:] in (["-h"], ["--help"]) else 2)
    print(json.dumps(main(json.loads(sys.argv[1]))), flush=True)
