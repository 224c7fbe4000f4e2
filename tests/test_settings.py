"""Settings are checked once, at the call, before any work (es_search.settings)."""
from __future__ import annotations

import math
import uuid

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import es_search

import agents


SEED = 11
KW = dict(population=4, sigma=0.3, seed=SEED, progress=False)


# ----------------------------------------------------------------- argument validation
class Counting(agents.Vec):
    calls = 0

    def score(self, **kwargs):
        Counting.calls += 1
        return 0.0


bad_int = st.one_of(st.integers(max_value=0), st.floats(allow_nan=True), st.text(max_size=3),
                    st.booleans(), st.none())
bad_sigma = st.one_of(st.floats(max_value=0.0), st.just(math.nan), st.just(math.inf),
                      st.text(max_size=3), st.booleans())
bad_n_jobs = st.one_of(st.just(0), st.floats(), st.text(max_size=3), st.booleans())


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(which=st.sampled_from(["generations", "population", "sigma", "n_jobs", "seed",
                              "on_error", "max_retries", "task_timeout", "resume"]),
       data=st.data())
def test_bad_arguments_fail_at_the_call_before_any_work(tmp_path, which, data):
    value = data.draw({
        "generations": bad_int, "population": bad_int.filter(lambda v: v is not None),
        "sigma": bad_sigma,
        "n_jobs": bad_n_jobs, "seed": st.one_of(st.integers(max_value=-1), st.text()),
        "on_error": st.text().filter(lambda s: s not in ("raise", "worst")),
        "max_retries": st.one_of(st.integers(max_value=-1), st.floats()),
        "task_timeout": bad_sigma, "resume": st.one_of(st.integers(), st.text())}[which])
    out = tmp_path / uuid.uuid4().hex
    kwargs = dict(generations=2, population=3, sigma=0.1, n_jobs=1, seed=0,
                  progress=False, out=out)
    kwargs[which] = value
    if which == "task_timeout":
        kwargs["n_jobs"] = 2
    Counting.calls = 0
    with pytest.raises((TypeError, ValueError)) as info:
        es_search.run(Counting(), **kwargs)
    assert Counting.calls == 0 and not out.exists()
    assert str(info.value)


def test_resume_needs_out_and_timeout_needs_workers():
    with pytest.raises(ValueError, match="pass out="):
        es_search.run(agents.Vec(), generations=1, resume=True, n_jobs=1)
    with pytest.raises(ValueError, match="task_timeout needs worker processes"):
        es_search.run(agents.Vec(), generations=1, task_timeout=1.0, n_jobs=1)
