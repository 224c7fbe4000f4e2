"""``GymPolicy``: a small policy network for any gymnasium environment.

The policy's forward pass runs in NumPy on weights copied out once per ``score()``:
torch's per-call overhead on tiny layers costs more than an environment step.
gymnasium is imported lazily (extras ``gym``, ``box2d``, ``mujoco``).
"""
from __future__ import annotations

import contextlib
import importlib
import math
import re
import warnings
from typing import Any, Iterator, Mapping

import numpy as np
import torch

from ..agent import Agent
from ..checks import check_bool, check_choice, check_dict, check_int, check_number
from ..moments import Moments

#: ``normalize`` values; True and False mean "fixed" and "off"
NORMALIZE_MODES = ("running", "fixed", "off")
_SEED_SPAN = 2 ** 31 - 1000
_RUNNING_BUFFERS = ("obs_count", "obs_mean", "obs_m2", "obs_std")
#: the first episode seed of ``test_scores()``: far from the seeds a search draws
TEST_SEED = 1_000_000


def return_figures(returns: np.ndarray) -> dict[str, float]:
    """``test_scores()`` of a control task: the test episodes' mean and std return."""
    returns = np.asarray(returns, dtype=np.float64)
    return {"test_return_mean": float(returns.mean()), "test_return_std": float(returns.std()),
            "test_episodes": len(returns)}


def _extra_for(entry_point: Any) -> str:
    text = str(entry_point)
    return "box2d" if "box2d" in text else "mujoco" if "mujoco" in text else "gym"


#: gymnasium's Box2D and MuJoCo environments by name, for the extra to name before
#: gymnasium itself is installed (afterwards, its registry's entry point says)
_NEEDS = {**dict.fromkeys(("LunarLander", "LunarLanderContinuous", "BipedalWalker",
                           "BipedalWalkerHardcore", "CarRacing"), "box2d"),
          **dict.fromkeys(("Ant", "HalfCheetah", "Hopper", "Humanoid", "HumanoidStandup",
                           "InvertedDoublePendulum", "InvertedPendulum", "Pusher",
                           "Reacher", "Swimmer", "Walker2d"), "mujoco")}


def _extra_for_id(env_id: str) -> str:
    """The extra that installs what ``env_id`` needs (``gym`` unless a known Box2D or
    MuJoCo task): ``_extra_for_id("Hopper-v5") == "mujoco"``."""
    return _NEEDS.get(re.sub(r"-v\d+$", "", env_id), "gym")


def env_spec(env_id: str) -> Any:
    """The registered ``EnvSpec`` of ``env_id`` (``"module:Id"`` imports the module
    first); a ValueError for an unknown id, an ImportError naming the extra when
    gymnasium is missing. Nothing is made."""
    return _look_up(env_id, None)[2]


def _look_up(env_id: str, spec: Any) -> tuple[Any, Any, Any]:
    """(gymnasium, what to pass ``gymnasium.make``, the id's spec); ``spec``: the one
    the agent carries, used when this process does not know the id."""
    from ..extras import require
    gym = require("gymnasium", _extra_for_id(env_id))
    target: Any = env_id
    if ":" in env_id:  # "module:Id", as gymnasium.make reads it: import, then look up
        module, _, target = env_id.rpartition(":")
        try:
            importlib.import_module(module)
        except ImportError as exc:
            if spec is None:  # else: made from the spec, as an unregistered id is
                raise ValueError(f"gymnasium environment id {env_id!r}: cannot import "
                                 f"module {module!r} ({exc}); it should register "
                                 f"{target!r} when imported") from None
    try:
        spec = gym.spec(target)
    except gym.error.Error as exc:
        if spec is None:
            if isinstance(exc, gym.error.DeprecatedEnv):  # a known id of an old version
                raise ValueError(f"deprecated gymnasium environment id {env_id!r}: "
                                 f"{exc}") from None
            raise ValueError(f"unknown gymnasium environment id {env_id!r}: {exc} (ids look "
                             f"like 'CartPole-v1'; gymnasium.pprint_registry() lists them)"
                             ) from None
        target = spec
    return gym, target, spec


