"""Exported policies (es_search.export, es-search export) run where es_search cannot be
imported and act as the agents act: the same actions on 1,000 recorded observations."""
from __future__ import annotations

import subprocess
import sys
import threading

import numpy as np
import pytest
import torch

import es_search
from es_search.batched import own_params
from es_search.cli import main
from es_search.export import export, policy_module, uniforms
from es_search.problems import GymPolicy, load_problem
from es_search.spec import load_run

#: a process that cannot import es_search (and checks that it cannot), then acts with
#: both exported files on the recorded observations
RUNNER = """
import sys

class NoEsSearch:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "es_search":
            raise ImportError("es_search is not installed here")

sys.meta_path.insert(0, NoEsSearch())
try:
    import es_search
except ImportError:
    pass
else:
    raise SystemExit("es_search was imported")
import numpy as np, onnxruntime, torch

for folder in sys.argv[1:]:
    obs = np.load(folder + "/obs.npy")
    seed = np.load(folder + "/seed.npy")
    feeds = [obs] + ([seed] if seed.size else [])  # a sampling policy takes a seed
    policy = torch.jit.load(folder + "/policy.pt")
    with torch.no_grad():
        np.save(folder + "/torchscript.npy", policy(*map(torch.from_numpy, feeds)).numpy())
    session = onnxruntime.InferenceSession(folder + "/policy.onnx")
    names = [i.name for i in session.get_inputs()]
    np.save(folder + "/onnx.npy", session.run(None, dict(zip(names, feeds)))[0])
    with open(folder + "/onnx_names", "w") as f:  # what a user feeds and fetches by name
        f.write(" ".join(names + [o.name for o in session.get_outputs()]))
"""
SEED = 123  # the seed a sampling policy is given


def recorded(env_id: str, n: int = 1000) -> np.ndarray:
    """``n`` observations of random-action episodes of ``env_id``, as it gives them
    (float32 for CartPole, float64 for Hopper: what an exported policy takes)."""
    import gymnasium as gym
    env = gym.make(env_id)
    env.action_space.seed(0)
    obs, _ = env.reset(seed=0)
    seen = []
    while len(seen) < n:
        seen.append(np.asarray(obs).reshape(-1))
        obs, _, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated or truncated:
            obs, _ = env.reset()
    env.close()
    return np.array(seen)


class Draws:
    """An rng whose ``random()`` gives the exported policy's uniforms, in turn."""

    def __init__(self, values):
        self.values = iter(values)

    def random(self):
        return next(self.values)


def gym_actions(agent: GymPolicy, obs: np.ndarray, u: np.ndarray) -> np.ndarray:
    act = agent.actor(agent._numpy_layers(), Draws(u))
    return np.array([act(agent.flat_observation(x)) for x in obs])


def batched_actions(agent, obs: np.ndarray, u: np.ndarray) -> np.ndarray:
    logits = agent.forward_numpy(agent.stacked_layers(own_params(agent)),
                                 obs.astype(np.float64))
    return agent.actions(logits, None if agent.greedy or not agent.discrete else u)


class Mine(es_search.Agent):
    """A user's own agent: an nn.Module policy with forward()."""

    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(11, 16), torch.nn.ReLU(),
                                       torch.nn.Linear(16, 3))

    def forward(self, obs):
        return torch.softmax(self.net(obs), dim=-1)

    def score(self):
        return 0.0


def _cartpole(greedy):
    return load_problem("cartpole")(greedy=greedy), "CartPole-v1"


CASES = {
    "cartpole": lambda: _cartpole(False),  # the built-in: NumPy, batched, sampling
    "cartpole-greedy": lambda: _cartpole(True),
    "pendulum": lambda: (load_problem("pendulum")(), "Pendulum-v1"),
    "hopper": lambda: (load_problem("hopper")(), "Hopper-v5"),  # GymPolicy, running stats
    "halfcheetah": lambda: (load_problem("halfcheetah")(), "HalfCheetah-v5"),  # raw actions
    "acrobot-mlp": lambda: (GymPolicy("Acrobot-v1", hidden=(8, 8), normalize="fixed",
                                      norm_episodes=1), "Acrobot-v1"),
    "own-module": lambda: (Mine(), "Hopper-v5"),
}


def exported_case(case: str, folder) -> np.ndarray:
    """Export the case's agent (random weights; statistics far from (0, 1)) to
    ``folder`` in both formats with its recorded observations; its own actions."""
    agent, env_id = CASES[case]()
    rng = np.random.default_rng(0)
    agent.set_flat(rng.normal(0, 0.5, agent.num_evolved()))
    obs = recorded(env_id)
    if getattr(agent, "normalize", "off") != "off":
        agent.set_weights({"obs_mean": rng.normal(0, 1, obs.shape[1]),
                           "obs_std": rng.uniform(0.2, 3, obs.shape[1])})
    sampled = getattr(agent, "discrete", False) and not agent.greedy
    u = uniforms(torch.tensor(SEED), len(obs)).numpy()
    example = None
    if isinstance(agent, Mine):
        obs, example = obs.astype(np.float32), torch.zeros(8, 11)
        with torch.no_grad():
            expected = agent(torch.from_numpy(obs)).numpy()
    elif isinstance(agent, GymPolicy):
        expected = gym_actions(agent, obs, u)
    else:
        expected = batched_actions(agent, obs, u)
    if sampled:  # not one action everywhere: the draws and observations matter
        assert len(np.unique(expected)) > 1
    folder.mkdir()
    export(agent, folder / "policy.pt", example=example)
    export(agent, folder / "policy.onnx", to="onnx", example=example)
    assert sorted(p.name for p in folder.iterdir()) == ["policy.onnx", "policy.pt"]  # one each
    np.save(folder / "obs.npy", obs)
    np.save(folder / "seed.npy", np.array(SEED if sampled else [], dtype=np.int64))
    return expected


