"""es_search.evaluate(): score given weights in parallel, in input order."""
import os
import subprocess
import sys

import pytest
import torch

import es_search
from es_search.problems.blog import BlogAgent

from agents import CountsUnpickling, EchoKwargs, SeedProbe, TakesData

BLOG_WEIGHTS = [{"fc1.weight": torch.tensor([[k, k, k]], dtype=torch.float32)}
                for k in range(1, 7)]


@pytest.mark.parametrize("n_jobs", [1, 2])
def test_the_blog_example_in_one_call(n_jobs):
    scores = es_search.evaluate(BlogAgent(work=50), BLOG_WEIGHTS, n_jobs=n_jobs,
                                score_kwargs={"b": 45, "c": 33})
    assert scores == [3.0, 6.0, 9.0, 12.0, 15.0, 18.0]


def test_score_kwargs_are_forwarded_in_workers():
    weights = [{"w": torch.tensor([float(k)])} for k in range(5)]
    scores = es_search.evaluate(EchoKwargs(), weights, n_jobs=2, score_kwargs={"b": 45, "c": 33})
    assert scores == [78.0 + k for k in range(5)]


def test_score_kwargs_cross_to_each_worker_once_per_run(tmp_path):
    """A data set passed as a keyword is sent like the agent's skeleton, once per run,
    not with every chunk of every generation (50 MB of it once cost 270 ms a
    generation on 2 workers)."""
    result = es_search.run(TakesData(), generations=5, population=8, n_jobs=2, seed=0,
                           score_kwargs={"data": CountsUnpickling(tmp_path)},
                           sequential_fallback=False, progress=False)
    assert result.evaluations > 40
    here = str(os.getpid())
    in_workers = [p.name for p in tmp_path.iterdir() if p.name.split("-")[0] != here]
    assert 1 <= len(in_workers) <= 2, in_workers  # once in each worker at most


def test_evaluate_does_not_modify_the_agent():
    agent = BlogAgent(work=0)
    es_search.evaluate(agent, BLOG_WEIGHTS, n_jobs=1)
    assert agent.fc1.weight.tolist() == [[1.0, 1.0, 1.0]]


@pytest.mark.parametrize("n, n_jobs", [(3, 1), (4, 2), (24, 1), (24, 2)])
def test_each_task_gets_its_documented_seed(n, n_jobs):
    # 4 tasks or more: their seeds computed at once (seeding.task_seeds)
    scores = es_search.evaluate(SeedProbe(), [{}] * n, n_jobs=n_jobs, seed=7)
    assert scores == [es_search.task_seed(7, 0, i) % 1000003 for i in range(n)]


def test_task_seed_names_a_bad_argument_and_takes_numpy_integers():
    import numpy as np
    assert es_search.task_seed(np.int64(3), np.int32(-1), np.uint8(2)) == \
        es_search.task_seed(3, -1, 2)
    for args, error, match in (
            (("0", 0, 0), TypeError, "seed must be an integer >= 0 \\(the run's seed\\), "
                                     "got '0'"),
            ((0, -2, 0), ValueError, "generation must be an integer >= -1 \\(-1 is the "
                                     "starting agent's evaluation\\), got -2"),
            ((0, 0, -1), ValueError, "index must be an integer >= 0"),
            ((0, 1.0, 0), TypeError, "generation must be an integer >= -1 .*got 1.0"),
            ((0, 0, True), TypeError, "index must be an integer >= 0 .*got True")):
        with pytest.raises(error, match=match):
            es_search.task_seed(*args)


def test_bad_weights_fail_before_scoring():
    with pytest.raises(KeyError, match="no weight named 'fc2.weight'"):
        es_search.evaluate(BlogAgent(work=0), [{"fc2.weight": torch.zeros(1, 3)}])
    with pytest.raises(TypeError, match=r"weights\[1\] must be a dict"):
        es_search.evaluate(BlogAgent(work=0), [{}, [1, 2, 3]])
    one = BlogAgent(work=0).get_weights()
    for bad in (one, None):  # one dict, not a list of them; nothing
        with pytest.raises(TypeError, match=r"weights must be a list of weight dicts, one "
                                            r"per candidate \(for one agent's: \[weights\]\)"):
            es_search.evaluate(BlogAgent(work=0), bad)