def make_env(env_id: str, spec: Any = None, kwargs: Mapping[str, Any] | None = None) -> Any:
    """``gymnasium.make(env_id, **kwargs)``, or one clear error: an unknown id
    (ValueError), a missing extra (ImportError naming the ``pip install`` that fixes
    it) or keyword arguments the environment does not take (ValueError). ``spec``: the
    id's ``EnvSpec`` where the agent was built, made when this process does not know the
    id (an environment the user's script registered, in a worker process)."""
    from ..extras import install_command
    gym, target, spec = _look_up(env_id, spec)
    try:
        with _mujoco_warnings_to_python(spec.entry_point):
            return gym.make(target, **dict(kwargs or {}))
    except TypeError as exc:
        if not kwargs:
            raise
        raise ValueError(f"gymnasium environment {env_id!r} does not take env_kwargs "
                         f"{dict(kwargs)}: {exc}") from None
    except (ImportError, gym.error.DependencyNotInstalled) as exc:
        extra = _extra_for(spec.entry_point)
        raise ImportError(f"gymnasium environment {env_id!r} needs a package that is not "
                          f"installed ({exc}); install it with "
                          f"{install_command(extra)}") from None


@contextlib.contextmanager
def _mujoco_warnings_to_python(entry_point: Any) -> Iterator[None]:
    """While a MuJoCo environment is built, MuJoCo's own warnings (e.g. MuJoCo 4.0 on
    gymnasium's ``half_cheetah.xml``: "compiler attribute 'settotalmass' is deprecated")
    become Python warnings instead of a ``WARNING:`` line on stdout and a
    ``MUJOCO_LOG.TXT`` written into the user's current folder. Deprecations, which only
    the model file's authors can act on, are ``DeprecationWarning`` (hidden by default,
    as Python hides them); any other is a ``RuntimeWarning``. MuJoCo's previous handler is
    restored on the way out, so nothing outside the build changes."""
    if "mujoco" not in str(entry_point):
        yield
        return
    import mujoco
    messages: list[str] = []
    previous = mujoco.get_mju_user_warning()
    mujoco.set_mju_user_warning(messages.append)
    try:
        yield
    finally:
        mujoco.set_mju_user_warning(previous)
        for message in dict.fromkeys(messages):
            category = DeprecationWarning if "deprecated" in message else RuntimeWarning
            warnings.warn(f"MuJoCo: {message}", category, stacklevel=3)


def check_greedy(greedy: bool, discrete: bool, env_id: str) -> None:
    """``greedy=True`` chooses between sampling and argmax of *discrete* actions:
    refused for continuous ones, which it would not change."""
    if greedy and not discrete:
        raise ValueError(f"greedy=True takes the argmax of discrete actions, but {env_id}'s "
                         f"actions are continuous (its policy is already deterministic): "
                         f"leave greedy out")


def _hidden_sizes(hidden: Any) -> tuple[int, ...]:
    items = (hidden,) if isinstance(hidden, (int, np.integer)) else hidden
    try:
        sizes = tuple(items)
    except TypeError:
        sizes = None
    if sizes is None or not all(isinstance(h, (int, np.integer)) and not isinstance(h, bool)
                                for h in sizes):
        raise TypeError(f"hidden must be an int (units of one tanh hidden layer, 0: a "
                        f"linear policy) or a tuple of ints (one per layer), got {hidden!r}")
    if isinstance(hidden, (int, np.integer)) and hidden == 0:
        return ()
    if any(h < 1 for h in sizes):
        raise ValueError(f"hidden layers need >= 1 unit each (hidden=0: a linear policy), "
                         f"got {hidden!r}")
    return tuple(int(h) for h in sizes)


def _normalize_mode(normalize: Any) -> str:
    if isinstance(normalize, bool):
        return "fixed" if normalize else "off"
    return check_choice("normalize", normalize, NORMALIZE_MODES,
                        " (or True = 'fixed', False = 'off')")