@pytest.fixture(scope="module")
def acted(tmp_path_factory):
    """Each case's own actions, and its exported files' actions in one process
    that cannot import es_search."""
    root = tmp_path_factory.mktemp("exported")
    expected = {case: exported_case(case, root / case) for case in CASES}
    done = subprocess.run([sys.executable, "-I", "-c", RUNNER]
                          + [str(root / case) for case in CASES],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return {case: (expected[case], {fmt: np.load(root / case / f"{fmt}.npy")
                                    for fmt in ("torchscript", "onnx")},
                   (root / case / "onnx_names").read_text().split()) for case in CASES}


@pytest.mark.slow
@pytest.mark.parametrize("case", list(CASES))
def test_exported_policies_run_without_es_search_and_act_as_the_agent(case, acted):
    expected, got, names = acted[case]
    assert names[:-1] in (["obs"], ["obs", "seed"])  # ONNX's inputs, then its output
    assert names[-1] == ("output" if case == "own-module" else "actions")
    for fmt, actions in got.items():
        assert actions.shape[0] == len(expected) == 1000
        np.testing.assert_allclose(actions.reshape(expected.shape), expected, rtol=0,
                                   atol=1e-5, err_msg=fmt)


def test_uniforms_are_uniform_and_follow_seed_and_row():
    u = uniforms(torch.tensor(5), 100_000).numpy()
    assert 0 < u.min() and u.max() < 1
    assert np.abs(np.histogram(u, bins=10, range=(0, 1))[0] / len(u) - 0.1).max() < 0.005
    firsts = uniforms(torch.arange(-2000, 2000), 1).numpy()  # row 0 of 4000 seeds
    assert np.abs(np.histogram(firsts, bins=4, range=(0, 1))[0] / 4000 - 0.25).max() < 0.03
    assert np.array_equal(uniforms(torch.tensor(5), 3), uniforms(torch.tensor(5), 7)[:3])
    assert not np.array_equal(uniforms(torch.tensor(2 ** 40), 3), uniforms(torch.tensor(0), 3))


def test_a_sampling_policy_draws_its_actions_with_the_softmax_probabilities():
    agent = GymPolicy("Acrobot-v1")
    agent._action_start = -1  # as for gymnasium's Discrete(3, start=-1): -1, 0, 1
    with torch.no_grad():
        agent.layers[-1].bias.copy_(torch.tensor([0.0, 1.0, -1.0]))
    policy = policy_module(agent)
    actions = policy(torch.zeros(60_000, 6, dtype=torch.float64), torch.tensor(9)).numpy()
    assert actions.min() == -1 and actions.max() == 1
    frequencies = np.bincount(actions + 1, minlength=3) / len(actions)
    expected = np.exp([0.0, 1.0, -1.0]) / np.exp([0.0, 1.0, -1.0]).sum()
    assert np.abs(frequencies - expected).max() < 0.01


class NoForward(es_search.Agent):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(4))

    def score(self):
        return float(self.w.sum())


class Branching(NoForward):
    obs_dim = 4

    def forward(self, obs):  # a branch on values: a trace freezes the one it took
        return obs * 2 if float(obs.abs().sum()) > 0 else obs - self.w


class Clipping(NoForward):
    obs_dim = 4

    def forward(self, obs):  # a branch the check's inputs (near 0) all take the same way
        return obs * 2 if float(obs.mean()) < 5 else obs


class EightRows(NoForward):
    obs_dim = 4

    def forward(self, obs):  # takes a batch of 8 rows only
        return obs.reshape(8, 2, 2).sum(-1) + self.w[:2]


