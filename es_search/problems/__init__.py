"""Built-in problems and loading an agent class from a spec: a built-in name,
``gym:ENV_ID``, ``package.module:AgentClass`` or ``path/to/file.py:AgentClass`` (a class
from a file or the current folder is sent to the workers by value)."""
from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import threading
from typing import Any

from ..agent import FILE_MODULES, Agent, RunAtImport
from ..checks import check_keywords, did_you_mean
from ..pickling import cloudpickle
from .function import Function
from .gym_policy import GymPolicy

__all__ = ["BUILTINS", "GYM_PREFIX", "Function", "GymPolicy", "ProblemError", "gym_problem",
           "build_problem", "load_problem", "problem_defaults", "resolve_spec"]

_SUBMODULES = ("batched_control", "blog", "control", "digits", "sphere")


def __getattr__(name: str) -> Any:  # es_search.problems.blog, after a bare import es_search
    if name in _SUBMODULES:
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


#: name -> "module:Class"; ``es-search list`` shows the first sentence of its docstring
BUILTINS: dict[str, str] = {
    "blog": "es_search.problems.blog:BlogAgent",
    "sphere": "es_search.problems.sphere:Sphere",
    "rastrigin": "es_search.problems.sphere:Rastrigin",
    "rosenbrock": "es_search.problems.sphere:Rosenbrock",
    "cartpole": "es_search.problems.batched_control:CartPole",
    "pendulum": "es_search.problems.batched_control:Pendulum",
    "acrobot": "es_search.problems.control:Acrobot",
    "lunarlander": "es_search.problems.control:LunarLander",
    "hopper": "es_search.problems.control:Hopper",
    "halfcheetah": "es_search.problems.control:HalfCheetah",
    "bipedalwalker": "es_search.problems.control:BipedalWalker",
    "digits": "es_search.problems.digits:Digits",
}

#: ``load_problem(GYM_PREFIX + env_id)``: a GymPolicy for any gymnasium id
GYM_PREFIX = "gym:"


class ProblemError(ValueError):
    """A problem spec that cannot be loaded; the message says why."""


_ARGV_LOCK = threading.RLock()


def _import_file(path: str) -> Any:
    if not os.path.isfile(path):
        raise ProblemError(f"no such file: {path}")
    name = FILE_MODULES + os.path.splitext(os.path.basename(path))[0].replace("-", "_")
    loaded = sys.modules.get(name)
    if os.path.abspath(getattr(loaded, "__file__", None) or "") == os.path.abspath(path):
        return loaded  # a file runs once in a process, as an import does
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ProblemError(f"cannot import {path} as a Python module")
    module, folder = importlib.util.module_from_spec(spec), os.path.dirname(os.path.abspath(path))
    with _ARGV_LOCK:  # one file at a time: each thread restores the arguments it found
        sys.modules[name], known = module, set(sys.modules)
        argv, sys.argv = sys.argv, [path]  # as if run bare: not es-search's own arguments
        sys.path.insert(0, folder)  # as `python FILE`: the modules beside it import
        try:
            spec.loader.exec_module(module)
        except RunAtImport:  # a script's unguarded run(): what it defines above the call
            pass
        except (Exception, SystemExit) as exc:
            del sys.modules[name]
            raise ProblemError(f"importing {path} failed: {type(exc).__name__}: {exc}" if
                               isinstance(exc, Exception) else
                               f"importing {path} exited (sys.exit({exc.code!r})): es_search "
                               f"runs the file without arguments to find its classes; put "
                               f"what a run needs, its argument parsing too, under "
                               f"if __name__ == '__main__':") from exc
        finally:
            sys.argv = argv
            sys.path.remove(folder)
    for other in set(sys.modules) - known:  # the modules beside it that it imported
        file = getattr(sys.modules[other], "__file__", None) or "/"
        if os.path.relpath(file, folder).split(os.sep) in ([other + ".py"],
                                                           [other, "__init__.py"]):
            cloudpickle.register_pickle_by_value(sys.modules[other])
    cloudpickle.register_pickle_by_value(module)  # workers cannot import them by name
    return module


def gym_problem(env_id: str) -> type[GymPolicy]:
    """A :class:`GymPolicy` subclass for gymnasium environment ``env_id``."""
    if not env_id:
        raise ProblemError(f"{GYM_PREFIX}ENV_ID needs an environment id, e.g. "
                           f"{GYM_PREFIX}CartPole-v1")
    from .gym_env import look_up
    look_up(env_id)  # an unknown id or a missing extra fails here
    name = "Gym_" + "".join(c if c.isalnum() else "_" for c in env_id)
    return type(name, (GymPolicy,), {"env_id": env_id, "_spec": GYM_PREFIX + env_id,  # its name
                                     "__module__": __name__, "__doc__": f"GymPolicy for {env_id}."})


def _is_file(where: str) -> bool:
    """Whether the part of a spec before its last ``:`` is a ``.py`` file, not a module."""
    return where.endswith(".py") or os.sep in where