class GymPolicy(Agent):
    """A tanh MLP (or linear) policy for gymnasium environment ``env_id``, scored by
    the mean return of ``episodes`` episodes.

    ``GymPolicy("Hopper-v5", hidden=0, normalize="running")`` works for any registered
    id; subclasses may set ``env_id`` as a class attribute instead. Discrete actions are
    *sampled* from the softmax of the logits (``greedy=True``: the argmax); Box actions
    are ``tanh`` squashed to the action bounds (unbounded Box: the raw outputs).

    - ``hidden``: units of one tanh hidden layer, or a tuple (one entry per layer);
      0 or (): a linear policy. The output layer starts at zero.
    - ``episodes``: episodes per score; ``max_steps``: cut episodes short.
    - ``reward_offset``: added to every step's reward in the score the search sees
      (e.g. -1 removes Hopper's alive bonus); never in :meth:`returns`.
    - ``reward_clip``: a number ``c`` clips every step's reward to ``[-c, c]`` (before
      the offset) in the score the search sees, never in :meth:`returns` (e.g. 1 turns
      BipedalWalker's -100 for a fall into -1, so that trying to walk is not punished
      far below standing still); None: no clipping.
    - ``normalize``: ``"off"`` (False); ``"fixed"`` (True): observations are
      standardised with the statistics of ``norm_episodes`` random-action episodes run
      once at construction (seeds from ``norm_seed``); ``"running"``: with running
      statistics of every observation the search has seen, merged after each
      generation in candidate order (see :meth:`task_report`), so that a candidate is
      always normalised with the statistics as of the start of its generation and a
      run is the same for any worker count. The statistics are buffers (``obs_mean``,
      ``obs_std``; running also ``obs_count``, ``obs_m2``): not evolved, saved with the
      weights.
    - ``env_kwargs``: keyword arguments of ``gymnasium.make`` (e.g.
      ``{"is_slippery": False}`` for FrozenLake; ``-p "env_kwargs={...}"`` on the
      command line).
    - Observations that are not a Box are flattened as ``gymnasium.spaces.flatten``
      does (a Discrete one becomes one-hot; Tuple and Dict their parts in a row).
    - ``crn``: common random numbers: every candidate of a generation plays the same
      episode seeds (from ``self.generation_seed``, set by the engine; the task seed
      when it is None) and samples discrete actions from generators seeded by them.
      Otherwise episodes are seeded from ``self.task_seed`` and discrete actions come
      from NumPy's global RNG, which es_search seeds per task.
    """

    env_id = ""
    discrete = True
    _action_start = 0  # the first discrete action (gymnasium's Discrete.start)
    test_episodes = 20  # episodes of test_scores()
    default_config = {"generations": 40, "population": 16, "sigma": 0.5,
                      "strategy_options": {"reevaluate": True}}

    def __init__(self, env_id: str | None = None, hidden: Any = 0, episodes: int = 3,
                 max_steps: int | None = None, greedy: bool = False,
                 normalize: Any = False, reward_offset: float = 0.0, crn: bool = False,
                 norm_episodes: int = 10, norm_seed: int = 12345,
                 reward_clip: float | None = None,
                 env_kwargs: Mapping[str, Any] | None = None):
        super().__init__()
        fixed = type(self).env_id
        if fixed and env_id is not None and env_id != fixed:
            raise ValueError(f"{type(self).__name__} is a policy for {fixed}, not {env_id!r}: "
                             f"for another environment use GymPolicy({env_id!r}) "
                             f"(es-search run gym:{env_id})")
        env_id = fixed if env_id is None else env_id
        greedy, crn = check_bool("greedy", greedy), check_bool("crn", crn)
        if not isinstance(env_id, str) or not env_id:
            raise ValueError(f"GymPolicy needs a gymnasium environment id, e.g. "
                             f"GymPolicy('CartPole-v1'), got {env_id!r}")
        sizes = _hidden_sizes(hidden)
        episodes = check_int("episodes", episodes, 1)
        max_steps = check_int("max_steps", max_steps, 1, none_ok=True)
        mode = _normalize_mode(normalize)
        norm_episodes = check_int("norm_episodes", norm_episodes, 1)
        check_number("reward_offset", reward_offset)
        if reward_clip is not None:
            check_number("reward_clip", reward_clip, "a finite number > 0 (rewards are "
                         "clipped to [-reward_clip, reward_clip]) or None",
                         lambda v: math.isfinite(v) and v > 0)
        self.env_kwargs = check_dict("env_kwargs", env_kwargs, "a dict of gymnasium.make() "
                                     "keyword arguments (e.g. {{'is_slippery': False}})")
        # an unknown id, a missing extra or a keyword the environment refuses fails here
        env = make_env(env_id, kwargs=self.env_kwargs)
        self.env_id = env_id
        # workers make it from the spec when they lack its registration (gym.register
        # in the user's script)
        self.env_spec = env.spec
        self._read_spaces(env)
        env.close()
        check_greedy(greedy, self.discrete, env_id)
        self.episodes, self.max_steps = int(episodes), max_steps
        self.greedy, self.reward_offset, self.crn = greedy, float(reward_offset), crn
        self.reward_clip = None if reward_clip is None else float(reward_clip)
        self.hidden, self.normalize = sizes, mode
        dims = [self.obs_dim, *sizes, self.act_dim]
        self.layers = torch.nn.ModuleList(
            torch.nn.Linear(a, b) for a, b in zip(dims[:-1], dims[1:]))
        with torch.no_grad():  # start from a zero policy: the search does the rest
            self.layers[-1].weight.zero_()
            self.layers[-1].bias.zero_()
        mean, std = np.zeros(self.obs_dim), np.ones(self.obs_dim)
        if mode == "fixed":
            mean, std = self._random_action_statistics(int(norm_episodes), int(norm_seed))
        if mode == "running":
            self.register_buffer("obs_count", torch.zeros((), dtype=torch.float64))
        self.register_buffer("obs_mean", torch.as_tensor(mean, dtype=torch.float64))
        if mode == "running":
            self.register_buffer("obs_m2", torch.zeros(self.obs_dim, dtype=torch.float64))
        self.register_buffer("obs_std", torch.as_tensor(std, dtype=torch.float64))
        self._norm = (mean, std)
        self._env = None
        self._report: dict | None = None

    def _read_spaces(self, env: Any) -> None:
        import gymnasium as gym
        obs_space, space = env.observation_space, env.action_space
        # other spaces are flattened as gymnasium.spaces.flatten does: a Discrete
        # observation becomes a one-hot vector, a Tuple or Dict their parts in a row
        self._obs_space = None if isinstance(obs_space, gym.spaces.Box) else obs_space
        try:
            self.obs_dim = int(gym.spaces.flatdim(obs_space))
        except (ValueError, NotImplementedError, TypeError):
            raise ValueError(f"GymPolicy needs observations that flatten to a vector of "
                             f"fixed size (Box, Discrete, MultiDiscrete, MultiBinary, or a "
                             f"Tuple or Dict of them); {self.env_id} has {obs_space}"
                             ) from None
        if isinstance(space, gym.spaces.Discrete):
            self.discrete, self.act_dim = True, int(space.n)
            self.action_high = None
            self._action_start = int(space.start)  # Discrete(3, start=-1): -1, 0, 1
            return
        if not isinstance(space, gym.spaces.Box):
            raise ValueError(f"GymPolicy handles Discrete and Box action spaces; "
                             f"{self.env_id} has {space}")
        self.discrete, self.act_dim = False, int(np.prod(space.shape))
        low = np.asarray(space.low, dtype=np.float64).reshape(-1)
        high = np.asarray(space.high, dtype=np.float64).reshape(-1)
        self.action_high = high
        self._action_shape = space.shape
        bounded = bool(np.all(np.isfinite(low)) and np.all(np.isfinite(high)))
        self._squash = ((high + low) / 2, (high - low) / 2) if bounded else None

    def _random_action_statistics(self, episodes: int, seed: int):
        """Mean and std of the observations of ``episodes`` random-action episodes."""
        env = self.make_env()
        stats = Moments.empty(self.obs_dim)
        for k in range(episodes):
            obs, _ = env.reset(seed=seed + k)
            env.action_space.seed(seed + k)
            seen, steps = [], 0
            while True:
                seen.append(self.flat_observation(obs))
                obs, _, terminated, truncated, _ = env.step(env.action_space.sample())
                steps += 1
                if terminated or truncated or (self.max_steps and steps >= self.max_steps):
                    break
            stats = stats.merge(Moments.of(np.array(seen)))
        env.close()
        std = np.sqrt(stats.m2 / max(stats.count - 1, 1))
        return stats.mean, np.maximum(std, 1e-3)

    def flat_observation(self, obs: Any) -> np.ndarray:
        """An observation as the policy's flat float64 input (a Box's values; other
        spaces flattened by ``gymnasium.spaces.flatten``: Discrete as one-hot)."""
        space = self.__dict__.get("_obs_space")  # older pickles lack it: Box
        if space is not None:
            import gymnasium as gym
            obs = gym.spaces.flatten(space, obs)
        return np.asarray(obs, dtype=np.float64).reshape(-1)

    def make_env(self) -> Any:
        """A new environment of this policy's id (from its spec when this process does
        not know the id)."""
        state = self.__dict__  # older pickles lack env_spec and env_kwargs
        return make_env(self.env_id, state.get("env_spec"), state.get("env_kwargs"))

    def __getstate__(self):  # the environment is rebuilt where the agent lands
        state = self.__dict__.copy()
        state["_env"] = None
        state["_report"] = None
        return state

    # ------------------------------------------------------------------ acting
    def _numpy_layers(self):
        return [(l.weight.detach().numpy().astype(np.float64),
                 l.bias.detach().numpy().astype(np.float64)) for l in self.layers]

    def act(self, layers, obs: np.ndarray, rng: np.random.Generator | None = None):
        """The action for observation ``obs`` (flat float64) with ``layers`` (from
        ``_numpy_layers()``); discrete sampling draws from ``rng`` (default: NumPy's
        global RNG)."""
        return self.actor(layers, rng)(obs)

    def actor(self, layers, rng: np.random.Generator | None = None):
        """``act`` as a function of the observation alone, for one episode: what does
        not change within an episode (layers, statistics, action space) is looked up
        once, not at every step (a few us of a step's ~40)."""
        mean, std = self._norm if self.normalize != "off" else (None, None)
        hidden, (w_out, b_out) = layers[:-1], layers[-1]

        def logits(obs):
            h = obs if mean is None else (obs - mean) / std
            for w, b in hidden:
                h = np.tanh(w @ h + b)
            return w_out @ h + b_out

        if self.discrete:
            start = self._action_start
            if self.greedy:
                return lambda obs: start + int(np.argmax(logits(obs)))
            draw = np.random.random if rng is None else rng.random

            def sample(obs):
                h = logits(obs)
                p = np.exp(h - h.max())
                p /= p.sum()
                return start + int(np.searchsorted(np.cumsum(p), draw() * p.sum()))
            return sample
        shape = self._action_shape
        if self._squash is None:
            return lambda obs: logits(obs).reshape(shape)
        offset, scale = self._squash
        if tuple(shape) == (self.act_dim,):  # reshape would change nothing
            return lambda obs: np.tanh(logits(obs)) * scale + offset
        return lambda obs: (np.tanh(logits(obs)) * scale + offset).reshape(shape)

    def episode_return(self, seed: int | None, reward_offset: float = 0.0,
                       record: bool = False, seeded_actions: bool | None = None,
                       reward_clip: float | None = None, whole: bool = False) -> float:
        """One episode's return (each step's reward clipped to ``[-reward_clip,
        reward_clip]`` if given, plus ``reward_offset``). ``record``: add its
        observations and steps to the report of the current ``score()``.
        ``seeded_actions``: sample discrete actions from a generator seeded ``seed``
        (default: with ``crn``), not from NumPy's global RNG. ``whole``: ignore
        ``max_steps`` when the environment ends episodes itself (a time limit)."""
        if self._env is None:
            self._env = self.make_env()
        env = self._env
        self._norm = (self.obs_mean.numpy(), self.obs_std.numpy())
        seeded = self.crn if seeded_actions is None else seeded_actions
        rng = np.random.default_rng(seed) if (seeded and self.discrete) else None
        act = self.actor(self._numpy_layers(), rng)
        keep = record and self.normalize == "running"
        seen: list = []
        limit = self.max_steps or math.inf
        if whole and getattr(env.spec, "max_episode_steps", None):
            limit = math.inf  # the environment's own limit ends the episode
        obs, _ = env.reset(seed=seed)
        total, steps = 0.0, 0
        flat = self.__dict__.get("_obs_space") is not None  # a Box needs no flattening
        while True:
            x = self.flat_observation(obs) if flat else \
                np.asarray(obs, dtype=np.float64).reshape(-1)
            if keep:
                seen.append(x)
            obs, reward, terminated, truncated, _ = env.step(act(x))
            reward = float(reward)
            if reward_clip is not None:
                reward = min(max(reward, -reward_clip), reward_clip)
            total += reward + reward_offset
            steps += 1
            if terminated or truncated or steps >= limit:
                break
        if record and self._report is not None:
            self._report["steps"] += steps
            if keep:
                self._report["obs"] = self._report["obs"].merge(Moments.of(np.array(seen)))
        return total

    def episode_seeds(self) -> list[int]:
        """The seeds of the episodes ``score()`` plays now."""
        base = self.generation_seed if self.crn else None
        if base is None:
            base = self.task_seed if self.task_seed is not None else 0
        base %= _SEED_SPAN
        return [base + k for k in range(self.episodes)]

    def score(self, **kwargs) -> float:
        self._report = {"steps": 0, "obs": Moments.empty(self.obs_dim)
                        if self.normalize == "running" else None}
        clip = getattr(self, "reward_clip", None)  # absent in agents pickled before it
        return float(np.mean([self.episode_return(s, self.reward_offset, record=True,
                                                  reward_clip=clip)
                              for s in self.episode_seeds()]))

    def test_scores(self) -> dict[str, float]:
        """The true returns of ``test_episodes`` fresh, whole episodes (seeded
        ``TEST_SEED``, ``TEST_SEED + 1``, ...): their mean and std."""
        return return_figures(self.returns(self.test_episodes, TEST_SEED))

    def returns(self, episodes: int = 100, seed: int = 0) -> np.ndarray:
        """The true returns (no ``reward_offset``) of ``episodes`` episodes seeded
        ``seed``, ``seed + 1``, ...: whole episodes, to the environment's own time limit
        (``max_steps`` cuts only those of an environment that has none); the
        statistics are not updated. Discrete actions are sampled from a generator
        seeded per episode."""
        return np.array([self.episode_return(seed + k, seeded_actions=True, whole=True)
                         for k in range(int(episodes))])

    # ------------------------------------------------------------------ shared statistics
    def task_report(self) -> dict | None:
        """The last ``score()``'s environment steps and, with running normalisation,
        the count/mean/M2 of the observations it saw (a :class:`Moments`)."""
        return self._report

    def merge_reports(self, reports: list) -> Mapping[str, float]:
        """Fold a generation's reports, in candidate order, into the running statistics
        (Chan et al.'s formula); return the generation's environment steps."""
        steps = 0
        stats = self.running_moments() if self.normalize == "running" else None
        for report in reports:
            if not report:
                continue
            steps += int(report.get("steps", 0))
            if stats is not None and report.get("obs") is not None:
                stats = stats.merge(Moments(*report["obs"]))
        if stats is not None:
            self.set_weights({"obs_count": torch.tensor(stats.count, dtype=torch.float64),
                              "obs_mean": stats.mean, "obs_m2": stats.m2,
                              "obs_std": stats.std()})
        return {"steps": steps}

    def running_moments(self) -> Moments:
        """The running statistics as a :class:`Moments` ("running" mode only)."""
        if self.normalize != "running":
            raise ValueError(f"running_moments() needs normalize='running'; this policy "
                             f"has normalize={self.normalize!r}")
        return Moments(float(self.obs_count), self.obs_mean.numpy().copy(),
                       self.obs_m2.numpy().copy())

    def shared_state(self) -> dict[str, torch.Tensor]:
        if self.normalize != "running":
            return {}
        state = self.state_dict()
        return {name: state[name].clone() for name in _RUNNING_BUFFERS}