@pytest.mark.filterwarnings("ignore::torch.jit.TracerWarning")  # Branching's, expected
@pytest.mark.parametrize("to", ["torchscript", pytest.param("onnx", marks=pytest.mark.slow)])
def test_what_cannot_be_exported_is_refused_saying_why(to, tmp_path, capfd):
    """(ONNX: slow, its failed dynamo export of Branching takes seconds; the fast run
    exports to ONNX in test_the_export_verb_writes_a_run_folders_policy.) The refusal is
    all that is said (torch's exporter wrote its logs and graph dumps to stderr)."""
    with pytest.raises(ValueError, match="defines no forward"):
        export(NoForward(), tmp_path / "a", to=to)
    with pytest.raises(ValueError, match=r"example=torch.zeros\(8, OBS_DIM\)"):
        export(Mine(), tmp_path / "b", to=to)
    capfd.readouterr()
    with pytest.raises(ValueError, match="exporting Branching") as info:
        export(Branching(), tmp_path / "c", to=to)
    assert not (tmp_path / "c").exists()  # no file that acts otherwise
    assert capfd.readouterr().err == "" and "\x1b" not in str(info.value)
    with pytest.raises(ValueError, match=r"may not compute .* \(RuntimeError: shape '\[8, 2"):
        export(EightRows(), tmp_path / "h", to=to)
    assert not (tmp_path / "h").exists()
    with pytest.raises(ValueError, match="to must be one of 'torchscript', 'onnx'"):
        export(Mine(), tmp_path / "d", to="tflite")
    if to == "torchscript":  # the tracer's own warning: the check's inputs may agree
        with pytest.raises(ValueError, match="may not compute .* Python float"):
            export(Clipping(), tmp_path / "e.pt")
    with pytest.raises(ValueError, match="cannot export to .*: its folder does not exist"):
        export(Mine(), tmp_path / "nowhere" / "f", to=to, example=torch.zeros(8, 11))
    other = {"torchscript": "onnx", "onnx": "torchscript"}[to]
    wrong = tmp_path / ("g.onnx" if to == "torchscript" else "g.pt")
    with pytest.raises(ValueError, match=f"a {other} file's name; pass to='{other}'"):
        export(Mine(), wrong, to=to, example=torch.zeros(8, 11))
    assert not wrong.exists()


def test_a_file_that_fails_on_the_check_inputs_is_refused_and_removed(tmp_path, monkeypatch):
    import es_search.export as export_module
    write = export_module._write_torchscript

    def failing_beyond_its_example(module, example, path, name):  # a batch size frozen
        run = write(module, example, path, name)
        return lambda given: run(given) if given[0].shape == example[0].shape else \
            torch.zeros(2, 3).view(5)
    monkeypatch.setattr(export_module, "_write_torchscript", failing_beyond_its_example)
    with pytest.raises(ValueError, match=r"may not compute .* \(RuntimeError: shape '\[5\]'"):
        export(Mine(), tmp_path / "a.pt", example=torch.zeros(8, 11))
    assert not (tmp_path / "a.pt").exists()


def test_the_format_follows_the_file_name_unless_given(tmp_path):
    import zipfile
    export(Mine(), tmp_path / "policy.pt", example=torch.zeros(8, 11))
    export(Mine(), tmp_path / "policy.bin", example=torch.zeros(8, 11))
    assert zipfile.is_zipfile(tmp_path / "policy.pt") and zipfile.is_zipfile(
        tmp_path / "policy.bin")  # TorchScript: a zip archive
    pytest.importorskip("onnxruntime")
    export(Mine(), tmp_path / "policy.onnx", example=torch.zeros(8, 11))
    assert not zipfile.is_zipfile(tmp_path / "policy.onnx")


def test_onnx_without_its_extra_names_it(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # as if not installed
    with pytest.raises(ImportError, match=r"onnxruntime is not installed.*\[export\]"):
        export(Mine(), tmp_path / "policy.onnx", to="onnx", example=torch.zeros(1, 11))


def test_the_export_verb_writes_a_run_folders_policy(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["run", "pendulum", "--generations", "2", "--population", "4", "--n-jobs",
                 "1", "--no-progress", "--no-test", "--out", str(out)]) == 0
    assert main(["export", str(out)]) == 0
    assert main(["export", str(out), "--to", "onnx", "--which", "best",
                 "--out", str(tmp_path / "best.onnx")]) == 0
    printed = capsys.readouterr().out.strip().splitlines()
    assert printed[-2:] == [str(out / "policy.pt"), str(tmp_path / "best.onnx")]
    result = load_run(out)
    obs = recorded("Pendulum-v1", 200)
    policy = torch.jit.load(str(out / "policy.pt"))
    expected = batched_actions(result.chosen_agent(), obs, None)  # default: the answer
    np.testing.assert_allclose(policy(torch.from_numpy(obs)).numpy()[:, 0], expected,
                               rtol=0, atol=1e-5)
    import onnxruntime
    best = onnxruntime.InferenceSession(str(tmp_path / "best.onnx"))
    np.testing.assert_allclose(best.run(["actions"], {"obs": obs})[0][:, 0],
                               batched_actions(result.best_agent(), obs, None), atol=1e-5)
    assert main(["export", str(tmp_path / "nowhere")]) == 2
    assert not (tmp_path / "nowhere").exists()
    from es_search.lock import acquire
    key = acquire(out)  # as a run going on in it holds it (another thread here)
    thread = threading.Thread(target=lambda: codes.append(main(["export", str(out)])))
    codes: list = []
    thread.start()
    thread.join()
    key.close()
    assert codes == [2] and "(export it once the run has ended)" in capsys.readouterr().err
    assert main(["run", "pendulum", "--generations", "3", "--population", "4", "--n-jobs",
                 "1", "--no-progress", "--no-test", "--out", str(out), "--resume"]) == 0
    assert not (out / "policy.pt").exists()  # of the earlier answer: gone as the run went on
