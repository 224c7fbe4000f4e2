"""The callback protocol (es_search.callbacks.base): on_start / on_generation / on_end,
plain callables, stopping a run that then resumes as if never stopped."""
import functools

import pytest

import es_search
from es_search.callbacks import Callback
from es_search.seeding import task_seed

from agents import Quadratic, RandomScore

KW = dict(population=3, sigma=0.5, seed=2, n_jobs=1, progress=False)


class Recorder(Callback):
    def __init__(self, stop_at=None):
        self.events, self.stop_at = [], stop_at

    def on_start(self, info):
        self.events.append(("start", info.first_generation, info.generations,
                            len(info.history), info.out))

    def on_generation(self, record):
        self.events.append(("generation", record["generation"]))
        return record["generation"] == self.stop_at

    def on_end(self, result):
        self.events.append(("end", result.generations))


def test_methods_are_called_in_order():
    recorder = Recorder()
    es_search.run(Quadratic(), generations=3, callbacks=[recorder], **KW)
    assert recorder.events == [("start", 0, 3, 0, None), ("generation", 0),
                               ("generation", 1), ("generation", 2), ("end", 3)]


def test_a_plain_callable_and_a_duck_typed_object_work():
    seen = []

    class OnlyEnd:
        def on_end(self, result):
            seen.append(("end", result.generations))

    es_search.run(Quadratic(), generations=2, callbacks=[seen.append, OnlyEnd()], **KW)
    assert [r["generation"] for r in seen[:2]] == [0, 1] and seen[2] == ("end", 2)


def test_a_bad_callback_is_refused_before_any_work():
    with pytest.raises(TypeError, match="callbacks must be callables"):
        es_search.run(Quadratic(), generations=2, callbacks=[42], **KW)
    for value in (3, "abc"):  # not a list at all: named as given
        with pytest.raises(TypeError, match=f"callbacks must be a list of callables .*"
                                            f"got {value!r}"):
            es_search.run(Quadratic(), generations=2, callbacks=value, **KW)
    with pytest.raises(TypeError, match="strategy_options must be a dict of the "
                                        "strategy's own options .*got 'x'"):
        es_search.run(Quadratic(), generations=2, strategy_options="x", **KW)
    for wrong in (lambda: None, lambda record, extra: None):  # must take the record
        with pytest.raises(TypeError, match=r"callbacks\[0\] .* must take one argument"):
            es_search.run(Quadratic(), generations=2, callbacks=[wrong], **KW)
    es_search.run(Quadratic(), generations=2, callbacks=[len, lambda *a, **k: None], **KW)

    def logged(fn):  # a decorator that supplies the second argument
        @functools.wraps(fn)
        def wrapper(record):
            return fn(record, [])
        return wrapper

    @logged
    def with_sink(record, sink):
        sink.append(record)

    es_search.run(Quadratic(), generations=2, callbacks=[with_sink], **KW)


def test_a_misspelled_hook_is_refused_at_the_call():
    from es_search.callbacks import Callback
    seen = []

    class Typo(Callback):
        def on_generaton(self, record):  # never called: the run would ignore it
            seen.append(record)

    class Own(Callback):
        def on_best(self, record):  # a method of its own, named unlike any hook: fine
            pass

    with pytest.raises(TypeError, match=r"callbacks\[0\] \(Typo\) defines on_generaton\(\), "
                                        r"which a run never calls \(did you mean "
                                        r"'on_generation'\?\)"):
        es_search.run(Quadratic(), generations=2, callbacks=[Typo()], **KW)
    es_search.run(Quadratic(), generations=1, callbacks=[Own()], **KW)
    assert not seen


@pytest.mark.parametrize("name", ["CSV", "EarlyStopping", "TensorBoard"])
def test_a_callback_class_instead_of_an_instance_is_refused_at_the_call(name, tmp_path):
    import es_search.callbacks as callbacks
    cls = getattr(callbacks, name)
    with pytest.raises(TypeError, match=rf"callbacks\[1\] is the class {name} itself; pass "
                                        rf"an instance: {name}\(\.\.\.\)"):
        es_search.run(Quadratic(), generations=2, callbacks=[print, cls],
                      out=tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_a_stopped_run_resumes_and_equals_the_uninterrupted_one(tmp_path):
    full = es_search.run(RandomScore(), generations=5, **KW)
    stopper = Recorder(stop_at=1)
    stopped = es_search.run(RandomScore(), generations=5, out=tmp_path,
                            callbacks=[stopper], **KW)
    assert stopped.generations == 2 and stopper.events[-1] == ("end", 2)
    again = Recorder()
    resumed = es_search.run(RandomScore(), generations=5, out=tmp_path, resume=True,
                            callbacks=[again], **KW)
    assert again.events[0] == ("start", 2, 5, 2, tmp_path)

    def strip(result):
        return [{k: v for k, v in r.items() if k != "seconds"} for r in result.history]

    assert strip(resumed) == strip(full) and resumed.best_score == full.best_score


def test_generation_seed_is_shared_by_a_generation_and_none_outside():
    class Probe(es_search.Agent):
        def __init__(self):
            super().__init__()
            import torch
            self.w = torch.nn.Parameter(torch.zeros(1))

        def score(self):
            return float(self.generation_seed % 1000003)

    result = es_search.run(Probe(), generations=3, population=4, n_jobs=2, seed=1,
                           progress=False)
    per_generation = [set(r["scores"]) for r in result.history]
    assert all(len(s) == 1 for s in per_generation)
    assert len(set.union(*per_generation)) == 3
    assert Probe().generation_seed is None


class FailsAt(Quadratic):
    """Scoring raises for candidate 0 of generation ``at`` (seed ``KW["seed"]``)."""

    def __init__(self, at):
        super().__init__()
        self.fail_seed = task_seed(KW["seed"], at, 0)

    def score(self, **kwargs):
        if self.task_seed == self.fail_seed:
            raise RuntimeError("the simulator crashed")
        return super().score(**kwargs)


class ErrorRecorder(Recorder):
    def on_error(self, error):
        self.events.append(("error", type(error).__name__))


def test_a_failing_run_calls_on_error_not_on_end_and_reraises():
    recorder = ErrorRecorder()
    with pytest.raises(es_search.ScoreError, match="simulator crashed"):
        es_search.run(FailsAt(2), generations=5, callbacks=[recorder], **KW)
    assert recorder.events[-3:] == [("generation", 0), ("generation", 1),
                                    ("error", "ScoreError")]


def test_an_on_error_that_raises_is_a_warning_and_never_hides_the_run_error():
    class Broken(Callback):
        def on_error(self, error):
            raise OSError("disk full")

    after = ErrorRecorder()
    with pytest.warns(RuntimeWarning, match="on_error raised OSError.*disk full"):
        with pytest.raises(es_search.ScoreError):
            es_search.run(FailsAt(1), generations=3, callbacks=[Broken(), after], **KW)
    assert after.events[-1] == ("error", "ScoreError")  # the next callback still heard
