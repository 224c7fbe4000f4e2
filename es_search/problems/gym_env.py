"""gymnasium environments by id (``"module:Id"`` imports the module first), with one
clear error for an unknown id, a missing extra or refused keyword arguments."""
from __future__ import annotations

import contextlib
import importlib
import re
import warnings
from typing import Any, Iterator, Mapping


#: the extras of gymnasium's Box2D and MuJoCo environments, before gymnasium is installed
_NEEDS = {**dict.fromkeys(("LunarLander", "LunarLanderContinuous", "BipedalWalker",
                           "BipedalWalkerHardcore", "CarRacing"), "box2d"),
          **dict.fromkeys(("Ant", "HalfCheetah", "Hopper", "Humanoid", "HumanoidStandup",
                           "InvertedDoublePendulum", "InvertedPendulum", "Pusher",
                           "Reacher", "Swimmer", "Walker2d"), "mujoco")}


def _extra_for(env_id: str, entry_point: Any = None) -> str:
    """The extra that installs what ``env_id`` needs (by its entry point, else its name)."""
    if entry_point is None:
        return _NEEDS.get(re.sub(r"-v\d+$", "", env_id), "gym")
    text = str(entry_point)
    return "box2d" if "box2d" in text else "mujoco" if "mujoco" in text else "gym"


def look_up(env_id: str, spec: Any = None) -> tuple[Any, Any, Any]:
    """(gymnasium, what to pass ``gymnasium.make``, the id's spec); nothing is made.
    ``spec``: the agent's, used where the id is unknown (None: an unknown id is refused)."""
    from ..extras import require
    gym = require("gymnasium", _extra_for(env_id))
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
    """``gymnasium.make(env_id, **kwargs)``; ``spec``: the id's ``EnvSpec``, made where the
    id is unknown (a worker, for an id the user's script registered)."""
    from ..extras import install_command
    gym, target, spec = look_up(env_id, spec)
    try:
        with _mujoco_warnings_to_python(spec.entry_point):
            return gym.make(target, **dict(kwargs or {}))
    except TypeError as exc:
        if not kwargs:
            raise
        raise ValueError(f"gymnasium environment {env_id!r} does not take env_kwargs "
                         f"{dict(kwargs)}: {exc}") from None
    except (ImportError, gym.error.DependencyNotInstalled) as exc:
        extra = _extra_for(env_id, spec.entry_point)
        raise ImportError(f"gymnasium environment {env_id!r} needs a package that is not "
                          f"installed ({exc}); install it with "
                          f"{install_command(extra)}") from None


@contextlib.contextmanager
def _mujoco_warnings_to_python(entry_point: Any) -> Iterator[None]:
    """MuJoCo's warnings while its environment is built, as Python warnings (not a line on
    stdout and a ``MUJOCO_LOG.TXT`` in the current folder)."""
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
