"""Agents that cannot be copied or sent to workers are named before any work."""
from __future__ import annotations

import cloudpickle
import pytest

import es_search

import reliability_agents as agents

cloudpickle.register_pickle_by_value(agents)  # workers need not import tests/

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