class Scaled(es_search.Agent):
    """An evolved x and a buffer the weights dicts may set: -|x|^2 * scale."""

    def __init__(self):
        super().__init__()
        self.x = torch.nn.Parameter(torch.zeros(2))
        self.register_buffer("scale", torch.ones(1))

    def score(self):
        return -float((self.x ** 2).sum() * self.scale)


class ScaledBatched(Scaled):
    score_batch_size = 32

    def score_batch(self, params, seeds):
        return (-(params["x"] ** 2).sum(-1) * self.scale).tolist()


@pytest.mark.parametrize("cls", [Scaled, ScaledBatched])
@pytest.mark.parametrize("n_jobs", [1, 2])
def test_what_a_weights_dict_sets_beyond_evolved_values_stays_with_its_candidate(cls,
                                                                               n_jobs):
    """A buffer set by one dict does not leak into the next candidate (a worker keeps
    its agent), nor into the next call; with score_batch each row gets its own."""
    one = {"x": torch.ones(2)}
    scaled = [{**one, "scale": torch.tensor([float(k)])} for k in (5, 1, 2, 3)]
    assert es_search.evaluate(cls(), [scaled[0], one], n_jobs=n_jobs) == [-10.0, -2.0]
    with es_search.Evaluator(cls(), n_jobs=n_jobs, sequential_fallback=False) as evaluator:
        assert evaluator.evaluate([scaled[0], one]) == [-10.0, -2.0]
        assert evaluator.evaluate([one, one], 1) == [-2.0, -2.0]  # the agent's own 1 again
        assert evaluator.evaluate(scaled[1:], 2) == [-2.0, -4.0, -6.0]


