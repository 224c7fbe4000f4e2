"""The Agent base class: weights as dicts and vectors, jitter, clone."""
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
