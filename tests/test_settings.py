"""Settings are checked once, at the call, before any work (es_search.settings)."""
from __future__ import annotations

import math
import uuid

import cloudpickle
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import es_search
from es_search.errors import SettingError, setting_message

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
    error = info.value  # what was wrong, as fields, and the setting named in the message
    assert isinstance(error, SettingError) and error.setting == which and error.value is value
    assert str(error).startswith(which)


def test_resume_needs_out_and_timeout_needs_workers():
    with pytest.raises(ValueError, match="pass out="):
        es_search.run(agents.Vec(), generations=1, resume=True, n_jobs=1)
    with pytest.raises(ValueError, match=r"task_timeout=1.0 needs worker processes, not n_jobs=1"):
        es_search.run(agents.Vec(), generations=1, task_timeout=1.0, n_jobs=1)


def test_a_setting_error_carries_its_fields_and_renders_each_side():
    with pytest.raises(SettingError) as info:
        es_search.run(agents.Vec(), generations=1, n_jobs=0)
    error = info.value
    assert (error.setting, error.value) == ("n_jobs", 0)
    assert "other than 0" in error.rule and "{n_jobs=-1}" in error.fix
    assert str(error).startswith("n_jobs must be an integer other than 0")
    assert "use n_jobs=-1 for all cores" in str(error)
    shouted = setting_message(error, lambda name, value=None: name.upper() + (
        "" if value is None else f" := {value}"))
    assert shouted.startswith("N_JOBS must be") and "use N_JOBS := -1 for all" in shouted
    assert isinstance(error, ValueError) and isinstance(error, TypeError)
    again = cloudpickle.loads(cloudpickle.dumps(error))  # e.g. raised in a worker
    assert str(again) == str(error) and again.setting == "n_jobs"
    with pytest.raises(SettingError) as info:  # two settings that conflict
        es_search.run(agents.Vec(), generations=1, resume=True, overwrite=True,
                      out="x", n_jobs=1)
    assert (info.value.setting, info.value.value, info.value.got) == ("resume", True, False)
    assert str(info.value) == ("resume=True continues the run in out, overwrite=True "
                               "replaces it: pass one of them")
