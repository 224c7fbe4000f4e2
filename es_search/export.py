"""A trained policy as one self-contained file (TorchScript or ONNX) that runs where
es_search is not installed: normalisation, network and action mapping."""
from __future__ import annotations

import contextlib
import copy
import inspect
import io
import logging
import os
import re
import warnings
from typing import Any

import torch

from .agent import Agent
from .checks import check_choice

#: the formats :func:`export` writes, with their usual file suffixes
FORMATS = {"torchscript": ".pt", "onnx": ".onnx"}
_MASK = 0xFFFFFFFF


def _mix(x: torch.Tensor) -> torch.Tensor:
    """A 32-bit xor-shift-multiply hash of int64 ``x`` in [0, 2**32): divisions for shifts
    and multipliers < 2**31 keep it in int64, so ONNX computes what torch does."""
    x = x ^ (x // 65536)
    x = (x * 0x7FEB352D) & _MASK
    x = x ^ (x // 32768)
    x = (x * 0x31848BAB) & _MASK
    return x ^ (x // 65536)


def uniforms(seed: torch.Tensor, rows: int) -> torch.Tensor:
    """The ``rows`` uniforms in (0, 1) an exported sampling policy draws for int64
    ``seed``: a hash of (seed, row)."""
    low = seed & _MASK
    high = ((seed - low) // 2 ** 32) & _MASK  # an exact division: floor = truncation
    key = _mix(_mix(low) ^ high)
    index = torch.arange(rows, dtype=torch.int64)
    return (_mix((key + index * 0x9E3779B9 + 1) & _MASK).to(torch.float64) + 0.5) / 2 ** 32


class _Policy(torch.nn.Module):
    """Normalise, a tanh MLP, then map the outputs to actions (float64 throughout): the
    torch twin of :func:`es_search.problems.gym_policy.mlp_actions`."""

    def __init__(self, layers: torch.nn.ModuleList, mean: Any, std: Any, discrete: bool,
                 start: int, squash: Any, shape: tuple, obs_dtype: str):
        super().__init__()
        self.obs_dtype = getattr(torch, obs_dtype)  # what the file's ``obs`` input takes
        layers = copy.deepcopy(layers).to(torch.float64).requires_grad_(False)
        self.hidden, self.out, n = layers[:-1], layers[-1], layers[0].in_features
        offset, scale = (0.0, 1.0) if squash is None else squash
        for name, value in (("mean", torch.zeros(n) if mean is None else mean),
                            ("std", torch.ones(n) if std is None else std),
                            ("offset", offset), ("scale", scale)):  # copies, not the agent's
            self.register_buffer(name, torch.as_tensor(value, dtype=torch.float64).clone())
        self.discrete, self.start = discrete, start
        self.squashed, self.shape = squash is not None, tuple(shape)

    def logits(self, obs: torch.Tensor) -> torch.Tensor:
        h = (obs.to(torch.float64) - self.mean) / self.std
        for layer in self.hidden:
            h = torch.tanh(layer(h))
        return self.out(h)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        h = self.logits(obs)
        if self.discrete:
            return torch.argmax(h, dim=1) + self.start
        if self.squashed:
            h = torch.tanh(h) * self.scale + self.offset
        return h.reshape((h.shape[0],) + self.shape)


class _Sampler(_Policy):
    """A discrete policy that samples from its softmax with ``uniforms(seed, rows)``."""

    def forward(self, obs: torch.Tensor, seed: torch.Tensor) -> torch.Tensor:
        h = self.logits(obs)
        cum = torch.cumsum(torch.exp(h - h.max(dim=1, keepdim=True).values), dim=1)
        u = uniforms(seed, h.shape[0])
        return (cum < (u * cum[:, -1])[:, None]).sum(dim=1) + self.start


def mlp_policy(layers: torch.nn.ModuleList, discrete: bool, greedy: bool = True,
               mean: Any = None, std: Any = None, start: int = 0, squash: Any = None,
               shape: tuple = (), obs_dtype: str = "float64") -> torch.nn.Module:
    """A tanh MLP policy (``layers``: ``torch.nn.Linear``) as an exportable module:
    observations (exported as ``obs_dtype``, computed in float64) normalised by
    ``mean``/``std``, then discrete actions from ``start`` (argmax when ``greedy``, else
    sampled: ``forward(obs, seed)``) or Box actions ``tanh(h) * scale + offset`` for
    ``squash=(offset, scale)`` (None: raw) in ``shape``."""
    cls = _Sampler if discrete and not greedy else _Policy
    return cls(layers, mean, std, discrete, start, squash, shape, obs_dtype)


def policy_module(agent: Agent) -> torch.nn.Module:
    """``agent.policy_module()`` if it has one, else ``agent`` (its ``forward()``)."""
    if callable(getattr(agent, "policy_module", None)):
        return agent.policy_module()
    if type(agent).forward is torch.nn.Module.forward:
        raise ValueError(
            f"{type(agent).__name__} cannot be exported: it defines no forward(). An "
            f"exported policy is the agent's forward(observations) -> actions, written "
            f"with torch operations; define one (and call it from score()), or export "
            f"your policy module yourself with torch.jit.trace or torch.onnx.export")
    return agent


def _inputs(module: torch.nn.Module, agent: Agent, example: Any) -> tuple[tuple, tuple]:
    """Inputs to trace ``module`` with, and others (twice the batch, other values) to check
    the file on."""
    if isinstance(module, _Policy):  # the environment's observations (and a sampler's seed)
        obs = (torch.randn(3, module.mean.shape[0], dtype=torch.float64,
                           generator=torch.Generator().manual_seed(0)) * 3
               ).to(module.obs_dtype)
        example = (obs, torch.tensor(7)) if isinstance(module, _Sampler) else obs
    if example is None and isinstance(getattr(agent, "obs_dim", None), int):
        example = torch.zeros(8, agent.obs_dim)
    if example is None:
        raise ValueError(f"exporting {type(agent).__name__}.forward() needs an example "
                         f"input: give the agent an int attribute obs_dim (forward() then "
                         f"takes (n, obs_dim)), or in Python pass Result.export(..., "
                         f"example=torch.zeros(8, OBS_DIM)) (a batch as forward() takes it)")
    inputs = tuple(example) if isinstance(example, (tuple, list)) else (example,)
    make = torch.Generator().manual_seed(1)
    other = [torch.cat([x, x]) if x.dim() >= 2 else x for x in inputs]  # twice the batch
    return inputs, tuple(x + torch.randn(x.shape, generator=make, dtype=x.dtype)
                         if x.is_floating_point() else x for x in other)


def _outputs(value: Any) -> list:
    values = value if isinstance(value, (tuple, list)) else (value,)
    return [v.detach().numpy() if isinstance(v, torch.Tensor) else v for v in values]


def _check_same(module: torch.nn.Module, run: Any, inputs: tuple[tuple, tuple],
                name: str) -> None:
    """Refuse a file (``run``) that does not compute what ``module`` does on ``inputs``."""
    import numpy as np
    for given in inputs:
        try:  # forward() itself may take only the example's batch size
            with torch.no_grad():
                expected = _outputs(module(*given))
            got = _outputs(run(given))
        except Exception as exc:  # noqa: BLE001 - e.g. a batch size frozen at export
            first = (str(exc).strip().splitlines() or [""])[0]
            raise _frozen(name, f" ({type(exc).__name__}: {first})") from None
        if len(got) != len(expected) or not all(
                np.allclose(e, g, rtol=1e-6, atol=1e-9, equal_nan=True)
                for e, g in zip(expected, got)):
            raise _frozen(name, "")


def _frozen(name: str, detail: str) -> ValueError:
    return ValueError(
        f"{name}: the exported file may not compute what forward() computes on inputs it "
        f"was not traced with{detail}: forward() takes a path that depends on its inputs "
        f"(Python control flow, .item(), NumPy, their shapes, a batch of 1 row), which an "
        f"export freezes; write it with torch operations only, and trace it with a batch "
        f"of 2 rows or more")


def export(agent: Agent, path: Any, to: str | None = None, example: Any = None) -> str:
    """Write what ``agent`` acts with to ``path`` as one self-contained file, ``to``
    ``"torchscript"`` (``torch.jit.load``) or ``"onnx"`` (``onnxruntime``; extra
    ``export``); None: as ``path`` ends (``.onnx``, else TorchScript). Returns the path.

    A control policy (:class:`GymPolicy`, the batched ones) takes ``obs``, a batch ``(n,
    obs_dim)`` of flat observations in the environment's dtype (float32 for CartPole,
    float64 for MuJoCo's; TorchScript takes either; one observation:
    ``obs.reshape(1, -1)``) and, when it samples discrete actions, ``seed`` (an int64
    scalar tensor: one per step); it returns ``n`` actions (int64, or float64 ``(n,
    *action_shape)``; ONNX's output ``actions``). Another agent exports its ``forward()``
    traced with ``example`` (default: zeros of ``(8, agent.obs_dim)``; ONNX's inputs named as its
    arguments, its output ``output``), refused (ValueError) where the file computes
    otherwise.

    >>> import tempfile, torch, es_search
    >>> from es_search.problems import GymPolicy
    >>> from es_search.export import export
    >>> agent = GymPolicy("CartPole-v1", hidden=8)          # samples its actions
    >>> path = export(agent, tempfile.mkdtemp() + "/cartpole.pt")
    >>> policy = torch.jit.load(path)                       # no es_search needed
    >>> obs = torch.zeros(2, 4)                             # 2 float32 observations
    >>> policy(obs, torch.tensor(0)).dtype, policy(obs, torch.tensor(0)).shape
    (torch.int64, torch.Size([2]))
    >>> path = export(agent, tempfile.mkdtemp() + "/cartpole.onnx", to="onnx")
    >>> import onnxruntime                                  # extra export
    >>> feeds = {"obs": obs.numpy(), "seed": torch.tensor(0).numpy()}
    >>> actions = onnxruntime.InferenceSession(path).run(["actions"], feeds)[0]
    >>> actions.tolist() == policy(obs, torch.tensor(0)).tolist()
    True
    """
    path = os.fspath(path)
    suffix = os.path.splitext(path)[1]
    named = next((name for name, end in FORMATS.items() if end == suffix), None)
    to = check_choice("to", to or named or "torchscript", FORMATS)
    if named not in (None, to):
        raise ValueError(f"cannot export to {path}: a {named} file's name; pass "
                         f"to={named!r}, or a path ending {FORMATS[to]}")
    if not os.path.isdir(os.path.dirname(os.path.abspath(path))):
        raise ValueError(f"cannot export to {path}: its folder does not exist")
    module = policy_module(agent).eval()
    inputs = _inputs(module, agent, example)
    name = f"exporting {type(agent).__name__}"
    try:
        run = (_write_onnx if to == "onnx" else _write_torchscript)(module, inputs[0], path,
                                                                    name)
        _check_same(module, run, inputs, name)
    except ValueError:
        if os.path.isfile(path):  # no file that acts otherwise than the agent
            os.remove(path)
        raise
    return path


def _write_torchscript(module: torch.nn.Module, example: tuple, path: str, name: str) -> Any:
    """Trace ``module`` into ``path``; return a function that runs the file."""
    try:
        with torch.no_grad(), warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", torch.jit.TracerWarning)
            traced = torch.jit.trace(module, example, check_trace=False)
    except Exception as exc:
        raise ValueError(f"{name}: torch.jit.trace of its forward() failed "
                         f"({type(exc).__name__}: {exc}); write forward() with torch "
                         f"operations on tensors only") from exc
    frozen = [w for w in caught if issubclass(w.category, torch.jit.TracerWarning)]
    if frozen:  # a tensor made a Python value (control flow, .item()): the file may differ
        raise _frozen(name, f" ({str(frozen[0].message).partition('.')[0]})")
    torch.jit.save(traced, path)
    loaded = torch.jit.load(path)
    return torch.no_grad()(lambda given: loaded(*given))


def _write_onnx(module: torch.nn.Module, example: tuple, path: str, name: str) -> Any:
    """Export ``module`` to ``path`` as ONNX; return a function that runs the file."""
    from .extras import require
    require("onnx", "export")
    require("onnxscript", "export")
    ort = require("onnxruntime", "export")
    names = list(inspect.signature(module.forward).parameters)[:len(example)]
    output = "actions" if isinstance(module, _Policy) else "output"
    shapes = [{0: torch.export.Dim.AUTO} if x.dim() else {} for x in example]
    quiet = logging.getLogger("torch")  # its exporter's notes and graph dumps: not the
    level = quiet.level  # user's ("torchvision is not installed", a failure's graphs)
    quiet.setLevel(logging.CRITICAL)
    try:
        with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()):
            warnings.filterwarnings("ignore", ".*LeafSpec", FutureWarning)  # torch's own
            torch.onnx.export(module, example, path, input_names=names,
                              output_names=[output], dynamo=True,
                              dynamic_shapes=tuple(shapes), verbose=False,
                              external_data=False)  # one file, no empty PATH.data
    except Exception as exc:
        first = re.sub(r"\x1b\[[0-9;]*m", "", (str(exc).strip().splitlines() or [""])[0])
        raise ValueError(f"{name}: torch.onnx.export of its forward() failed "
                         f"({type(exc).__name__}: {first}); write forward() with torch "
                         f"operations on tensors only") from exc
    finally:
        quiet.setLevel(level)
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    feeds = [i.name for i in session.get_inputs()]
    return lambda given: session.run(None, {n: x.numpy() for n, x in zip(feeds, given)})