def resolve_spec(spec: str, folder: str | None = None) -> str:
    """``spec`` with its file made absolute against ``folder`` (default: the current
    folder): a relative ``file.py``, or a module that is a file there (``my_agents:Walker``
    is ``my_agents.py:Walker``, as :func:`~es_search.agent.class_home` records it)."""
    if spec.startswith(GYM_PREFIX):
        return spec
    where, _, attr = spec.rpartition(":")
    folder = folder or os.getcwd()
    if where and "." not in where and os.path.isfile(os.path.join(folder, where + ".py")):
        where += ".py"
    return f"{os.path.normpath(os.path.join(folder, where))}:{attr}" if _is_file(where) \
        else spec


def _import_module(where: str, folder: str | None, keep_on_path: bool = False) -> Any:
    """``where`` imported, else from ``folder`` (default: the current folder, not on the
    ``es-search`` script's ``sys.path``) and sent to workers by value; ``keep_on_path``:
    for a gymnasium ``entry_point="module:Env"``."""
    top = where.split(".")[0]
    folder = os.path.abspath(folder or os.getcwd())
    try:
        return importlib.import_module(where)
    except ImportError as exc:  # a module found but failing, too: named, one line
        if not isinstance(exc, ModuleNotFoundError) or exc.name != top:
            raise ProblemError(f"cannot import module {where!r}: {exc}") from exc
    sys.path.insert(0, folder)
    try:
        module = importlib.import_module(where)
    except ImportError as exc:
        raise ProblemError(f"cannot import module {where!r} from {folder}: {exc}") from exc
    finally:
        if not keep_on_path:
            sys.path.remove(folder)
    cloudpickle.register_pickle_by_value(sys.modules[top])  # workers cannot import it by name
    return module


def _classes_note(module: Any, attr: str = "") -> str:
    """A note naming the Agent subclasses ``module`` defines (after one like ``attr``)."""
    found = [name for name, value in vars(module).items()
             if isinstance(value, type) and issubclass(value, Agent) and value is not Agent
             and value.__module__ == module.__name__]
    return did_you_mean(attr, found) + (f"; its es_search.Agent classes: {', '.join(found)}"
                                        if found else "; it defines no es_search.Agent class")


def load_problem(spec: str, folder: str | None = None) -> type[Agent]:
    """The Agent subclass named by ``spec``; ``folder``: where a relative file or a
    module not installed is looked for (default: the current folder)."""
    if spec.startswith(GYM_PREFIX):
        env_id = spec[len(GYM_PREFIX):]
        if ":" in env_id:  # gym:module:ID, the module registers ID when imported
            _import_module(env_id.rpartition(":")[0], folder, keep_on_path=True)
        return gym_problem(env_id)
    where, _, attr = BUILTINS.get(spec, spec).rpartition(":")
    if not where and spec.endswith(".py"):
        note = _classes_note(_import_file(os.path.join(folder or "", spec)))
        raise ProblemError(f"{spec!r} names a file; name the agent class too, as "
                           f"{spec}:AgentClass{note}")
    if not where:
        raise ProblemError(f"unknown problem {spec!r}{did_you_mean(spec, list(BUILTINS))}: "
                           f"use a built-in name ({', '.join(BUILTINS)}), {GYM_PREFIX}ENV_ID, "
                           f"package.module:AgentClass or path/to/file.py:AgentClass")
    module = _import_file(os.path.join(folder or "", where)) if _is_file(where) \
        else _import_module(where, folder)
    cls = getattr(module, attr, None)
    if cls is None:
        raise ProblemError(f"{where} has no attribute {attr!r}{_classes_note(module, attr)}")
    if not (isinstance(cls, type) and issubclass(cls, Agent)):
        raise ProblemError(f"{where}:{attr} is not an es_search.Agent subclass")
    return cls


def build_problem(cls: type, params: dict, seed: int = 0, spec: str = "") -> Agent:
    """``cls(**params)``, its random initial weights from ``seed`` (the caller's RNGs
    are left as they were); ``spec``: how it was named, for messages."""
    from ..seeding import build_seeded
    spec = spec or cls.__qualname__
    check_keywords(cls, params, spec, "parameter", ProblemError, " (-p NAME=VALUE)")
    try:
        return build_seeded(seed, cls, **params)
    except ImportError:  # a missing extra: its own message names it
        raise
    except Exception as exc:  # noqa: BLE001 - whatever the constructor raises: one line
        hint = " (give it with -p NAME=VALUE)" if isinstance(exc, TypeError) and \
            "missing" in str(exc) and "required" in str(exc) else ""
        what = str(exc) if isinstance(exc, (TypeError, ValueError)) else \
            f"{type(exc).__name__}: {exc}"
        given = " with " + ", ".join(f"-p {k}={v!r}" for k, v in params.items()) \
            if params else ""
        raise ProblemError(f"cannot build {spec}{given}: {what}{hint}") from None


def problem_defaults(cls: type) -> dict:
    """A run's settings where the spec gives none: ``cls.default_config`` over these
    (population or sigma None: the strategy's)."""
    return {"generations": 50, "population": None, "sigma": None,
            **getattr(cls, "default_config", {})}