class TwoParts(es_search.Agent):
    """Two evolved tensors, a weights dict may set either: sum(a) + 10 sum(b)."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Parameter(torch.zeros(2))
        self.b = torch.nn.Parameter(torch.zeros(2))

    def score(self):
        return float(self.a.sum() + 10 * self.b.sum())


@pytest.mark.parametrize("n_jobs", [1, 2])
def test_each_call_loads_its_dicts_over_the_agents_own_weights(n_jobs):
    """Scored in this process (n_jobs=1), the last candidate of a call stays in the
    evaluator's agent: it is not the next call's centre (the workers' is the agent's)."""
    with es_search.Evaluator(TwoParts(), n_jobs=n_jobs, sequential_fallback=False) as ev:
        assert ev.evaluate([{"a": torch.ones(2)}, {"b": torch.ones(2)}]) == [2.0, 20.0]
        assert ev.evaluate([{"a": torch.ones(2)}], 1) == [2.0]  # b: the agent's zeros


def test_empty_input_gives_empty_output():
    assert es_search.evaluate(BlogAgent(work=0), []) == []


@pytest.mark.parametrize("n_jobs", [1, 2])
def test_each_call_of_an_evaluator_runs_under_its_generation(n_jobs):
    """A loop of your own: one Evaluator, one call per generation; task i of a call runs
    under task_seed(seed, generation, i), as evaluate(generation=) runs it."""
    with es_search.Evaluator(SeedProbe(), n_jobs=n_jobs, seed=7,
                             sequential_fallback=False) as evaluator:
        calls = [evaluator.evaluate([{}] * 6, generation) for generation in range(3)]
    for generation, scores in enumerate(calls):
        expected = [es_search.task_seed(7, generation, i) % 1000003 for i in range(6)]
        assert scores == expected
        assert es_search.evaluate(SeedProbe(), [{}] * 6, n_jobs=n_jobs, seed=7,
                                  generation=generation) == expected
    assert calls[0] != calls[1] != calls[2]  # fresh streams each generation


def test_an_evaluator_keeps_its_workers_between_calls(tmp_path):
    """The workers start once and unpickle the score_kwargs once, however many calls."""
    weights = [{"w": torch.full((10,), float(k))} for k in range(8)]
    with es_search.Evaluator(TakesData(), n_jobs=2, sequential_fallback=False,
                             score_kwargs={"data": CountsUnpickling(tmp_path)}) as evaluator:
        pool = evaluator.pool
        scores = [evaluator.evaluate(weights, generation) for generation in range(5)]
        assert evaluator.pool is pool
    assert scores[0] == scores[4] == [-10.0 * (k - 3.0) ** 2 for k in range(8)]
    here = str(os.getpid())
    in_workers = [p.name for p in tmp_path.iterdir() if p.name.split("-")[0] != here]
    assert 1 <= len(in_workers) <= 2, in_workers  # once in each worker at most


def test_an_evaluator_refuses_bad_weights_and_generations_before_scoring():
    with es_search.Evaluator(BlogAgent(work=0), n_jobs=1) as evaluator:
        with pytest.raises(KeyError, match="no weight named 'fc2.weight'"):
            evaluator.evaluate([{"fc1.weight": torch.ones(1, 3)},
                                {"fc2.weight": torch.zeros(1, 3)}])
        with pytest.raises(TypeError, match=r"weights must be a list of weight dicts"):
            evaluator.evaluate({"fc1.weight": torch.ones(1, 3)})
        with pytest.raises(ValueError, match=r"generation must be an integer >= 0 \(task i "
                                             r"of a call runs under task_seed\(seed, "
                                             r"generation, i\)\)"):
            evaluator.evaluate([{}], generation=-1)
        assert evaluator.evaluate([{"fc1.weight": torch.ones(1, 3)}], 1) == [3.0]
    with pytest.raises(TypeError, match="generation must be an integer"):
        es_search.evaluate(BlogAgent(work=0), [{}], generation=1.5)


@pytest.mark.parametrize("n_jobs", [1, 2])
def test_an_evaluator_scores_only_while_open(n_jobs):
    """Not entered (or closed), it would score in this process, silently: refused."""
    weights = [{"fc1.weight": torch.ones(1, 3)}]
    evaluator = es_search.Evaluator(BlogAgent(work=0), n_jobs=n_jobs)
    with pytest.raises(RuntimeError, match="this Evaluator is not open: use it as a "
                                           "context manager, `with es_search.Evaluator"):
        evaluator.evaluate(weights)
    with evaluator:
        assert evaluator.evaluate(weights) == [3.0]
    with pytest.raises(RuntimeError, match="not open"):
        evaluator.evaluate(weights)


def test_an_evaluator_under_on_error_worst_warns_once_with_the_traceback():
    import warnings
    from agents import Raises
    from es_search.seeding import task_seed
    agent = Raises({task_seed(0, 0, 1), task_seed(0, 1, 0)})
    weights = [{"x": torch.zeros(4, dtype=torch.float64)}] * 3
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with es_search.Evaluator(agent, n_jobs=1, on_error="worst") as evaluator:
            scores, again = evaluator.evaluate(weights, 0), evaluator.evaluate(weights, 1)
    assert scores[1] == again[0] == float("-inf") and scores[0] > float("-inf")
    said = [str(w.message) for w in caught if "on_error='worst'" in str(w.message)]
    assert len(said) == 1 and "raised on 1 candidate(s) of generation 0 (the first: " \
        "candidate 1" in said[0] and "ValueError: boom" in said[0]


@pytest.mark.slow
def test_the_evaluate_calls_benchmark_runs_and_checks_its_scores():
    """benchmarks/evaluate_calls.py times both kinds of call on the same weights and
    raises if their scores differ."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    done = subprocess.run([sys.executable, os.path.join(root, "benchmarks", "evaluate_calls.py"),
                           "--calls", "2", "--candidates", "4", "--n-jobs", "2"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "es_search.evaluate()" in done.stdout and "ratio" in done.stdout


def test_an_evaluator_on_dask_gives_the_same_scores_call_after_call(cluster, tmp_path):
    weights = [{"w": torch.full((10,), float(k))} for k in range(6)]
    with es_search.Evaluator(SeedProbe(), backend="dask", seed=7,
                             sequential_fallback=False) as evaluator:
        calls = [evaluator.evaluate([{}] * 5, generation) for generation in range(3)]
    for generation, scores in enumerate(calls):
        assert scores == [es_search.task_seed(7, generation, i) % 1000003 for i in range(5)]
    with es_search.Evaluator(TakesData(), backend="dask", sequential_fallback=False,
                             score_kwargs={"data": CountsUnpickling(tmp_path)}) as ev:
        assert ev.evaluate(weights, 1) == [-10.0 * (k - 3.0) ** 2 for k in range(6)]
