"""The Agent base class: weights as dicts and vectors, jitter, clone."""
import sys

import numpy as np
import pytest
import torch

import es_search
from es_search.problems.blog import BlogAgent

from agents import Quadratic


def test_get_weights_are_independent_copies():
    agent = Quadratic(3)
    weights = agent.get_weights()
    weights["w"].add_(1.0)
    assert torch.equal(agent.w, torch.zeros(3))


def test_get_weights_ignores_requires_grad_and_skips_integer_params():
    agent = BlogAgent(work=0)
    assert list(agent.get_weights()) == ["fc1.weight"]  # the blog evolves fc1.weight only
    net = torch.nn.Linear(2, 2)
    net.weight.requires_grad = False

    class A(es_search.Agent):
        def __init__(self):
            super().__init__()
            self.net = net
            self.count = torch.nn.Parameter(torch.zeros(1, dtype=torch.int64), requires_grad=False)
    assert sorted(A().get_weights()) == ["net.bias", "net.weight"]


def test_set_weights_accepts_a_subset_and_buffers():
    agent = BlogAgent(work=0)
    bias = agent.fc1.bias.clone()
    agent.set_weights({"fc1.weight": [[4.0, 5.0, 6.0]]})
    assert agent.fc1.weight.tolist() == [[4.0, 5.0, 6.0]]
    assert torch.equal(agent.fc1.bias, bias)


def test_set_weights_rejects_unknown_names_and_bad_shapes():
    agent = Quadratic(3)
    with pytest.raises(KeyError, match="no weight named 'v'"):
        agent.set_weights({"v": torch.zeros(3)})
    with pytest.raises(ValueError, match=r"shape \(3,\), got \(4,\)"):
        agent.set_weights({"w": torch.zeros(4)})
    with pytest.raises(TypeError, match="dict"):
        agent.set_weights([1, 2, 3])
    with pytest.raises(TypeError, match=r"not str \(a saved file: agent.set_weights\("
                                        r"torch.load\(path\)\)\)"):
        agent.set_weights("runs/a/best_weights.pt")


def test_jitter_is_gaussian_with_sigma_and_in_place():
    agent = Quadratic(20000)
    torch.manual_seed(0)
    agent.jitter_weights(0.5)
    assert abs(agent.w.std().item() - 0.5) < 0.02
    assert abs(agent.w.mean().item()) < 0.02


def test_blog_jitter_takes_steps_of_minus_one_zero_one():
    agent = BlogAgent(work=0)
    torch.manual_seed(1)
    before = agent.fc1.weight.clone()
    agent.jitter_weights(1.0)
    steps = set((agent.fc1.weight - before).flatten().tolist())
    assert steps <= {-1.0, 0.0, 1.0}


def test_flat_round_trip_is_exact():
    agent = Quadratic(5)
    agent.set_flat(np.arange(5) / 3)
    assert np.array_equal(agent.get_flat(), np.float32(np.arange(5) / 3).astype(np.float64))
    with pytest.raises(ValueError, match="evolves 5 values"):
        agent.set_flat(np.zeros(4))


def test_score_must_be_implemented():
    class Bare(es_search.Agent):
        pass
    with pytest.raises(NotImplementedError, match="Bare must implement score"):
        Bare().score()


class PostAgent(es_search.Agent):
    """The blog post's Agent class as the post wrote it, on es_search.Agent instead of
    nn.Module (its dummy loop shortened)."""

    def __init__(self, w):
        super().__init__()
        self.fc1 = torch.nn.Linear(3, 1)
        self.fc1.weight.requires_grad = False
        self.set_weights({"fc1.weight": torch.tensor([w], dtype=torch.float32)})

    def forward(self, x):
        return torch.sum(self.fc1.weights)

    def score(self):
        for i in range(100):
            i**i
        return self.fc1.weight.sum().item()

    def get_weights(self, copy=False):
        if copy:
            return {"fc1.weight": self.fc1.weight}
        else:
            return {"fc1.weight": self.fc1.weight.clone()}

    def set_weights(self, w):
        self.load_state_dict(w, strict=False)

    def jitter_weights(self, inplace=False):
        w = {"fc1.weight": self.fc1.weight if inplace else self.fc1.weight.clone()}
        step = torch.randint(3, (3,), dtype=torch.float32) - 1.0
        w["fc1.weight"].add_(step)
        if not inplace:
            return w


def test_the_blog_posts_own_agent_class_runs_unchanged():
    import cloudpickle
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    try:
        runs = [es_search.run(PostAgent([1, 1, 1]), generations=8, population=6, n_jobs=n_jobs,
                              seed=4, progress=False, sequential_fallback=False)
                for n_jobs in (1, 2)]
        scores = es_search.evaluate(PostAgent([1, 1, 1]), [
            {"fc1.weight": torch.full((1, 3), float(k))} for k in range(1, 7)], n_jobs=2)
    finally:
        cloudpickle.unregister_pickle_by_value(sys.modules[__name__])
    assert scores == [3.0, 6.0, 9.0, 12.0, 15.0, 18.0]  # the post's output
    assert runs[0].best_score == runs[1].best_score > 3.0  # its +-1 steps climbed
    assert [r["scores"] for r in runs[0].history] == [r["scores"] for r in runs[1].history]
    weights = runs[0].best_weights["fc1.weight"]
    assert torch.equal(weights, weights.round())  # whole steps, as the post takes them
