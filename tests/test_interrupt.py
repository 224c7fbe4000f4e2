"""Ctrl-C or SIGTERM in run(): the workers stop at once, the checkpoint is intact, the message says
how to resume."""
from __future__ import annotations

import os
import signal

import pytest

import es_search
from es_search import checkpoint
from es_search.folder import CHECKPOINT
from es_search.seeding import task_seed

import agents


SEED = 11
KW = dict(population=4, sigma=0.3, seed=SEED, progress=False)


# ----------------------------------------------------------------- Ctrl-C in run()
def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (dead, not yet reaped) counts as gone
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.parametrize("signum, error", [("SIGINT", KeyboardInterrupt),
                                            ("SIGTERM", es_search.Terminated)])
def test_ctrl_c_or_sigterm_in_run_kills_the_workers_promptly_and_says_how_to_resume(
        tmp_path, capsys, signum, error, ctrl_c):
    import signal
    import threading
    import time

    pids = tmp_path / "pids"
    pids.mkdir()
    agent = agents.Sleepy(str(pids), {task_seed(SEED, -1, i) for i in range(4)})
    sent = []

    def interrupt():
        while len(os.listdir(pids)) < 2:  # both workers are inside score()
            time.sleep(0.01)
        sent.append(time.monotonic())
        os.kill(os.getpid(), getattr(signal, signum))

    threading.Thread(target=interrupt, daemon=True).start()
    # Python's default, as in a fresh process (another library, e.g. Ray, may have
    # installed its own handler in this test process: es_search would keep it)
    previous = signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        with pytest.raises(error) as info:
            es_search.run(agent, generations=3, n_jobs=2, out=tmp_path / "run",
                          sequential_fallback=False, **KW)
        # the run's handler is gone with its workers: SIGTERM is the default again
        assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert time.monotonic() - sent[0] < 5  # not the minute the tasks would take
    workers = [int(p) for p in os.listdir(pids)]
    deadline = time.monotonic() + 5
    while any(map(_alive, workers)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(map(_alive, workers))
    (note,) = info.value.__notes__  # under the traceback
    assert "interrupted after 0 completed generation(s)" in note and "resume=True" in note
    assert checkpoint.load(tmp_path / "run" / CHECKPOINT)["generation"] == 0


# ------------------------------------------------------- the context managers alone
def test_sigterm_inside_a_deferred_block_is_raised_when_the_block_ends():
    import signal

    from es_search.interrupt import deferred_sigint, sigterm_as_interrupt

    written = []
    previous = signal.signal(signal.SIGTERM, signal.SIG_DFL)  # as in a fresh process
    with sigterm_as_interrupt():
        with pytest.raises(es_search.Terminated):
            with deferred_sigint():
                os.kill(os.getpid(), signal.SIGTERM)
                written.append("the rest of the block")  # not cut short
        assert written == ["the rest of the block"]
        with pytest.raises(es_search.Terminated):  # outside a deferred block: at once
            os.kill(os.getpid(), signal.SIGTERM)
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    signal.signal(signal.SIGTERM, previous)


def test_sigterm_stays_handled_until_the_last_of_two_blocks_closes():
    """Two Evaluators open at once (two runs interleaved by a program) may close in
    either order: while either has workers, a SIGTERM must still take the Ctrl-C way."""
    import signal

    from es_search.interrupt import sigterm_as_interrupt

    previous = signal.signal(signal.SIGTERM, signal.SIG_DFL)  # as in a fresh process
    try:
        first, second = sigterm_as_interrupt(), sigterm_as_interrupt()
        first.__enter__()
        second.__enter__()
        first.__exit__(None, None, None)  # the first one closes first
        assert signal.getsignal(signal.SIGTERM) != signal.SIG_DFL  # (or pytest dies)
        with pytest.raises(es_search.Terminated):
            os.kill(os.getpid(), signal.SIGTERM)
        second.__exit__(None, None, None)
        assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
        second.__exit__(None, None, None)  # closing twice changes nothing
        assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_a_programs_own_sigterm_handler_is_kept():
    import signal

    from es_search.interrupt import deferred_sigint, sigterm_as_interrupt

    seen = []

    def mine(signum, frame):
        seen.append(signum)

    previous = signal.signal(signal.SIGTERM, mine)
    try:
        with sigterm_as_interrupt(), deferred_sigint():
            assert signal.getsignal(signal.SIGTERM) is mine
            os.kill(os.getpid(), signal.SIGTERM)
        assert seen == [signal.SIGTERM]
    finally:
        signal.signal(signal.SIGTERM, previous)


def _exit_on_sigterm(signum, frame):  # what Ray's ray.init() installs
    raise SystemExit(signum)


@pytest.mark.parametrize("programs", [signal.SIG_DFL, _exit_on_sigterm],
                         ids=["default", "the-programs-own"])
def test_a_forked_child_still_dies_of_sigterm(programs):
    """multiprocessing's Pool.terminate() stops its forked workers with SIGTERM: they
    inherit the handler, ours or the program's own, which must not run there (a worker
    blocked on a queue lock would never exit, and the pool would wait for it: seen with
    Ray's handler and the multiprocessing backend)."""
    import signal

    from es_search.interrupt import sigterm_as_interrupt

    previous = signal.signal(signal.SIGTERM, programs)
    try:
        with sigterm_as_interrupt():
            ready, told = os.pipe()
            pid = os.fork()
            if pid == 0:  # the child: say it runs, then wait to be terminated
                try:
                    import time
                    os.write(told, b"1")
                    time.sleep(30)
                finally:
                    os._exit(3)  # reached only if SIGTERM became an exception
            os.read(ready, 1)  # (a signal before the child's after-fork reset is lost)
            os.kill(pid, signal.SIGTERM)
            _, status = os.waitpid(pid, 0)
        assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGTERM
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_outside_es_search_a_fork_keeps_the_programs_handler():
    import signal
    previous = signal.signal(signal.SIGTERM, _exit_on_sigterm)
    try:
        ready, told = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.write(told, b"1" if signal.getsignal(signal.SIGTERM) is _exit_on_sigterm
                     else b"0")
            os._exit(0)
        assert os.read(ready, 1) == b"1"
        os.waitpid(pid, 0)
    finally:
        signal.signal(signal.SIGTERM, previous)

