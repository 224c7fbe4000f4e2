"""Built-in gymnasium control tasks: GymPolicy with tuned defaults (see benchmarks/README.md)."""
from __future__ import annotations

from .gym_policy import GymPolicy


class Acrobot(GymPolicy):
    """Acrobot-v1 (return -500 (never up) to about -60), a linear sampled policy on
    normalised observations (extra: gym)."""

    env_id = "Acrobot-v1"

    def __init__(self, hidden: int = 0, episodes: int = 1, normalize: bool = True, **kwargs):
        super().__init__(hidden=hidden, episodes=episodes, normalize=normalize, **kwargs)


class _RunningLinear(GymPolicy):
    """A linear policy on running-normalised observations, one episode per score: the
    setting of Mania et al. (2018, ARS V2-t) for the MuJoCo tasks."""

    discrete = False

    def __init__(self, hidden=0, episodes: int = 1, normalize="running", **kwargs):
        super().__init__(hidden=hidden, episodes=episodes, normalize=normalize, **kwargs)


class LunarLander(_RunningLinear):
    """LunarLanderContinuous-v3 (solved at 200), a linear policy with running
    observation statistics, searched by PGPE with ClipUp (extra: box2d)."""

    env_id = "LunarLanderContinuous-v3"
    default_config = {"generations": 100, "population": 200, "sigma": 0.5,
                      "strategy": "pgpe", "strategy_options": {"max_speed": 0.3}}


class Hopper(_RunningLinear):
    """Hopper-v5 (ARS's threshold 3120), a linear policy with running observation
    statistics, ARS with the paper's settings but twice its step size: it reaches the
    threshold sooner, and may pass it and fall back, which the end's selection test among
    the centres kept over the run undoes (extra: mujoco). The alive bonus (+1 a step) is
    removed from the score the search sees (``reward_offset=-1``), not from test returns."""

    env_id = "Hopper-v5"
    default_config = {"generations": 400, "population": 16, "sigma": 0.025,
                      "strategy": "ars",
                      "strategy_options": {"top": 4, "step_size": 0.02}}

    def __init__(self, reward_offset: float = -1.0, **kwargs):
        super().__init__(reward_offset=reward_offset, **kwargs)


class HalfCheetah(_RunningLinear):
    """HalfCheetah-v5 (ARS's threshold 3430), ARS's policy: linear, on running observation
    statistics, its actions not squashed (MuJoCo clamps them and charges control cost on
    the raw action, which keeps the policy off bang-bang gaits that fall in some episodes),
    and the paper's settings (extra: mujoco)."""

    env_id = "HalfCheetah-v5"
    default_config = {"generations": 300, "population": 64, "sigma": 0.03,
                      "strategy": "ars",
                      "strategy_options": {"top": 4, "step_size": 0.02}}

    def __init__(self, squash: bool = False, **kwargs):
        super().__init__(squash=squash, **kwargs)


class BipedalWalker(_RunningLinear):
    """BipedalWalker-v3 (solved at 300), a linear policy with running observation
    statistics, ARS with 16 directions, all used (extra: box2d). The search sees rewards
    clipped to [-1, 1] (a fall's -100 becomes -1: trying to walk scores above standing
    still), test returns the true rewards."""

    env_id = "BipedalWalker-v3"
    default_config = {"generations": 3000, "population": 32, "sigma": 0.03,
                      "strategy": "ars",
                      "strategy_options": {"top": 16, "step_size": 0.02}}

    def __init__(self, reward_clip: float | None = 1.0, **kwargs):
        super().__init__(reward_clip=reward_clip, **kwargs)
