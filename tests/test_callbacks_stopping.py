"""Stopping rules (StopAtScore, EarlyStopping, MaxTime) through the callback protocol."""
import math
import pickle

import pytest

from es_search.callbacks import EarlyStopping, MaxTime, RunInfo, StopAtScore


def records(values, field="best_score"):
    return [{"generation": g, "best_score": v, "mean_score": v, field: v}
            for g, v in enumerate(values)]


def stop_generation(rule, history, done=0):
    """The generation after which ``rule`` stops a run whose first ``done`` generations
    ran before (a resume), or None."""
    rule.on_start(RunInfo(config={}, out=None, generations=len(history),
                          first_generation=done, history=history[:done]))
    for record in history[done:]:
        if rule.on_generation(record):
            return record["generation"]
    return None


def test_stop_at_score():
    history = records([-3.0, float("nan"), -1.0, 0.5, 2.0])
    rule = StopAtScore(0.5)
    assert stop_generation(rule, history) == 3
    assert rule.reason == "best_score 0.5 reached the target 0.5 at generation 3"
    assert stop_generation(StopAtScore(10), history) is None
    assert stop_generation(rule, history, done=4) == 4  # a resume past it stops at once
    assert rule.reason.endswith("generation 4")


@pytest.mark.parametrize("patience, min_delta, expected", [
    (1, 0, 2),     # 1.0 -> 2.0 improves, 2.0 does not: stop after generation 2
    (2, 0, 3),
    (3, 0, None),  # 2.5 at generation 4 improves in time
    (2, 0.6, 3),   # 2.0 -> 2.5 is not more than 0.6 over 2.0
    (1, 1.0, 1),   # 1.0 -> 2.0 is not more than 1.0
])
def test_early_stopping(patience, min_delta, expected):
    history = records([1.0, 2.0, 2.0, 2.0, 2.5, 2.5])
    assert stop_generation(EarlyStopping(patience, min_delta), history) == expected


def test_early_stopping_small_gains_do_not_add_up():
    history = records([1.0, 1.03, 1.06, 1.09, 1.2])
    rule = EarlyStopping(patience=3, min_delta=0.1)
    assert stop_generation(rule, history) == 3
    assert rule.best == 1.0 and rule.best_generation == 0
    assert rule.reason == ("best_score has not improved by more than 0.1 for 3 "
                           "generations (best 1 at generation 0; stopped after "
                           "generation 3)")


def test_early_stopping_nan_and_mean_score():
    nan = float("nan")
    assert stop_generation(EarlyStopping(2), records([nan, nan, 1.0, 1.0])) == 1
    history = [{"generation": g, "best_score": 5.0, "mean_score": m}
               for g, m in enumerate([1.0, 3.0, 2.0, 2.5, 2.0])]
    assert stop_generation(EarlyStopping(2), history) == 2
    assert stop_generation(EarlyStopping(3, monitor="mean_score"), history) == 4


@pytest.mark.parametrize("done", range(0, 7))
def test_early_stopping_rebuilt_from_the_history_on_a_resume(done):
    """Resumed after ``done`` generations, the rule stops where the whole run does."""
    history = records([1.0, 2.0, 2.0, 3.0, 3.0, 3.0, 3.0, 4.0, 4.0, 4.0])
    uninterrupted = stop_generation(EarlyStopping(3), history)
    assert uninterrupted == 6
    assert stop_generation(EarlyStopping(3), history, done=done) == uninterrupted
    rule = EarlyStopping(3)
    stop_generation(rule, history)
    assert stop_generation(rule, history) == uninterrupted  # reused: starts afresh


def test_max_time_counts_from_on_start(monkeypatch):
    clock = [100.0]
    monkeypatch.setattr("es_search.callbacks.stopping.time.monotonic", lambda: clock[0])
    rule = MaxTime(2.5)
    rule.on_start(RunInfo(config={}, out=None, generations=10))
    stops = []
    for record in records(range(3)):
        clock[0] += 1.0
        stops.append(rule.on_generation(record))
    assert stops == [False, False, True]
    assert rule.reason == ("3 s elapsed, the time budget of 2.5 s is spent (after "
                           "generation 2)")
    rule.on_start(RunInfo(config={}, out=None, generations=10))  # a resume: a new budget
    clock[0] += 1.0
    assert not rule.on_generation(records([0.0])[0])


@pytest.mark.parametrize("make, error, message", [
    (lambda: StopAtScore("1"), TypeError, "StopAtScore target must be a finite number"),
    (lambda: StopAtScore(True), TypeError, "StopAtScore target must be a finite number"),
    (lambda: StopAtScore(math.nan), ValueError, "StopAtScore target must be a finite"),
    (lambda: StopAtScore(math.inf), ValueError, "StopAtScore target must be a finite"),
    (lambda: EarlyStopping(0), ValueError, "patience must be an integer >= 1"),
    (lambda: EarlyStopping(2.5), TypeError, "patience must be an integer >= 1"),
    (lambda: EarlyStopping(3, min_delta=-0.1), ValueError, "min_delta must be a finite number >="),
    (lambda: EarlyStopping(3, min_delta=math.nan), ValueError, "min_delta must be a fin"),
    (lambda: EarlyStopping(3, monitor="loss"), ValueError, "monitor must be one of"),
    (lambda: MaxTime(0), ValueError, "MaxTime seconds must be a positive finite number"),
    (lambda: MaxTime(-1), ValueError, "MaxTime seconds must be a positive finite number"),
    (lambda: MaxTime(math.inf), ValueError, "MaxTime seconds must be a positive finite"),
    (lambda: MaxTime("60"), TypeError, "MaxTime seconds must be a positive finite"),
])
def test_bad_settings_fail_at_construction(make, error, message):
    with pytest.raises(error, match=message):
        make()


def test_rules_pickle_and_repr():
    for rule in (StopAtScore(1.5), EarlyStopping(4, 0.01, "mean_score"), MaxTime(60)):
        copy = pickle.loads(pickle.dumps(rule))
        assert repr(copy) == repr(rule)
        assert eval(repr(rule)).__dict__.keys() == rule.__dict__.keys()
