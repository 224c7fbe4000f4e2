import os
import signal
import sys

sys.path.insert(0, os.path.dirname(__file__))
# the repository root: benchmarks.harness, what the benchmark tests test
sys.path.insert(1, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import cloudpickle  # noqa: E402
import pytest  # noqa: E402

import agents  # noqa: E402

# Worker processes (loky, dask) need not import the tests folder: send these by value.
cloudpickle.register_pickle_by_value(agents)

try:  # property tests draw the same examples on every run: a test fails always or never
    from hypothesis import settings as _hypothesis_settings
except ImportError:  # pragma: no cover - the test extra installs it
    pass
else:
    _hypothesis_settings.register_profile("deterministic", derandomize=True)
    _hypothesis_settings.load_profile("deterministic")


@pytest.fixture(scope="module")
def cluster():
    """A dask.distributed LocalCluster of 2 single-thread worker processes, and a Client
    (one per test module; skipped without the ``dask`` extra)."""
    distributed = pytest.importorskip("distributed")
    cluster = distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                       dashboard_address=None)
    client = distributed.Client(cluster)
    yield cluster, client
    client.close()
    try:
        cluster.close()
    except KeyError:  # distributed's own race: the 'remove' of a worker a test killed,
        pass  # handled after its entry left the cluster's view (spec.py, on close)


@pytest.fixture(scope="module")
def ray_session(request):
    """A local Ray (2 CPUs) for one test module; skipped without the ``ray`` extra.

    Ray pickles with its own cloudpickle: the test module and ``agents`` go by value,
    as the workers cannot import the tests folder."""
    ray = pytest.importorskip("ray")
    for module in (agents, request.module):
        ray.cloudpickle.register_pickle_by_value(module)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


@pytest.fixture
def ctrl_c():
    """Python's Ctrl-C handler (KeyboardInterrupt) in this process for the test, as in
    a program started from a terminal, and SIGINT's default in the processes it starts.

    A test of Ctrl-C sets the handler it tests: started in the background (nohup,
    ``cmd &`` in a script), pytest and its children begin with SIGINT ignored, which
    es_search rightly keeps. A handler, unlike SIG_IGN, is reset by exec."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


@pytest.fixture(autouse=True)
def no_disk_sync(monkeypatch):
    """Run folders in this process skip the disk sync of their writes: fsync costs up to
    tens of ms a write on a busy disk (9/10 of a 40-generation run with a folder), and
    what a test reads back is in the page cache either way. A bad descriptor still
    raises, as fsync's own check does (os.fstat)."""
    monkeypatch.setattr(os, "fsync", os.fstat)
