"""Agents that cannot be copied or sent to workers are named before any work."""
from __future__ import annotations

import re

import pytest

import es_search

import agents


SEED = 11
KW = dict(population=4, sigma=0.3, seed=SEED, progress=False)


# ----------------------------------------------------------------- unpicklable agents
@pytest.mark.parametrize("make, attribute", [
    (lambda p: agents.WithLock(), "agent.stuff['cfg'][2].lock (a _thread.lock)"),
    (lambda p: agents.WithGenerator(), "agent.inner.gen (a generator)"),
    (lambda p: agents.WithFile(str(p / "log.txt")), "agent.log (a _io.TextIOWrapper)"),
])
@pytest.mark.parametrize("n_jobs", [1, 2])
def test_unpicklable_agent_is_named_before_any_work(tmp_path, make, attribute, n_jobs):
    with pytest.raises(es_search.UnpicklableAgentError) as info:
        es_search.run(make(tmp_path), generations=2, n_jobs=n_jobs, out=tmp_path / "run",
                      **KW)
    assert attribute in str(info.value)
    assert not (tmp_path / "run").exists()  # refused before anything ran
    with pytest.raises(es_search.UnpicklableAgentError, match=re.escape(attribute)):
        es_search.evaluate(make(tmp_path), [{}], n_jobs=n_jobs)  # its front door too
    with pytest.raises(es_search.UnpicklableAgentError, match=re.escape(attribute)):
        es_search.check_repeatable(make(tmp_path))


# ----------------------------------------------------------------- unpicklable score_kwargs
class TakesRows(agents.Vec):
    def score(self, data) -> float:
        return super().score() + sum(data["rows"])


@pytest.mark.parametrize("n_jobs, out, why", [
    (2, False, "and each worker receives them pickled (n_jobs != 1). "),
    (1, True, "and the run folder saves them (out=). "),
    (2, True, "and each worker receives them pickled (n_jobs != 1) and the run folder "
              "saves them (out=). "),
])
def test_unpicklable_score_kwargs_are_named_before_any_work(tmp_path, n_jobs, out, why):
    kwargs = {"data": {"rows": [1.0, 2.0], "source": (i for i in range(3))}}
    with pytest.raises(TypeError) as info:
        es_search.run(TakesRows(), generations=2, n_jobs=n_jobs,
                      out=tmp_path / "run" if out else None, score_kwargs=kwargs, **KW)
    assert str(info.value).startswith(
        "score_kwargs['data']['source'] (a generator) cannot be pickled (TypeError: cannot "
        "pickle 'generator' object), " + why)
    assert not (tmp_path / "run").exists()  # refused before anything ran


def test_score_kwargs_that_stay_in_this_process_need_not_pickle():
    kwargs = {"data": {"rows": [1.0, 2.0], "source": (i for i in range(3))}}
    result = es_search.run(TakesRows(), generations=2, n_jobs=1, score_kwargs=kwargs,
                           **KW)
    assert result.generations == 2
    with pytest.raises(TypeError, match=r"score_kwargs\['data'\]\['source'\] \(a generator\)"):
        es_search.evaluate(TakesRows(), [{}], n_jobs=2, score_kwargs=kwargs)
    assert es_search.evaluate(TakesRows(), [{}], n_jobs=1, score_kwargs=kwargs)
